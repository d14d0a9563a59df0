//! The command line: parsing, logging set-up and dispatch to the commands.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{ArgGroup, Parser, Subcommand};

use crate::output::Output;
use crate::{apply, audit, client, clients, completion, edit, models, proxy, resources, serve};

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
    #[arg(long, global = true, value_name = "PATH", env = "MCPCTL_LOG_FILE")]
    pub(crate) log_file: Option<PathBuf>,
    /// Log filter (`error`, `warn`, `info`, `debug`, `trace`, or tracing's directive syntax);
    /// overrides the MCPCTL_LOG environment variable.
    #[arg(long, global = true, value_name = "FILTER")]
    pub(crate) log: Option<String>,
    /// Log lines as text for people, or as JSON objects (one per line) for log collectors.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value_t = LogFormat::Text,
        value_name = "FORMAT",
        env = "MCPCTL_LOG_FORMAT"
    )]
    pub(crate) log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

/// How log lines are written (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    /// Human-readable lines (colored on a terminal, unless NO_COLOR is set).
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, `message` and the event's
    /// fields (`session` on a session's lines) at the top level.
    Json,
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
    /// Import the MCP servers a client's file lists (Claude Desktop, Claude Code, Cursor, VS
    /// Code) as servers and a project. Secrets become `${env:VAR}` references, never stored.
    ///
    /// Example: `mcpctl import ~/.config/Claude/claude_desktop_config.json --project desktop`
    Import(clients::import::ImportArgs),
    /// Write a client's entry for serving a project through mcpctl into the client's file
    /// (`FILE.bak` keeps the old one), or print it.
    ///
    /// Examples: `mcpctl install claude-desktop demo`; `mcpctl install vscode demo --print`;
    /// `mcpctl install cursor demo --url http://127.0.0.1:8080/mcp`
    Install(clients::install::InstallArgs),
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
    use tracing_subscriber::fmt::writer::BoxMakeWriter;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::{EnvFilter, Layer as _, fmt};
    type Filtered = tracing_subscriber::layer::Layered<EnvFilter, tracing_subscriber::Registry>;
    type Boxed = Box<dyn tracing_subscriber::Layer<Filtered> + Send + Sync>;
    let filter = match &cli.log {
        Some(filter) => {
            EnvFilter::try_new(filter).with_context(|| format!("bad --log filter `{filter}`"))?
        }
        None => EnvFilter::try_from_env("MCPCTL_LOG").unwrap_or_else(|_| EnvFilter::new("warn")),
    };
    let writer = match &cli.log_file {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open log file {}", path.display()))?;
            BoxMakeWriter::new(std::sync::Mutex::new(file))
        }
        None => BoxMakeWriter::new(std::io::stderr),
    };
    let ansi = cli.log_file.is_none() && color_on_stderr();
    if cli.log_format == LogFormat::Json {
        JSON_LINES.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    // A command that runs and ends (get, apply, edit, ...) says what it warns about in one
    // line, as a CLI does; the long-running ones (`proxy`, `serve`) log with time and level.
    let long_running = matches!(cli.command, Command::Proxy(_) | Command::Serve(_));
    let one_line = !long_running && cli.log.is_none() && cli.log_file.is_none();
    let layer: Boxed = match (cli.log_format, one_line) {
        // Fields at the top level, so a collector finds `session` where it finds `level`.
        (LogFormat::Json, _) => fmt::layer()
            .json()
            .flatten_event(true)
            .with_ansi(false)
            .with_writer(writer)
            .boxed(),
        (LogFormat::Text, true) => fmt::layer()
            .event_format(OneLine)
            .with_ansi(ansi)
            .with_writer(writer)
            .boxed(),
        (LogFormat::Text, false) => fmt::layer().with_ansi(ansi).with_writer(writer).boxed(),
    };
    // The long-running commands also keep the last lines for the admin API's log tail.
    let ring = long_running.then_some(crate::admin::logs::RingLayer);
    tracing_subscriber::registry()
        .with(filter)
        .with(layer)
        .with(ring)
        .init();
    Ok(())
}

/// Whether `--log-format json` is in force, for the lines written outside the log.
static JSON_LINES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Writes a line a person (or a harness) starting mcpctl needs whatever the log filter
/// (`listening on URL`, the final error) to stderr: as is, or as a JSON log line with `level`
/// under `--log-format json`, so every stderr line parses then.
pub(crate) fn say(level: &str, message: &str) {
    if JSON_LINES.load(std::sync::atomic::Ordering::Relaxed) {
        let time = chrono::DateTime::<chrono::Utc>::from(std::time::SystemTime::now())
            .to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        let line = serde_json::json!({
            "timestamp": time,
            "level": level,
            "target": "mcpctl",
            "message": message,
        });
        eprintln!("{line}");
    } else {
        eprintln!("{message}");
    }
}

/// Whether stderr gets colors: a terminal, and NO_COLOR unset or empty (no-color.org).
fn color_on_stderr() -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty());
    !no_color && std::io::IsTerminal::is_terminal(&std::io::stderr())
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
        json: cli.log_format == LogFormat::Json,
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
        Command::Import(args) => clients::import::run(&args),
        Command::Install(args) => clients::install::run(&args),
        Command::Completion { shell } => completion::print(shell),
    }
}

/// The clap command, for completions.
pub(crate) fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

#[cfg(test)]
mod tests {
    /// Every flag of `serve` and `proxy` can be set from the environment as
    /// `MCPCTL_<FLAG IN CAPS>`, so a container is configured without a command line; a flag
    /// added without its `env` fails here.
    #[test]
    fn every_serve_and_proxy_flag_has_its_environment_variable() {
        let mut command = super::command();
        command.build();
        for name in ["serve", "proxy"] {
            let sub = command
                .find_subcommand(name)
                .unwrap_or_else(|| panic!("no `{name}` command"));
            let mut checked = 0;
            for arg in sub.get_arguments() {
                // --log is read with MCPCTL_LOG by the filter itself; the command after `--` is
                // a list no variable spells well.
                if ["help", "version", "log", "command"].contains(&arg.get_id().as_str()) {
                    continue;
                }
                let spelled = arg.get_long().unwrap_or(arg.get_id().as_str());
                let wanted = format!("MCPCTL_{}", spelled.to_uppercase().replace('-', "_"));
                let env = arg.get_env().and_then(|e| e.to_str());
                assert_eq!(env, Some(wanted.as_str()), "`{name}`: {spelled}");
                checked += 1;
            }
            assert!(checked > 10, "`{name}`: only {checked} flags seen");
        }
    }
}
