//! The command line: parsing, logging set-up and the commands themselves.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand};
use mcp_middleware::upstream::StdioServer;
use mcp_middleware::{Proxy, SessionOptions, registry};

use crate::output::Output;
use crate::{model_config, models};

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
    /// Show everything about one resource.
    Describe {
        #[command(subcommand)]
        what: DescribeWhat,
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
    /// Model configuration: a YAML or JSON file mapping model names to their config.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Set one config field, as MODEL.FIELD=VALUE (after --config; repeatable). VALUE is read as
    /// JSON when it parses, else as a string.
    #[arg(long = "set", value_name = "MODEL.FIELD=VALUE")]
    sets: Vec<String>,
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

#[derive(Debug, Subcommand)]
enum DescribeWhat {
    /// A proxy model: its chain, hooks, synthetic tools, observers and config schema.
    #[command(alias = "proxymodels")]
    Proxymodel {
        /// The model's name.
        name: String,
        /// Output format.
        #[arg(long, short = 'o', value_enum, default_value_t = Output::Table)]
        output: Output,
    },
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
        } => models::get(output),
        Command::Describe {
            what: DescribeWhat::Proxymodel { name, output },
        } => models::describe(&name, output),
    }
}

fn proxy(args: ProxyArgs) -> anyhow::Result<()> {
    let model = registry::find(&args.model)?;
    let configs = model_config::load(args.config.as_deref(), &args.sets)?;
    let Some((program, rest)) = args.command.split_first() else {
        bail!("no upstream command: give it after `--`, e.g. `mcpctl proxy -- node server.js`");
    };
    let server = StdioServer::new(program).args(rest);
    let mut options = SessionOptions::default();
    options.request_timeout =
        (args.request_timeout > 0).then(|| Duration::from_secs(args.request_timeout));
    options.max_message_bytes = args.max_message_bytes;
    let mut proxy = Proxy::new(server).model_descriptor(model).options(options);
    for (name, config) in configs {
        proxy = proxy.config(name, config);
    }
    Ok(proxy.run_stdio()?)
}
