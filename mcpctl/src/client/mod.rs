//! `mcpctl client`: an MCP client for people. It starts `mcpctl proxy ...` (this same binary)
//! as a child, speaks newline-delimited JSON-RPC 2.0 on the child's stdin and stdout
//! (`initialize`, `notifications/initialized`, then each step in order, in one session), prints
//! each result on stdout and every notification it receives on stderr, as it arrives. So the
//! effect of a model is visible without an LLM client: with gate, `tools list`, then
//! `tools call begin_session '{"intent":"..."}'` (stderr shows
//! `notifications/tools/list_changed`), then `tools list` again.
//!
//! Requests the server sends the client are answered: `ping` with `{}`, `roots/list` with no
//! roots, anything else with "method not found" (the client declares no capabilities). A
//! JSON-RPC error in answer to a step stops the session (exit 1); a tool result with
//! `isError: true` is a result, printed, and the session goes on.

mod print;
mod steps;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use mcpctl::store::{ProjectSpec, Store};
use serde_json::{Map, Value, json};

use crate::cli::OutputArg;
use crate::output::Output;
use steps::Step;

/// The protocol version the client asks for.
const PROTOCOL_VERSION: &str = "2025-11-25";
/// The most pages a list step follows.
const MAX_PAGES: usize = 1000;

/// `client`'s arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct ClientArgs {
    /// The project to connect through (left out when a command follows `--`), then the steps.
    #[arg(value_name = "PROJECT|STEP")]
    words: Vec<String>,
    /// The proxy model (for a project: instead of the project's).
    #[arg(long, short = 'm')]
    model: Option<String>,
    /// Model configuration file, as for `mcpctl proxy`.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// One config field, MODEL.FIELD=VALUE, as for `mcpctl proxy` (repeatable).
    #[arg(long = "set", value_name = "MODEL.FIELD=VALUE")]
    sets: Vec<String>,
    /// Read the steps from FILE (`-`: stdin), one per line, after any given as words.
    #[arg(long, value_name = "FILE")]
    script: Option<PathBuf>,
    /// Seconds to wait for each answer.
    #[arg(long, default_value_t = 60, value_name = "SECS")]
    timeout: u64,
    #[command(flatten)]
    output: OutputArg,
    /// An ad-hoc upstream: its command and arguments, after `--` (instead of a project).
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

/// The logging flags given to `mcpctl`, passed on to the proxy child.
#[derive(Debug, Clone, Default)]
pub(crate) struct Logging {
    /// `--log`.
    pub(crate) log: Option<String>,
    /// `--log-file`.
    pub(crate) log_file: Option<PathBuf>,
    /// `--log-format json`.
    pub(crate) json: bool,
}

/// Runs the steps in one session.
pub(crate) fn run(args: ClientArgs, logging: &Logging) -> anyhow::Result<()> {
    let (project, words) = if args.command.is_empty() {
        match args.words.split_first() {
            Some((project, words)) => (Some(project.clone()), words.to_vec()),
            None => bail!(
                "give a project (`mcpctl client PROJECT STEP...`) or a command after `--` (`mcpctl client STEP... -- CMD ARGS...`)"
            ),
        }
    } else {
        (None, args.words.clone())
    };
    let mut steps = steps::from_words(&words).map_err(|e| anyhow!("{e}"))?;
    if let Some(script) = &args.script {
        let text = if script.as_os_str() == "-" {
            std::io::read_to_string(std::io::stdin()).context("cannot read the script on stdin")?
        } else {
            std::fs::read_to_string(script)
                .with_context(|| format!("cannot read the script {}", script.display()))?
        };
        let label = script.display();
        steps.extend(steps::from_script(&text).map_err(|e| anyhow!("script {label}, {e}"))?);
    }
    if steps.is_empty() {
        bail!(
            "no steps: say what to do, e.g. `tools list` (`mcpctl client --help` lists the steps)"
        );
    }
    // Fail here, with the right exit code, rather than in the child.
    match &project {
        Some(name) => {
            Store::from_env()?.get::<ProjectSpec>(name)?;
        }
        None => {
            mcp_middleware::registry::find(args.model.as_deref().unwrap_or("passthrough"))?;
        }
    }
    let mut command = Command::new(std::env::current_exe().context("cannot find mcpctl itself")?);
    command.arg("proxy");
    if let Some(project) = &project {
        command.arg(project);
    }
    if let Some(model) = &args.model {
        command.args(["--model", model]);
    }
    if let Some(config) = &args.config {
        command.arg("--config").arg(config);
    }
    for set in &args.sets {
        command.args(["--set", set]);
    }
    if let Some(log) = &logging.log {
        command.args(["--log", log]);
    }
    if let Some(file) = &logging.log_file {
        command.arg("--log-file").arg(file);
    }
    if logging.json {
        command.args(["--log-format", "json"]);
    }
    if !args.command.is_empty() {
        command.arg("--").args(&args.command);
    }
    let mut session = Session::start(command, Duration::from_secs(args.timeout.max(1)))?;
    let result = session.run(&steps, args.output.output);
    session.close();
    result
}

/// A running proxy child and the client's side of its session.
struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    incoming: Receiver<Value>,
    next_id: u64,
    timeout: Duration,
    initialized: Option<Value>,
}

impl Session {
    fn start(mut command: Command, timeout: Duration) -> anyhow::Result<Self> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("cannot start `mcpctl proxy`")?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow!("the proxy's stdout is not piped"))?;
        let (tx, incoming) = channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.trim().is_empty() {
                    continue;
                }
                match serde_json::from_str::<Value>(&line) {
                    Ok(message) if is_notification(&message) => show_notification(&message),
                    Ok(message) => {
                        if tx.send(message).is_err() {
                            break;
                        }
                    }
                    Err(err) => eprintln!(
                        "mcpctl client: the proxy wrote a line that is not JSON ({err}): {line}"
                    ),
                }
            }
        });
        Ok(Self {
            stdin: child.stdin.take(),
            child,
            incoming,
            next_id: 1,
            timeout,
            initialized: None,
        })
    }

    fn run(&mut self, steps: &[Step], output: Output) -> anyhow::Result<()> {
        let init = self.request(
            "initialize",
            json!({
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "mcpctl-client", "version": env!("CARGO_PKG_VERSION")},
            }),
        )?;
        self.notify("notifications/initialized", json!({}))?;
        self.initialized = Some(init);
        let shown: Vec<&Step> = steps
            .iter()
            .filter(|s| !matches!(s, Step::Notify { .. } | Step::Sleep(_)))
            .collect();
        let headers = output == Output::Table && shown.len() > 1;
        let mut printed = 0;
        for step in steps {
            let result = match step {
                Step::Info => self.initialized.clone().unwrap_or(Value::Null),
                Step::Request {
                    method,
                    params,
                    pages,
                    ..
                } => match pages {
                    Some(member) => self.list(method, member)?,
                    None => self.request(method, params.clone())?,
                },
                Step::Notify { method, params } => {
                    self.notify(method, params.clone())?;
                    continue;
                }
                Step::Sleep(ms) => {
                    self.wait(Duration::from_millis(*ms))?;
                    continue;
                }
            };
            if headers {
                if printed > 0 {
                    crate::output::outln!()?;
                }
                crate::output::outln!("== {step} ==")?;
            }
            print::result(step, &result, output, printed)?;
            printed += 1;
        }
        Ok(())
    }

    /// A list request, following `nextCursor` to the last page; the items of every page are
    /// gathered under `member`.
    fn list(&mut self, method: &str, member: &str) -> anyhow::Result<Value> {
        let mut params = Map::new();
        let mut all: Option<Value> = None;
        for _ in 0..MAX_PAGES {
            let page = self.request(method, Value::Object(params.clone()))?;
            let cursor = page.get("nextCursor").cloned();
            match &mut all {
                None => all = Some(page),
                Some(all) => {
                    if let (Some(Value::Array(items)), Some(Value::Array(more))) =
                        (all.get_mut(member), page.get(member))
                    {
                        items.extend(more.iter().cloned());
                    }
                }
            }
            match cursor {
                Some(Value::String(cursor)) if !cursor.is_empty() => {
                    params.insert("cursor".to_owned(), Value::String(cursor));
                }
                _ => break,
            }
        }
        let mut all = all.unwrap_or(Value::Null);
        if let Some(map) = all.as_object_mut() {
            map.remove("nextCursor");
        }
        Ok(all)
    }

    fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .map_err(|e| anyhow!("cannot send `{method}` to the proxy: {e}"))?;
        let deadline = Instant::now() + self.timeout;
        loop {
            let message = match self
                .incoming
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(message) => message,
                Err(RecvTimeoutError::Timeout) => bail!(
                    "no answer to `{method}` within {} s (raise --timeout)",
                    self.timeout.as_secs()
                ),
                Err(RecvTimeoutError::Disconnected) => bail!(
                    "the proxy exited before answering `{method}` ({}); its stderr above says why",
                    self.exit_status()
                ),
            };
            if message.get("method").is_some() {
                self.answer_server_request(&message)?;
                continue;
            }
            if message.get("id") != Some(&json!(id)) {
                eprintln!("mcpctl client: ignoring an answer to no request of ours: {message}");
                continue;
            }
            if let Some(error) = message.get("error") {
                bail!(
                    "`{method}` failed: {} (JSON-RPC error {}){}",
                    error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("no message"),
                    error.get("code").map(Value::to_string).unwrap_or_default(),
                    error
                        .get("data")
                        .map(|d| format!("; data: {d}"))
                        .unwrap_or_default()
                );
            }
            return Ok(message.get("result").cloned().unwrap_or(Value::Null));
        }
    }

    fn notify(&mut self, method: &str, params: Value) -> anyhow::Result<()> {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .map_err(|e| anyhow!("cannot send `{method}` to the proxy: {e}"))
    }

    /// Waits `time`, answering any server request that arrives (notifications are shown by the
    /// reader as they come).
    fn wait(&mut self, time: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + time;
        loop {
            match self
                .incoming
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(message) if message.get("method").is_some() => {
                    self.answer_server_request(&message)?;
                }
                Ok(message) => {
                    eprintln!("mcpctl client: ignoring an answer to no request of ours: {message}")
                }
                Err(RecvTimeoutError::Timeout) => return Ok(()),
                Err(RecvTimeoutError::Disconnected) => bail!(
                    "the proxy exited ({}); its stderr above says why",
                    self.exit_status()
                ),
            }
        }
    }

    fn answer_server_request(&mut self, request: &Value) -> anyhow::Result<()> {
        let method = request.get("method").and_then(Value::as_str).unwrap_or("");
        let id = request.get("id").cloned().unwrap_or(Value::Null);
        eprintln!("request from the server: {method}");
        let answer = match method {
            "ping" => json!({"jsonrpc": "2.0", "id": id, "result": {}}),
            "roots/list" => json!({"jsonrpc": "2.0", "id": id, "result": {"roots": []}}),
            _ => json!({"jsonrpc": "2.0", "id": id, "error": {
                "code": -32601,
                "message": format!("mcpctl client does not support `{method}`"),
            }}),
        };
        self.send(&answer)
            .map_err(|e| anyhow!("cannot answer `{method}` to the proxy: {e}"))
    }

    fn send(&mut self, message: &Value) -> std::io::Result<()> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| std::io::Error::other("the proxy's stdin is closed"))?;
        writeln!(stdin, "{message}")?;
        stdin.flush()
    }

    fn exit_status(&mut self) -> String {
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.to_string();
            }
            thread::sleep(Duration::from_millis(20));
        }
        "still running".to_owned()
    }

    /// Closes the proxy's stdin (ending the session) and waits for it, killing it after a grace
    /// period.
    fn close(mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn is_notification(message: &Value) -> bool {
    message.get("method").is_some() && message.get("id").is_none()
}

/// `notification: METHOD PARAMS` on stderr (params left out when empty).
fn show_notification(message: &Value) {
    let method = message.get("method").and_then(Value::as_str).unwrap_or("?");
    match message.get("params") {
        None | Some(Value::Null) => eprintln!("notification: {method}"),
        Some(Value::Object(map)) if map.is_empty() => eprintln!("notification: {method}"),
        Some(params) => eprintln!("notification: {method} {params}"),
    }
}
