//! Serves a stdio MCP server over streamable HTTP: the library's HTTP front with no model, for
//! the interop and conformance tests (and as the smallest HTTP proxy to copy).
//!
//! ```text
//! cargo run -p mcp-middleware --example serve_http -- serve --listen 127.0.0.1:0 -- CMD ARGS...
//! ```
//!
//! Options before `--`: `--listen ADDR` (default `127.0.0.1:8080`), `--allow-host HOST` and
//! `--allow-origin ORIGIN` (repeatable), `--idle-timeout SECS`, `--max-sessions N`,
//! `--max-sessions-per-principal N`, `--max-connections N`, `--max-body-bytes N`. Once listening it writes `listening on URL` to stderr; logs follow
//! `RUST_LOG` (default `warn`) on stderr. Stops gracefully on SIGTERM, SIGINT or SIGHUP.

use std::process::ExitCode;
use std::time::Duration;

use mcp_middleware::Proxy;
use mcp_middleware::http::HttpOptions;
use mcp_middleware::upstream::StdioServer;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("serve_http: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("serve") {
        args.next();
    }
    let mut options = HttpOptions::default();
    let mut command = Vec::new();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--" => {
                command.extend(args.by_ref());
                break;
            }
            "--listen" => {
                let addr = value("--listen")?;
                options =
                    options.listen(addr.parse().map_err(|e| format!("--listen {addr}: {e}"))?);
            }
            "--allow-host" => options = options.allow_host(value("--allow-host")?),
            "--allow-origin" => options = options.allow_origin(value("--allow-origin")?),
            "--idle-timeout" => {
                let secs = value("--idle-timeout")?;
                let secs: f64 = secs
                    .parse()
                    .map_err(|e| format!("--idle-timeout {secs}: {e}"))?;
                options = options.idle_timeout(Duration::from_secs_f64(secs));
            }
            "--max-sessions" => {
                let n = value("--max-sessions")?;
                options = options
                    .max_sessions(n.parse().map_err(|e| format!("--max-sessions {n}: {e}"))?);
            }
            "--max-sessions-per-principal" => {
                let n = value("--max-sessions-per-principal")?;
                options = options.max_sessions_per_principal(
                    n.parse()
                        .map_err(|e| format!("--max-sessions-per-principal {n}: {e}"))?,
                );
            }
            "--max-connections" => {
                let n = value("--max-connections")?;
                options = options.max_connections(
                    n.parse()
                        .map_err(|e| format!("--max-connections {n}: {e}"))?,
                );
            }
            "--max-body-bytes" => {
                let n = value("--max-body-bytes")?;
                options = options.max_body_bytes(
                    n.parse()
                        .map_err(|e| format!("--max-body-bytes {n}: {e}"))?,
                );
            }
            other => return Err(format!("unknown option `{other}`")),
        }
    }
    let Some((program, rest)) = command.split_first() else {
        return Err("no upstream command: put it after `--`".to_owned());
    };
    let proxy = Proxy::new(StdioServer::new(program).args(rest));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let server = proxy.serve_http(options).await.map_err(|e| e.to_string())?;
        eprintln!("listening on {}", server.url());
        server
            .shutdown_on(async {
                let _ = mcp_middleware::proxy::stop_signal().await;
            })
            .await;
        Ok(())
    })
}
