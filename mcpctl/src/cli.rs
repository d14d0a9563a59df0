//! The command line: parsing, logging set-up and the commands themselves.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand, ValueEnum};
use mcp_middleware::upstream::StdioServer;
use mcp_middleware::{Proxy, SessionOptions, registry};

/// Run MCP proxy models in front of real MCP servers.
#[derive(Debug, Parser)]
#[command(name = "mcpctl", version, about, long_about = None)]
pub(crate) struct Cli {
    /// Write logs to this file instead of stderr. Logs never go to stdout.
    #[arg(long, global = true, value_name = "PATH")]
    log_file: Option<PathBuf>,
    /// Log filter (`error`, `warn`, `info`, `debug`, `trace`, or tracing's directive syntax);
    /// overrides the MCPCTL_LOG environment variable.
    #[arg(long, global = true, value_name = "FILTER")]
    log: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve MCP on stdio, in front of an upstream server started as a child process.
    ///
    /// Example: mcpctl proxy --model passthrough -- npx -y @modelcontextprotocol/server-everything
    Proxy(ProxyArgs),
    /// List resources of a kind.
    Get {
        #[command(subcommand)]
        what: GetWhat,
    },
}

#[derive(Debug, clap::Args)]
struct ProxyArgs {
    /// The proxy model to run (`mcpctl get proxymodels` lists them).
    #[arg(long, short = 'm', default_value = "passthrough")]
    model: String,
    /// Seconds a request may wait for the upstream before the client gets an error (0: no limit).
    /// Progress notifications restart the wait.
    #[arg(long, default_value_t = 300, value_name = "SECS")]
    request_timeout: u64,
    /// The largest message accepted from either side, in bytes.
    #[arg(long, default_value_t = 64 * 1024 * 1024, value_name = "BYTES")]
    max_message_bytes: usize,
    /// The upstream server's command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

#[derive(Debug, Subcommand)]
enum GetWhat {
    /// The proxy models linked into this binary.
    #[command(alias = "proxymodel")]
    Proxymodels {
        /// Output format.
        #[arg(long, short = 'o', value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Output {
    Table,
    Json,
}

pub(crate) fn init_logging(cli: &Cli) -> anyhow::Result<()> {
    use tracing_subscriber::EnvFilter;
    let filter = match &cli.log {
        Some(filter) => {
            EnvFilter::try_new(filter).with_context(|| format!("bad --log filter `{filter}`"))?
        }
        None => EnvFilter::try_from_env("MCPCTL_LOG").unwrap_or_else(|_| EnvFilter::new("warn")),
    };
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match &cli.log_file {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open log file {}", path.display()))?;
            builder
                .with_ansi(false)
                .with_writer(std::sync::Mutex::new(file))
                .init();
        }
        None => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_writer(std::io::stderr)
            .init(),
    }
    Ok(())
}

pub(crate) fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Proxy(args) => proxy(args),
        Command::Get {
            what: GetWhat::Proxymodels { output },
        } => get_proxymodels(output),
    }
}

fn proxy(args: ProxyArgs) -> anyhow::Result<()> {
    let model = registry::find(&args.model)?;
    let Some((program, rest)) = args.command.split_first() else {
        bail!("no upstream command: give it after `--`, e.g. `mcpctl proxy -- node server.js`");
    };
    let server = StdioServer::new(program).args(rest);
    let mut options = SessionOptions::default();
    options.request_timeout =
        (args.request_timeout > 0).then(|| Duration::from_secs(args.request_timeout));
    options.max_message_bytes = args.max_message_bytes;
    // One session per process: a single thread runs the reader, the session loop and the writer,
    // so a message never waits for another thread to wake (measured: ~2x lower latency than two
    // worker threads on a 2-core machine).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let serve = Proxy::new(server)
            .model(model)
            .options(options)
            .serve_stdio();
        tokio::select! {
            served = serve => served.map_err(anyhow::Error::from),
            signal = terminated() => {
                // Dropping the proxy kills the upstream child (it is never left orphaned).
                tracing::info!("{}; stopping", signal?);
                Ok(())
            }
        }
    })
}

/// Resolves when the process is asked to stop (SIGTERM, SIGINT, SIGHUP), naming the signal.
async fn terminated() -> anyhow::Result<&'static str> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    let mut hup = signal(SignalKind::hangup()).context("cannot watch SIGHUP")?;
    Ok(tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
        _ = hup.recv() => "SIGHUP",
    })
}

fn get_proxymodels(output: Output) -> anyhow::Result<()> {
    let models = registry::models()?;
    let mut out = std::io::stdout().lock();
    match output {
        Output::Table => {
            let width = models
                .iter()
                .map(|m| m.name.len())
                .max()
                .unwrap_or(4)
                .max(4);
            writeln!(out, "{:width$}  {:<16}  SUMMARY", "NAME", "EXTENDS")?;
            for model in models {
                let parents = if model.parents.is_empty() {
                    "-".to_owned()
                } else {
                    model.parents.join(",")
                };
                writeln!(
                    out,
                    "{:width$}  {:<16}  {}",
                    model.name, parents, model.summary
                )?;
            }
        }
        Output::Json => {
            let list: Vec<serde_json::Value> = models
                .iter()
                .map(|m| serde_json::json!({"name": m.name, "summary": m.summary, "extends": m.parents}))
                .collect();
            writeln!(out, "{}", serde_json::to_string_pretty(&list)?)?;
        }
    }
    Ok(())
}
