//! `execute`: a snippet from source to result. Strips and checks it ([`Script`]), runs it in
//! the [`sandbox`](super::sandbox), serves its tool calls through the chain below code mode
//! ([`Context::below`]) with the arguments validated against each tool's input schema first,
//! and writes the answer.
//!
//! A call's value in code is the result's `structuredContent` when present, else its text parts
//! joined with newlines (or, with no text part, its content as JSON). A tool error or a
//! JSON-RPC error rejects the call's promise with an `Error` carrying the tool's message.
//! The client's `_meta` (its progress token) goes with every inner call, so the upstream's
//! progress reaches the client as progress of `execute`; dropping the execute (the client
//! cancels it) drops the inner calls, which cancels them upstream, and stops the sandbox.

use std::sync::atomic::Ordering;
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use mcp_middleware::types::{
    CallToolRequestParams, CallToolResult, ContentBlock, JsonObject, RequestMetaObject,
};
use mcp_middleware::{Below, Context};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::admission::{self, Ask};
use super::catalog::{Catalog, Entry};
use super::sandbox::{
    self, Failure, Finished, Limits, Log, NamespaceSpec, Reply, ToHost, ToolSpec,
};
use super::script::{self, Script};
use super::typecheck::{self, Checker, Diagnostic};

/// The limits of one execute, from the model's config.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    pub(crate) timeout: Duration,
    pub(crate) memory_bytes: usize,
    pub(crate) max_tool_calls: usize,
    pub(crate) max_output_bytes: usize,
    pub(crate) max_concurrent_calls: usize,
}

/// Stops the sandbox when the execute ends, however it ends.
struct StopOnDrop(sandbox::Running);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.cancel.store(true, Ordering::Relaxed);
    }
}

/// What one execute runs with.
pub(crate) struct Run<'c> {
    /// Code mode's name in the chain (inner calls go below it).
    pub(crate) model: &'c str,
    pub(crate) catalog: &'c Catalog,
    pub(crate) checker: Option<&'c Checker>,
    pub(crate) budget: Budget,
    /// What the execute asks of the process-wide pool of sandboxes.
    pub(crate) admission: Ask,
    /// The client's `_meta` of the execute, sent with each inner call (its progress token).
    pub(crate) meta: Option<RequestMetaObject>,
}

/// Runs `code` and answers as `execute` does.
pub(crate) async fn execute(
    ctx: &Context,
    run: Run<'_>,
    code: &str,
    dry_run: bool,
) -> CallToolResult {
    let Run {
        model,
        catalog,
        checker,
        budget,
        admission,
        meta,
    } = run;
    let max = budget.max_output_bytes;
    let script = match Script::prepare(code, catalog) {
        Ok(script) => script,
        Err(script::Refused(message)) => return failed(message, &[], false, max),
    };
    if let Some(checker) = checker
        && let Err(diagnostics) = typecheck::check(checker, catalog, code).await
    {
        return type_errors(&diagnostics, max);
    }
    if dry_run {
        let mut result = CallToolResult::success(vec![ContentBlock::text(
            "dry run: the snippet parses and every namespace and method it names exists; nothing ran",
        )]);
        result.structured_content = Some(json!({"result": null, "logs": [], "dryRun": true}));
        return result;
    }
    let tools: Vec<&Entry> = catalog.entries().collect();
    let mut index = 0;
    let namespaces: Vec<NamespaceSpec> = catalog
        .namespaces
        .iter()
        .map(|ns| NamespaceSpec {
            name: ns.name.clone(),
            tools: ns
                .tools
                .iter()
                .map(|entry| {
                    let spec = ToolSpec {
                        method: entry.method.clone(),
                        original: entry.original.clone(),
                        index,
                    };
                    index += 1;
                    spec
                })
                .collect(),
        })
        .collect();
    let (to_host, mut from_sandbox) = mpsc::unbounded_channel();
    let (reply, replies) = std_mpsc::channel::<Reply>();
    let limits = Limits {
        timeout: budget.timeout,
        memory_bytes: budget.memory_bytes,
        max_log_bytes: budget.max_output_bytes,
    };
    let script_positions = &script;
    let permit = match admission::admit(admission).await {
        Ok(permit) => permit,
        Err(message) => return failed(message, &[], false, max),
    };
    let running = match sandbox::start(
        script.js.clone(),
        namespaces,
        script.unknown_globals.clone(),
        limits,
        to_host,
        replies,
        permit,
    ) {
        Ok(running) => StopOnDrop(running),
        Err(err) => {
            return failed(
                format!("the sandbox could not start: {err}"),
                &[],
                false,
                max,
            );
        }
    };
    let below = ctx.below(model);
    let mut in_flight: FuturesUnordered<InnerCall<'_>> = FuturesUnordered::new();
    let mut queued: Vec<(u32, CallToolRequestParams)> = Vec::new();
    let mut calls = 0usize;
    // The sandbox stops itself at the deadline; this is for a sandbox that cannot.
    let give_up = tokio::time::sleep(budget.timeout + Duration::from_secs(2));
    tokio::pin!(give_up);
    let finished: Finished = loop {
        tokio::select! {
            message = from_sandbox.recv() => match message {
                Some(ToHost::Call { id, tool, arguments }) => {
                    calls += 1;
                    let Some(entry) = tools.get(tool) else {
                        let _ = reply.send(Reply { id, outcome: Err("no such tool".into()) });
                        continue;
                    };
                    if calls > budget.max_tool_calls {
                        let _ = reply.send(Reply { id, outcome: Err(format!(
                            "maxToolCalls ({}) reached: this execute may make at most {} tool calls",
                            budget.max_tool_calls, budget.max_tool_calls
                        )) });
                        continue;
                    }
                    let arguments = match check_arguments(entry, catalog.validator(tool), &arguments) {
                        Ok(arguments) => arguments,
                        Err(message) => {
                            let _ = reply.send(Reply { id, outcome: Err(message) });
                            continue;
                        }
                    };
                    let mut params = CallToolRequestParams::new(entry.listed.clone());
                    params.arguments = Some(arguments);
                    params.meta = meta.clone();
                    if in_flight.len() < budget.max_concurrent_calls.max(1) {
                        in_flight.push(inner_call(&below, id, params));
                    } else {
                        queued.push((id, params));
                    }
                }
                Some(ToHost::Done(finished)) => break *finished,
                None => break Finished {
                    outcome: Err(Failure::Engine("the sandbox thread ended without an answer".into())),
                    logs: Vec::new(),
                    logs_truncated: false,
                },
            },
            Some((id, outcome)) = in_flight.next(), if !in_flight.is_empty() => {
                let _ = reply.send(Reply { id, outcome: value_of(outcome) });
                if !queued.is_empty() {
                    let (id, params) = queued.remove(0);
                    in_flight.push(inner_call(&below, id, params));
                }
            }
            () = &mut give_up => {
                running.0.cancel.store(true, Ordering::Relaxed);
                break Finished { outcome: Err(Failure::Timeout), logs: Vec::new(), logs_truncated: false };
            }
        }
    };
    drop(running);
    answer(finished, script_positions, budget, calls)
}

/// One inner call in flight: its sandbox id and outcome.
type InnerCall<'a> = std::pin::Pin<
    Box<dyn Future<Output = (u32, mcp_middleware::HookResult<CallToolResult>)> + Send + 'a>,
>;

fn inner_call<'a>(below: &'a Below<'a>, id: u32, params: CallToolRequestParams) -> InnerCall<'a> {
    Box::pin(async move { (id, below.call_tool(params).await) })
}

/// The arguments of a call, checked against the tool's input schema.
fn check_arguments(
    entry: &Entry,
    validator: Option<&jsonschema::Validator>,
    arguments: &str,
) -> Result<JsonObject, String> {
    let qualified = format!("{}.{}", entry.namespace, entry.method);
    let value: Value = serde_json::from_str(arguments)
        .map_err(|err| format!("{qualified}: the arguments are not JSON: {err}"))?;
    if !value.is_object() {
        return Err(format!(
            "{qualified} takes one object of named arguments, not {}",
            kind(&value)
        ));
    }
    if let Some(validator) = validator {
        let problems: Vec<String> = validator
            .iter_errors(&value)
            .take(5)
            .map(|error| {
                let path = error.instance_path().to_string();
                if path.is_empty() {
                    error.to_string()
                } else {
                    format!(
                        "`{}`: {error}",
                        path.trim_start_matches('/').replace('/', ".")
                    )
                }
            })
            .collect();
        if !problems.is_empty() {
            return Err(format!(
                "invalid arguments for {qualified} (nothing was sent): {}",
                problems.join("; ")
            ));
        }
    }
    match value {
        Value::Object(object) => Ok(object),
        _ => Err(format!("{qualified} takes one object of named arguments")),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A call's outcome as code sees it: the value as JSON, or the error's message.
fn value_of(outcome: mcp_middleware::HookResult<CallToolResult>) -> Result<String, String> {
    let result = outcome.map_err(|error| error.message.to_string())?;
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|text| text.text.as_str()))
        .collect();
    if result.is_error == Some(true) {
        let message = texts.join("\n");
        return Err(if message.is_empty() {
            "the tool reported an error".into()
        } else {
            message
        });
    }
    let value = match result.structured_content {
        Some(value) => value,
        None if texts.is_empty() && !result.content.is_empty() => {
            serde_json::to_value(&result.content).unwrap_or(Value::Null)
        }
        None => Value::String(texts.join("\n")),
    };
    serde_json::to_string(&value).map_err(|err| format!("the tool's result is not JSON: {err}"))
}

/// The answer to `execute`.
fn answer(finished: Finished, script: &Script, budget: Budget, calls: usize) -> CallToolResult {
    let Finished {
        outcome,
        logs,
        logs_truncated,
    } = finished;
    let text = match outcome {
        Ok(text) => text,
        Err(failure) => {
            return failed(
                describe(failure, script, budget, calls),
                &logs,
                logs_truncated,
                budget.max_output_bytes,
            );
        }
    };
    let (shown, truncated) = cut(&text, budget.max_output_bytes);
    let result_value = if truncated {
        Value::String(shown.clone())
    } else {
        serde_json::from_str(&text).unwrap_or(Value::Null)
    };
    let mut content = vec![ContentBlock::text(if truncated {
        format!(
            "{shown}\n[output truncated: the result is {} bytes; maxOutputBytes is {}]",
            text.len(),
            budget.max_output_bytes
        )
    } else {
        text
    })];
    if let Some(logs) = logs_text(&logs, logs_truncated) {
        content.push(ContentBlock::text(logs));
    }
    let mut result = CallToolResult::success(content);
    let mut structured = json!({"result": result_value, "logs": logs});
    if truncated {
        structured["truncated"] = Value::Bool(true);
    }
    result.structured_content = Some(structured);
    result
}

/// What went wrong, and where in the snippet.
fn describe(failure: Failure, script: &Script, budget: Budget, calls: usize) -> String {
    match failure {
        Failure::Thrown {
            name,
            message,
            stack,
        } => {
            let at = stack
                .as_deref()
                .and_then(|stack| snippet_position(stack, script))
                .map(|(line, column)| format!(" at line {line}, column {column}"))
                .unwrap_or_default();
            format!("{name}{at}: {message}")
        }
        Failure::Timeout => format!(
            "Timeout: the snippet ran longer than timeoutMs ({} ms) and was stopped ({calls} tool \
             calls made)",
            budget.timeout.as_millis()
        ),
        Failure::OutOfMemory => format!(
            "OutOfMemory: the snippet used more memory than memoryBytes ({} bytes) and was stopped",
            budget.memory_bytes
        ),
        Failure::Refused(message) => message,
        Failure::Stalled => "Stalled: the snippet awaits a promise that nothing can settle (no \
                             tool call is pending)"
            .into(),
        Failure::Cancelled => "Cancelled: the execute was cancelled".into(),
        Failure::Engine(message) => format!("the sandbox failed: {message}"),
    }
}

/// The snippet line and column of the innermost frame of `stack` in the snippet.
fn snippet_position(stack: &str, script: &Script) -> Option<(u32, u32)> {
    let marker = format!("{}:", script::FILE);
    stack.lines().find_map(|line| {
        let rest = &line[line.find(&marker)? + marker.len()..];
        let mut numbers = rest
            .split(|c: char| !c.is_ascii_digit())
            .filter(|part| !part.is_empty());
        let generated_line: u32 = numbers.next()?.parse().ok()?;
        let column: u32 = numbers.next().and_then(|c| c.parse().ok()).unwrap_or(1);
        // Line 1 of the evaluated source is the wrapper's `(async function () {`.
        script.original(generated_line.checked_sub(1)?, column)
    })
}

/// Type errors: nothing ran. As many diagnostics as fit in `max` bytes are given.
fn type_errors(diagnostics: &[Diagnostic], max: usize) -> CallToolResult {
    let mut text = String::from("TypeError: the snippet does not type-check (nothing ran):");
    let mut shown = 0;
    for d in diagnostics {
        let line = format!(
            "\n  line {}, column {}: {} {}",
            d.line, d.column, d.code, d.message
        );
        if text.len() + line.len() > max {
            break;
        }
        text.push_str(&line);
        shown += 1;
    }
    if shown < diagnostics.len() {
        text.push_str(&format!(
            "\n  ... and {} more (maxOutputBytes is {max})",
            diagnostics.len() - shown
        ));
    }
    let diagnostics = &diagnostics[..shown];
    let mut result = CallToolResult::error(vec![ContentBlock::text(text.clone())]);
    result.structured_content =
        Some(json!({"error": text, "diagnostics": diagnostics, "logs": []}));
    result
}

/// `text` within `max` bytes: cut, saying so, when it is longer (a thrown error's message is
/// the snippet's to choose, so it is bounded like a result).
fn bounded(text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let note = format!(
        "\n[truncated: this text is {} bytes; maxOutputBytes is {max}]",
        text.len()
    );
    let (shown, _) = cut(&text, max.saturating_sub(note.len()));
    shown + &note
}

/// An `execute` error result, with the logs captured before it; the message is cut to `max`.
fn failed(message: String, logs: &[Log], logs_truncated: bool, max: usize) -> CallToolResult {
    let message = bounded(message, max);
    let mut content = vec![ContentBlock::text(message.clone())];
    if let Some(logs) = logs_text(logs, logs_truncated) {
        content.push(ContentBlock::text(logs));
    }
    let mut result = CallToolResult::error(content);
    result.structured_content = Some(json!({"error": message, "logs": logs}));
    result
}

fn logs_text(logs: &[Log], truncated: bool) -> Option<String> {
    if logs.is_empty() && !truncated {
        return None;
    }
    let mut text: Vec<String> = logs
        .iter()
        .map(|log| format!("[{}] {}", log.level, log.text))
        .collect();
    if truncated {
        text.push("[logs truncated: maxOutputBytes reached]".into());
    }
    Some(text.join("\n"))
}

/// `text` cut to at most `max` bytes at a character boundary, and whether it was cut.
fn cut(text: &str, max: usize) -> (String, bool) {
    if text.len() <= max {
        return (text.to_owned(), false);
    }
    (text[..text.floor_char_boundary(max)].to_owned(), true)
}
