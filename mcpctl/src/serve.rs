//! `mcpctl serve PROJECT` and `mcpctl serve --model M -- CMD ARGS...`: MCP over streamable HTTP
//! at `/mcp` (SPEC T2), for the same proxy `mcpctl proxy` serves on stdio. Every HTTP session
//! gets its own upstream (the project's servers, or the command), as every stdio client does.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use mcp_middleware::http::HttpOptions;
use mcp_middleware::proxy::stop_signal;
use mcpctl::store::{ProjectSpec, Store};

use crate::proxy::{ProxyArgs, build};

/// `serve`'s arguments: those of `proxy`, and where and how to listen.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    pub(crate) proxy: ProxyArgs,
    /// The address to listen on. Default: the project's `listen`, else 127.0.0.1:8080
    /// (loopback only).
    #[arg(long, value_name = "ADDR")]
    pub(crate) listen: Option<SocketAddr>,
    /// A `Host` to accept besides the loopback names (repeatable; `*` for any), for a proxy
    /// reached under another name. Hosts not listed are refused (DNS-rebinding protection).
    #[arg(long = "allow-host", value_name = "HOST")]
    pub(crate) allow_hosts: Vec<String>,
    /// A browser `Origin` to accept besides loopback origins (repeatable; `*` for any).
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub(crate) allow_origins: Vec<String>,
    /// How many sessions may be open at once.
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub(crate) max_sessions: usize,
    /// Seconds a session may stay idle before it is ended (and its upstream stopped).
    #[arg(long, default_value_t = 600, value_name = "SECS")]
    pub(crate) idle_timeout: u64,
    /// The largest request body accepted, in bytes.
    #[arg(long, default_value_t = 4 * 1024 * 1024, value_name = "BYTES")]
    pub(crate) max_body_bytes: usize,
}

/// Serves until SIGTERM, SIGINT or SIGHUP, then shuts down gracefully.
pub(crate) fn run(args: ServeArgs) -> anyhow::Result<()> {
    let listen = match (args.listen, &args.proxy.project) {
        (Some(listen), _) => listen,
        (None, Some(project)) => {
            let stored = Store::from_env()?.get::<ProjectSpec>(project)?;
            match stored.spec.listen {
                Some(listen) => listen.parse().with_context(|| {
                    format!("project `{project}`: `listen` is not an address: `{listen}`")
                })?,
                None => HttpOptions::default().listen,
            }
        }
        (None, None) => HttpOptions::default().listen,
    };
    let mut options = HttpOptions::default()
        .listen(listen)
        .max_sessions(args.max_sessions)
        .idle_timeout(Duration::from_secs(args.idle_timeout))
        .max_body_bytes(args.max_body_bytes);
    for host in args.allow_hosts {
        options = options.allow_host(host);
    }
    for origin in args.allow_origins {
        options = options.allow_origin(origin);
    }
    let proxy = build(&args.proxy)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let server = proxy.serve_http(options).await?;
        // The one line a person (or a test harness) starting it needs: the URL, with the port
        // when `--listen` said 0.
        eprintln!("listening on {}", server.url());
        let mut stopped = Ok(());
        server
            .shutdown_on(async {
                match stop_signal().await {
                    Ok(signal) => tracing::info!("{signal}; stopping"),
                    Err(err) => stopped = Err(err),
                }
            })
            .await;
        Ok(stopped?)
    })
}
