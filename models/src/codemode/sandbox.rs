//! The sandbox: one QuickJS runtime per `execute`, on a thread of its own, with memory, stack
//! and time limits, and nothing in it but the JavaScript language, `console` and the
//! namespaces.
//!
//! QuickJS has no file system, network, environment, process, timers or module loader of its
//! own, and none is added: `fetch`, `require`, `process`, `Deno`, `XMLHttpRequest` and
//! `setTimeout` are undefined. Tool calls leave the sandbox as [`ToHost::Call`] messages; the
//! thread then waits for their [`Reply`]s and settles the promises the snippet awaits. The
//! thread is the sandbox's event loop: it runs the engine's jobs until the snippet's promise
//! settles, and blocks on replies in between, so `Promise.all` sends several calls at once.
//!
//! Limits: the memory limit is the runtime's allocation limit; the stack limit stops unbounded
//! recursion with a `RangeError`; an interrupt handler stops the engine at the deadline or when
//! the `execute` is cancelled (its future dropped), so an infinite loop ends.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use rquickjs::context::EvalOptions;
use rquickjs::promise::PromiseState;
use rquickjs::{Ctx, Function, Object, Promise, Runtime, Value};
use serde::Serialize;
use tokio::sync::mpsc;

use super::admission::Permit;
use super::script::FILE;

/// The sandbox's stack limit: deep enough for ordinary code, far below the thread's stack.
const STACK_BYTES: usize = 1024 * 1024;
/// The thread's own stack.
const THREAD_STACK_BYTES: usize = 16 * 1024 * 1024;

/// What one run may use.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) timeout: Duration,
    pub(crate) memory_bytes: usize,
    /// Captured log text beyond this is dropped (and said to be).
    pub(crate) max_log_bytes: usize,
}

/// A namespace as the sandbox builds it.
#[derive(Debug, Serialize)]
pub(crate) struct NamespaceSpec {
    pub(crate) name: String,
    pub(crate) tools: Vec<ToolSpec>,
}

/// A method of a namespace: its names and the call it makes (by index into the run's tools).
#[derive(Debug, Serialize)]
pub(crate) struct ToolSpec {
    pub(crate) method: String,
    pub(crate) original: String,
    pub(crate) index: usize,
}

/// From the sandbox to the proxy.
#[derive(Debug)]
pub(crate) enum ToHost {
    /// The snippet called tool `tool` (an index into the run's tools) with `arguments` (JSON).
    Call {
        id: u32,
        tool: usize,
        arguments: String,
    },
    /// The run ended.
    Done(Box<Finished>),
}

/// An answer to a [`ToHost::Call`]: the value as JSON, or the error message.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) id: u32,
    pub(crate) outcome: Result<String, String>,
}

/// One captured `console` line.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Log {
    pub(crate) level: String,
    pub(crate) text: String,
}

/// How a run ended, with what it logged.
#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) outcome: Result<String, Failure>,
    pub(crate) logs: Vec<Log>,
    pub(crate) logs_truncated: bool,
}

/// Why a run failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The snippet threw (or returned a rejected promise): the error's name, message, stack.
    Thrown {
        name: String,
        message: String,
        stack: Option<String>,
    },
    /// The deadline passed.
    Timeout,
    /// The memory limit was reached.
    OutOfMemory,
    /// Refused before running (a global the snippet uses does not exist).
    Refused(String),
    /// The snippet awaits something that can never settle.
    Stalled,
    /// The proxy stopped waiting (the execute was cancelled).
    Cancelled,
    /// The engine failed.
    Engine(String),
}

/// A run's handles: stop it by setting `cancel`.
pub(crate) struct Running {
    pub(crate) cancel: Arc<AtomicBool>,
}

/// Starts running `js` on a new thread; what it asks and how it ends arrive on `to_host`.
/// `permit` (its turn in the process-wide pool) goes with the thread and is given back when
/// the run has ended, even if the execute stopped waiting for it.
pub(crate) fn start(
    js: String,
    namespaces: Vec<NamespaceSpec>,
    unknown_globals: Vec<(String, String)>,
    limits: Limits,
    to_host: mpsc::UnboundedSender<ToHost>,
    replies: std_mpsc::Receiver<Reply>,
    permit: Permit,
) -> std::io::Result<Running> {
    let cancel = Arc::new(AtomicBool::new(false));
    let stop = cancel.clone();
    std::thread::Builder::new()
        .name("codemode-sandbox".into())
        .stack_size(THREAD_STACK_BYTES)
        .spawn(move || {
            let finished = run(
                &js,
                &namespaces,
                &unknown_globals,
                limits,
                &stop,
                &to_host,
                &replies,
            );
            // The runtime and its memory are gone by now: the turn is given back before the
            // answer, so whoever reads it sees the pool without this sandbox.
            drop(permit);
            let _ = to_host.send(ToHost::Done(Box::new(finished)));
        })?;
    Ok(Running { cancel })
}

/// The prelude: builds `console` and the namespaces, returns `{settle, run}`. Host functions come
/// in as arguments, so the snippet cannot reach them.
const PRELUDE: &str = r#"(function (spec, hostCall, hostLog) {
  "use strict";
  // Stack-trace hooks would hand a snippet CallSite objects of this prelude's frames, and
  // `CallSite.getFunction()` its functions (`invoke`, the namespaces' traps): fixed to nothing
  // before any snippet runs. (`caller` and `arguments` of functions throw in QuickJS.)
  Object.defineProperty(Error, "prepareStackTrace", { value: undefined, writable: false, configurable: false });
  if (!delete Error.captureStackTrace) throw new Error("Error.captureStackTrace stayed");
  const pending = new Map();
  let nextId = 0;
  const show = (v) => {
    if (typeof v === "string") return v;
    if (v instanceof Error) return String(v);
    try { const s = JSON.stringify(v); return s === undefined ? String(v) : s; } catch (e) { return String(v); }
  };
  const logger = (level) => (...args) => { hostLog(level, args.map(show).join(" ")); };
  const consoleObject = Object.freeze({
    log: logger("log"), info: logger("info"), warn: logger("warn"),
    error: logger("error"), debug: logger("debug"),
  });
  Object.defineProperty(globalThis, "console", { value: consoleObject, enumerable: false });
  const invoke = (index, args) => {
    // Made here so its stack names the snippet's line that called.
    const error = new Error("pending");
    return new Promise((resolve, reject) => {
      const text = args === undefined ? "{}" : JSON.stringify(args);
      const id = ++nextId;
      pending.set(id, { resolve, reject, error });
      hostCall(id, index, text === undefined ? "{}" : text);
    });
  };
  for (const ns of spec) {
    const target = Object.create(null);
    for (const t of ns.tools) {
      const method = (args) => invoke(t.index, args);
      target[t.method] = method;
      target[t.original] = method;
    }
    const methods = ns.tools.map((t) => t.method).join(", ");
    const namespace = new Proxy(target, {
      get(object, key) {
        if (typeof key === "symbol" || key in object) return object[key];
        if (key === "then" || key === "toJSON") return undefined;
        throw new TypeError("`" + ns.name + "." + String(key) + "` is not a tool of namespace `" +
          ns.name + "`; its methods: " + methods);
      },
      set() { throw new TypeError("namespace `" + ns.name + "` is read-only"); },
    });
    Object.defineProperty(globalThis, ns.name, { value: namespace, enumerable: true });
  }
  const settle = (id, ok, payload) => {
    const call = pending.get(id);
    if (!call) return;
    pending.delete(id);
    if (ok) { call.resolve(JSON.parse(payload)); return; }
    call.error.message = payload;
    call.reject(call.error);
  };
  const run = async (body) => {
    const value = await body();
    const text = JSON.stringify(value === undefined ? null : value);
    return text === undefined ? "null" : text;
  };
  return { settle, run };
})"#;

fn run(
    js: &str,
    namespaces: &[NamespaceSpec],
    unknown_globals: &[(String, String)],
    limits: Limits,
    cancel: &Arc<AtomicBool>,
    to_host: &mpsc::UnboundedSender<ToHost>,
    replies: &std_mpsc::Receiver<Reply>,
) -> Finished {
    let logs = Rc::new(RefCell::new(Vec::<Log>::new()));
    let truncated = Rc::new(Cell::new(false));
    let outcome = (|| {
        let runtime = Runtime::new().map_err(|e| Failure::Engine(e.to_string()))?;
        runtime.set_memory_limit(limits.memory_bytes);
        runtime.set_max_stack_size(STACK_BYTES);
        // A timeout too large to add is as good as none (a year).
        let now = Instant::now();
        let deadline = now
            .checked_add(limits.timeout)
            .unwrap_or_else(|| now + Duration::from_secs(365 * 24 * 3600));
        let stop = cancel.clone();
        runtime.set_interrupt_handler(Some(Box::new(move || {
            stop.load(Ordering::Relaxed) || Instant::now() >= deadline
        })));
        let context =
            rquickjs::Context::full(&runtime).map_err(|e| Failure::Engine(e.to_string()))?;
        let failure = |ctx: &Ctx<'_>, err: rquickjs::Error| -> Failure {
            if cancel.load(Ordering::Relaxed) {
                return Failure::Cancelled;
            }
            if Instant::now() >= deadline {
                return Failure::Timeout;
            }
            match err {
                rquickjs::Error::Exception => thrown(ctx, ctx.catch()),
                rquickjs::Error::Allocation => Failure::OutOfMemory,
                other => Failure::Engine(other.to_string()),
            }
        };
        context.with(|ctx| {
            let outstanding = Rc::new(Cell::new(0u32));
            let host_call = {
                let outstanding = outstanding.clone();
                let to_host = to_host.clone();
                Function::new(
                    ctx.clone(),
                    move |id: u32, tool: usize, arguments: String| {
                        outstanding.set(outstanding.get() + 1);
                        let _ = to_host.send(ToHost::Call {
                            id,
                            tool,
                            arguments,
                        });
                    },
                )
                .map_err(|e| failure(&ctx, e))?
            };
            let host_log = {
                let logs = logs.clone();
                let truncated = truncated.clone();
                let max = limits.max_log_bytes;
                Function::new(ctx.clone(), move |level: String, text: String| {
                    let mut logs = logs.borrow_mut();
                    let used: usize = logs.iter().map(|l| l.text.len() + 8).sum();
                    if used + text.len() > max {
                        truncated.set(true);
                        return;
                    }
                    logs.push(Log { level, text });
                })
                .map_err(|e| failure(&ctx, e))?
            };
            let spec =
                serde_json::to_string(namespaces).map_err(|e| Failure::Engine(e.to_string()))?;
            let spec: Value = ctx.json_parse(spec).map_err(|e| failure(&ctx, e))?;
            let prelude: Function = ctx
                .eval_with_options(PRELUDE, options("prelude.js"))
                .map_err(|e| failure(&ctx, e))?;
            let api: Object = prelude
                .call((spec, host_call, host_log))
                .map_err(|e| failure(&ctx, e))?;
            let globals = ctx.globals();
            for (name, message) in unknown_globals {
                let value: Value = globals.get(name.as_str()).map_err(|e| failure(&ctx, e))?;
                if value.is_undefined() {
                    return Err(Failure::Refused(message.clone()));
                }
            }
            let settle: Function = api.get("settle").map_err(|e| failure(&ctx, e))?;
            let start: Function = api.get("run").map_err(|e| failure(&ctx, e))?;
            let body: Function = ctx
                .eval_with_options(format!("(async function () {{\n{js}\n}})"), options(FILE))
                .map_err(|e| failure(&ctx, e))?;
            let promise: Promise = start.call((body,)).map_err(|e| failure(&ctx, e))?;
            loop {
                while ctx.execute_pending_job() {}
                match promise.state() {
                    PromiseState::Resolved => {
                        return match promise.result::<String>() {
                            Some(Ok(text)) => Ok(text),
                            Some(Err(e)) => Err(failure(&ctx, e)),
                            None => Err(Failure::Stalled),
                        };
                    }
                    PromiseState::Rejected => {
                        return match promise.result::<Value>() {
                            Some(Err(rquickjs::Error::Exception)) | None => {
                                Err(thrown(&ctx, ctx.catch()))
                            }
                            Some(Err(e)) => Err(failure(&ctx, e)),
                            Some(Ok(value)) => Err(thrown(&ctx, value)),
                        };
                    }
                    PromiseState::Pending => {}
                }
                if cancel.load(Ordering::Relaxed) {
                    return Err(Failure::Cancelled);
                }
                if outstanding.get() == 0 {
                    return Err(Failure::Stalled);
                }
                let left = deadline.saturating_duration_since(Instant::now());
                let reply = match replies.recv_timeout(left) {
                    Ok(reply) => reply,
                    Err(std_mpsc::RecvTimeoutError::Timeout) => return Err(Failure::Timeout),
                    Err(std_mpsc::RecvTimeoutError::Disconnected) => {
                        return Err(Failure::Cancelled);
                    }
                };
                outstanding.set(outstanding.get().saturating_sub(1));
                let (ok, payload) = match reply.outcome {
                    Ok(json) => (true, json),
                    Err(message) => (false, message),
                };
                let () = settle
                    .call((reply.id, ok, payload))
                    .map_err(|e| failure(&ctx, e))?;
            }
        })
    })();
    let logs = Rc::try_unwrap(logs)
        .map(RefCell::into_inner)
        .unwrap_or_else(|shared| shared.borrow().clone());
    Finished {
        outcome,
        logs,
        logs_truncated: truncated.get(),
    }
}

fn options(filename: &str) -> EvalOptions {
    let mut options = EvalOptions::default();
    options.global = true;
    options.strict = false;
    options.backtrace_barrier = true;
    options.filename = Some(filename.to_owned());
    options
}

/// What a thrown value says.
fn thrown<'js>(ctx: &Ctx<'js>, value: Value<'js>) -> Failure {
    if let Some(object) = value.as_object() {
        let get = |key: &str| -> Option<String> {
            object
                .get::<_, Value>(key)
                .ok()
                .filter(|v| v.is_string())
                .and_then(|v| v.get::<String>().ok())
        };
        let message = get("message");
        if message.as_deref() == Some("out of memory") {
            return Failure::OutOfMemory;
        }
        if let Some(message) = message {
            return Failure::Thrown {
                name: get("name").unwrap_or_else(|| "Error".into()),
                message,
                stack: get("stack"),
            };
        }
    }
    let text = ctx
        .json_stringify(value.clone())
        .ok()
        .flatten()
        .and_then(|s| s.to_string().ok())
        .or_else(|| value.get::<String>().ok())
        .unwrap_or_else(|| "a value that is not an Error".into());
    if text.contains("out of memory") {
        return Failure::OutOfMemory;
    }
    Failure::Thrown {
        name: "Uncaught".into(),
        message: text,
        stack: None,
    }
}
