//! The command line: parsing, logging set-up and dispatch to the commands.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{ArgGroup, Parser, Subcommand};

use crate::output::Output;
use crate::{apply, audit, client, completion, edit, models, proxy, resources, serve};

/// Run MCP proxy models in front of real MCP servers, and manage projects.
#[derive(Debug, Parser)]
#[command(name = "mcpctl", version, about, long_about = None)]
#[command(
    after_help = "Exit codes: 0 success; 1 error; 2 usage error; 3 a named resource \
    (project, server, prompt, proxy model) does not exist.\n\
    The store is in $MCPCTL_HOME (default ~/.mcpctl)."
)]
pub(crate) struct Cli {
    /// Write logs to this file instead of stderr. Logs never go to stdout.
    #[arg(long, global = true, value_name = "PATH")]
    pub(crate) log_file: Option<PathBuf>,
    /// Log filter (`error`, `warn`, `info`, `debug`, `trace`, or tracing's directive syntax);
    /// overrides the MCPCTL_LOG environment variable.
    #[arg(long, global = true, value_name = "FILTER")]
    pub(crate) log: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve MCP on stdio for a project, or in front of one server started as a child process.
    ///
    /// Examples: `mcpctl proxy demo`;
    /// `mcpctl proxy --model passthrough -- npx -y @modelcontextprotocol/server-everything`
    Proxy(proxy::ProxyArgs),
    /// Serve MCP over streamable HTTP at /mcp, for a project or in front of one server started
    /// as a child process (one upstream per HTTP session). Loopback only unless told otherwise.
    ///
    /// Examples: `mcpctl serve demo --listen 127.0.0.1:8080`;
    /// `mcpctl serve --listen 127.0.0.1:8080 --model gate -- npx -y @modelcontextprotocol/server-everything`
    Serve(serve::ServeArgs),
    /// Connect to a project (or an ad-hoc proxy) as an MCP client and run steps: list and call
    /// tools, read resources, get prompts. Notifications the client receives go to stderr.
    ///
    /// Steps: `info`, `tools list`, `tools call NAME [JSON]`, `resources list`,
    /// `resources templates`, `resources read URI`, `prompts list`, `prompts get NAME [JSON]`,
    /// `ping`, `sleep MS`, or any `METHOD [JSON]` (a method with a `/`; `notifications/...` is
    /// sent as a notification). Several steps run in one session, in order.
    ///
    /// Examples: `mcpctl client demo tools list`;
    /// `mcpctl client demo tools call begin_session '{"intent":"fix a bug"}' tools list`;
    /// `mcpctl client --model gate tools list -- python3 server.py`
    Client(client::ClientArgs),
    /// List resources of a kind (all, or the named ones).
    Get {
        #[command(subcommand)]
        what: GetWhat,
    },
    /// Show everything about one resource.
    Describe {
        #[command(subcommand)]
        what: DescribeWhat,
    },
    /// Create or update resources from YAML files (several documents per file; `-` is stdin).
    Apply(apply::ApplyArgs),
    /// Delete resources. Proxy models are code: they cannot be deleted.
    Delete {
        #[command(subcommand)]
        what: DeleteWhat,
    },
    /// Change a resource: with flags (projects), or in $VISUAL / $EDITOR when none are given.
    Edit {
        #[command(subcommand)]
        what: EditWhat,
    },
    /// Check audit logs written by the `audit` proxy model.
    Audit {
        #[command(subcommand)]
        what: AuditWhat,
    },
    /// Print a shell completion script (e.g. `mcpctl completion bash > /etc/bash_completion.d/mcpctl`).
    Completion {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// `-o`, shared by every listing and describing command.
#[derive(Debug, Clone, Copy, clap::Args)]
pub(crate) struct OutputArg {
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Table)]
    pub(crate) output: Output,
}

/// Names to list (all when none).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct GetArgs {
    /// Only these (all when none).
    #[arg(value_name = "NAME")]
    pub(crate) names: Vec<String>,
    #[command(flatten)]
    pub(crate) output: OutputArg,
}

/// One name to describe.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct DescribeArgs {
    /// Its name.
    pub(crate) name: String,
    #[command(flatten)]
    pub(crate) output: OutputArg,
}

#[derive(Debug, Subcommand)]
enum GetWhat {
    /// The proxy models linked into this binary.
    #[command(alias = "proxymodel")]
    Proxymodels {
        #[command(flatten)]
        output: OutputArg,
    },
    /// Projects.
    #[command(alias = "project")]
    Projects(GetArgs),
    /// Servers.
    #[command(alias = "server")]
    Servers(GetArgs),
    /// Prompts.
    #[command(alias = "prompt")]
    Prompts(GetArgs),
}

#[derive(Debug, Subcommand)]
enum DescribeWhat {
    /// A proxy model: its chain, hooks, synthetic tools, observers and config schema.
    #[command(alias = "proxymodels")]
    Proxymodel(DescribeArgs),
    /// A project: its servers, prompts, model, chain and the config each model gets.
    #[command(alias = "projects")]
    Project(DescribeArgs),
    /// A server: how it is started or reached (`${env:VAR}` shown as written, never resolved).
    #[command(alias = "servers")]
    Server(DescribeArgs),
    /// A prompt: its tags and text.
    #[command(alias = "prompts")]
    Prompt(DescribeArgs),
}

/// Names to delete.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct DeleteArgs {
    /// The names.
    #[arg(required = true, value_name = "NAME")]
    pub(crate) names: Vec<String>,
}

#[derive(Debug, Subcommand)]
enum DeleteWhat {
    /// Projects.
    #[command(alias = "projects")]
    Project(DeleteArgs),
    /// Servers (not while a project names them).
    #[command(alias = "servers")]
    Server(DeleteArgs),
    /// Prompts (not while a project names them).
    #[command(alias = "prompts")]
    Prompt(DeleteArgs),
    /// Refused: proxy models are code. Accepted here only to say so.
    #[command(hide = true, alias = "proxymodels")]
    Proxymodel(DeleteArgs),
}

#[derive(Debug, Subcommand)]
enum AuditWhat {
    /// Check that no record of an audit log was altered, removed, reordered or inserted.
    /// Exit status 0 when the log is intact, 1 when it is not; the first bad line is named.
    ///
    /// Example: `mcpctl audit verify audit.log --key-env AUDIT_KEY`
    Verify(audit::VerifyArgs),
}

#[derive(Debug, Subcommand)]
enum EditWhat {
    /// A project.
    #[command(alias = "projects")]
    #[command(group(ArgGroup::new("flags").multiple(true)))]
    Project(Box<edit::ProjectEdits>),
    /// A server, in $VISUAL / $EDITOR.
    #[command(alias = "servers")]
    Server {
        /// Its name.
        name: String,
    },
    /// A prompt, in $VISUAL / $EDITOR.
    #[command(alias = "prompts")]
    Prompt {
        /// Its name.
        name: String,
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
    // A command that runs and ends (get, apply, edit, ...) says what it warns about in one
    // line, as a CLI does; the long-running ones (`proxy`, `serve`) log with time and level.
    let long_running = matches!(cli.command, Command::Proxy(_) | Command::Serve(_));
    if !long_running && cli.log.is_none() && cli.log_file.is_none() {
        builder
            .event_format(OneLine)
            .with_writer(std::io::stderr)
            .init();
        return Ok(());
    }
    // The long-running commands also keep the last lines for the admin API's log tail.
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let ring = crate::admin::logs::RingLayer;
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
                .finish()
                .with(ring)
                .init();
        }
        None => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_writer(std::io::stderr)
            .finish()
            .with(ring)
            .init(),
    }
    Ok(())
}

/// Log events as `mcpctl: warning: MESSAGE`, one line each: what an ordinary command prints.
struct OneLine;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for OneLine
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let level = match *event.metadata().level() {
            tracing::Level::ERROR => "error",
            tracing::Level::WARN => "warning",
            _ => "note",
        };
        write!(writer, "mcpctl: {level}: ")?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

pub(crate) fn run(cli: Cli) -> anyhow::Result<()> {
    use mcpctl::store::{ProjectSpec, PromptSpec, ServerSpec};
    let logging = client::Logging {
        log: cli.log.clone(),
        log_file: cli.log_file.clone(),
    };
    match cli.command {
        Command::Proxy(args) => proxy::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Client(args) => client::run(args, &logging),
        Command::Get { what } => match what {
            GetWhat::Proxymodels { output } => models::get(output.output),
            GetWhat::Projects(args) => resources::get::<ProjectSpec>(&args),
            GetWhat::Servers(args) => resources::get::<ServerSpec>(&args),
            GetWhat::Prompts(args) => resources::get::<PromptSpec>(&args),
        },
        Command::Describe { what } => match what {
            DescribeWhat::Proxymodel(args) => models::describe(&args.name, args.output.output),
            DescribeWhat::Project(args) => resources::describe_project(&args),
            DescribeWhat::Server(args) => resources::describe_server(&args),
            DescribeWhat::Prompt(args) => resources::describe_prompt(&args),
        },
        Command::Apply(args) => apply::apply(&args),
        Command::Delete { what } => match what {
            DeleteWhat::Project(args) => apply::delete::<ProjectSpec>(&args),
            DeleteWhat::Server(args) => apply::delete::<ServerSpec>(&args),
            DeleteWhat::Prompt(args) => apply::delete::<PromptSpec>(&args),
            DeleteWhat::Proxymodel(args) => models::refuse_delete(&args.names),
        },
        Command::Edit { what } => match what {
            EditWhat::Project(edits) => edit::project(*edits),
            EditWhat::Server { name } => edit::in_editor::<ServerSpec>(&name),
            EditWhat::Prompt { name } => edit::in_editor::<PromptSpec>(&name),
        },
        Command::Audit { what } => match what {
            AuditWhat::Verify(args) => audit::verify_command(&args),
        },
        Command::Completion { shell } => completion::print(shell),
    }
}

/// The clap command, for completions.
pub(crate) fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}
