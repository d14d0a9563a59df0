//! The loop side of the model chain: starting a task for a message that needs hooks, serving
//! what hook tasks ask of the loop ([`LoopCall`]), cancelling them, and telling observers how
//! each request ended.
//!
//! A client request whose method some model handles is not forwarded here: it becomes a task
//! running `dispatch::client_request`. The task writes its upstream requests itself through the
//! chain's upstream end (`upstream_end`) while the session allows it; otherwise they come back
//! to the loop as [`LoopCall::Upstream`], which travel like client requests (ids, progress,
//! restarts, timeouts).
//! The task's first step (through the chain to its upstream write) runs on the loop's thread,
//! and it becomes a task of its own only once it waits (`first_step`).
//! When the task finishes, its answer goes to the client under the client's id: written by the
//! task itself while the session allows it (`client_end`; the loop then forgets the call when
//! it next runs, [`Hooked::forget_answered`]), else through the loop ([`LoopCall::Finished`]).
//! Cancelling the client's request cancels the task's token and drops its futures; each
//! upstream request the task still awaited is then cancelled upstream.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use rmcp::model::{ErrorCode, ErrorData, InitializeRequestParams};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::bridge::{ClientEra, takes_input_rounds};
use super::client_end::{Answer, error_line};
use super::first_step::{self, CallHandle};
use super::upstream_state::Held;
use super::{Pending, Session, UpstreamRequest, UpstreamState};
use crate::context::{Context, LoopCall, RawOutcome};
use crate::exchange::{IdMap, Waiting};
use crate::model::{HookId, Observation, Outcome, RawNotification, RawRequest, Subject};
use crate::{dispatch, era, jsonrpc};

/// How long `on_session_end` hooks may take once the client has gone.
const SESSION_END_GRACE: Duration = Duration::from_secs(5);

/// The hooked work of one session.
#[derive(Default)]
pub(super) struct Hooked {
    /// The running calls, by a number of their own, with the client's ids beside them.
    calls: IdMap<HookedCall>,
    /// Unhooked requests being timed for observers, by upstream id.
    observing: HashMap<u64, Observing>,
    /// Calls that answered the client themselves, for the loop to forget when it next runs
    /// ([`Hooked::forget_answered`]): telling it through its channel woke it, often on the
    /// other worker, once per call.
    answered: Arc<Mutex<Vec<u64>>>,
}

impl Hooked {
    /// Forgets the calls that answered the client themselves since the last time. Called on
    /// every turn of the loop: with no call running there is nothing to forget (one `settle`
    /// already removed stays listed until then, harmlessly), and the lock is not taken.
    pub(super) fn forget_answered(&mut self) {
        if self.calls.is_empty() {
            return;
        }
        let answered = std::mem::take(&mut *lock(&self.answered));
        for call in answered {
            self.calls.remove(call);
        }
    }

    /// The client's id of hooked request `call`, while it runs.
    pub(super) fn client_id(&self, call: u64) -> Option<&str> {
        self.calls.get(call).map(|call| &*call.client_id)
    }

    /// Whether a hooked request the client knows as `client_id` is running.
    pub(super) fn in_flight(&self, client_id: &str) -> bool {
        self.calls.by_peer(client_id).is_some()
    }

    /// Forgets the hooked request the client knows as `client_id` if its task already answered
    /// the client (before [`Hooked::forget_answered`] does): the client may reuse the id as
    /// soon as it has the answer.
    pub(super) fn settle(&mut self, client_id: &str) {
        if let Some(call) = self.calls.by_peer(client_id)
            && self.calls.get(call).is_some_and(|c| c.answer.by_task())
        {
            self.calls.remove(call);
        }
    }

    /// Whether a hooked request still owes the client its answer (one suspended in an input
    /// round waits for the client instead).
    pub(super) fn answering(&self) -> bool {
        self.calls
            .values()
            .any(|c| !c.suspended && !c.answer.by_task())
    }

    /// The id the client knows hooked call `call` by, while it runs.
    pub(super) fn client_id_of(&self, call: u64) -> Option<Box<str>> {
        self.calls.get(call).map(|c| c.client_id.clone())
    }

    fn remove(&mut self, key: u64) -> Option<HookedCall> {
        self.calls.remove(key)
    }

    /// The method of hooked call `call`, while it runs.
    pub(super) fn method_of(&self, call: u64) -> Option<&str> {
        self.calls.get(call).map(|c| c.method.as_str())
    }

    /// The tool, prompt or resource URI hooked call `call` is about, when its client may be
    /// asked in input rounds (a retry must name the same, `rounds`).
    pub(super) fn target_of(&self, call: u64) -> Option<&str> {
        self.calls.get(call).and_then(|c| c.round_target.as_deref())
    }

    /// Whether hooked call `call` is suspended in an input round.
    pub(super) fn is_suspended(&self, call: u64) -> bool {
        self.calls.get(call).is_some_and(|c| c.suspended)
    }

    /// Suspends hooked call `call` (its client request is being answered with an input round):
    /// returns the client's id, which no longer names it. `None` if it is not running or is
    /// already suspended.
    pub(super) fn suspend(&mut self, call: u64) -> Option<Box<str>> {
        if self.calls.get(call).is_none_or(|c| c.suspended) {
            return None;
        }
        // From now on the loop answers (after the client's retry), never the task itself.
        if !self
            .calls
            .get(call)
            .is_some_and(|c| c.answer.take_for_loop())
        {
            return None;
        }
        // Out and back in: the id map indexes a call by its client id only while it is not
        // suspended (`Waiting::peer_id`).
        let mut entry = self.calls.remove(call)?;
        entry.suspended = true;
        let client_id = entry.client_id.clone();
        self.calls.insert(call, entry);
        Some(client_id)
    }

    /// The client's retry `client_id` takes over suspended call `call`: its answer goes there,
    /// and its timeout (`timeout`, when there is one) starts again.
    pub(super) fn resume(&mut self, call: u64, client_id: &str, timeout: Option<Duration>) -> bool {
        if !self.calls.get(call).is_some_and(|c| c.suspended) {
            return false;
        }
        let Some(mut entry) = self.calls.remove(call) else {
            return false;
        };
        entry.suspended = false;
        entry.client_id = client_id.into();
        entry.deadline = timeout.map(|t| Instant::now() + t);
        self.calls.insert(call, entry);
        true
    }

    /// Stops hooked call `call` without answering anyone (its client is gone).
    pub(super) fn discard(&mut self, call: u64) {
        if let Some(call) = self.remove(call) {
            call.answer.take_for_loop();
            call.cancel.cancel();
            call.task.abort();
        }
    }

    /// Starts timing an unhooked request for observers.
    pub(super) fn observe_start(&mut self, uid: u64, method: &str, params: Option<&str>) {
        self.observing.insert(
            uid,
            Observing {
                method: method.to_owned(),
                subject: Subject::of(method, params),
                started: Instant::now(),
            },
        );
    }
}

/// A client request running through the chain.
struct HookedCall {
    client_id: Box<str>,
    method: String,
    subject: Subject,
    started: Instant,
    /// The request timeout after the request last showed life (its start, or progress from
    /// the upstream for it).
    deadline: Option<Instant>,
    ctx: Context,
    cancel: CancellationToken,
    /// Stops it, whether its first step still waits to be woken or it runs as a task.
    task: CallHandle,
    /// Answered with an input round and waiting for the client's retry (`hook_rounds`): no
    /// client request is waiting for it, so nothing may be sent under `client_id`.
    suspended: bool,
    /// Who answers the client: the loop, or the task itself (`client_end`).
    answer: Answer,
    /// What the request is about, kept only for a client answered in input rounds.
    round_target: Option<Box<str>>,
}

impl Waiting for HookedCall {
    fn peer_id(&self) -> Option<&str> {
        (!self.suspended).then_some(&*self.client_id)
    }

    fn deadline(&self) -> Option<Instant> {
        self.deadline.filter(|_| !self.suspended)
    }

    fn set_deadline(&mut self, deadline: Instant) {
        self.deadline = Some(deadline);
    }
}

struct Observing {
    method: String,
    subject: Subject,
    started: Instant,
}

/// A session id unique in this process: the process id and a counter.
pub(super) fn new_session_id() -> String {
    static SESSIONS: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        SESSIONS.fetch_add(1, Ordering::Relaxed) + 1
    )
}

/// How an answer reads to an observer: a JSON-RPC error or a tool result with `isError`.
pub(super) fn outcome_of(method: &str, outcome: Result<&str, &str>) -> (Outcome, Option<String>) {
    match outcome {
        Ok(result) if method == "tools/call" && dispatch::is_tool_error(result) => (
            Outcome::Error,
            Some("the tool reported an error".to_owned()),
        ),
        Ok(_) => (Outcome::Ok, None),
        Err(error) => (
            Outcome::Error,
            Some(dispatch::error_data(error).message.into()),
        ),
    }
}

fn lock(answered: &Mutex<Vec<u64>>) -> std::sync::MutexGuard<'_, Vec<u64>> {
    // A poisoned lock only means a task panicked while pushing; the list is still whole.
    answered
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("no message")
}

impl Session {
    fn context(&self, cancel: CancellationToken) -> Context {
        Context::new(self.scope.clone(), 0, cancel)
    }

    /// Runs `on_session_start` hooks in a task of their own.
    pub(super) fn start_session_hooks(&mut self) {
        if self.started_elsewhere || !self.chain.has(HookId::SessionStart) {
            return;
        }
        let chain = self.chain.clone();
        let ctx = self.context(CancellationToken::new());
        tokio::spawn(async move {
            let run = dispatch::session_hooks(&chain, &ctx, HookId::SessionStart);
            if AssertUnwindSafe(run).catch_unwind().await.is_err() {
                tracing::warn!("an on_session_start hook panicked");
            }
        });
    }

    /// The client left: cancel what is still running and run `on_session_end` hooks.
    pub(super) async fn end_session(&mut self) {
        for (_, call) in self.hooks.calls.drain() {
            call.answer.take_for_loop();
            call.cancel.cancel();
            call.task.abort();
        }
        if !self.chain.has(HookId::SessionEnd) {
            return;
        }
        let ctx = self.context(CancellationToken::new());
        let run = AssertUnwindSafe(dispatch::session_hooks(
            &self.chain,
            &ctx,
            HookId::SessionEnd,
        ))
        .catch_unwind();
        match tokio::time::timeout(SESSION_END_GRACE, run).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => tracing::warn!("an on_session_end hook panicked"),
            Err(_) => tracing::warn!(
                "on_session_end hooks took longer than {} s and were stopped",
                SESSION_END_GRACE.as_secs()
            ),
        }
    }

    /// Keeps what the client's accepted `initialize` says, for [`Context`].
    pub(super) fn record_session_info(&mut self, params: &str, result: &str) {
        let initialize = serde_json::from_str::<InitializeRequestParams>(params).ok();
        let version = serde_json::from_str::<Map<String, Value>>(result)
            .ok()
            .and_then(|r| r.get("protocolVersion")?.as_str().map(str::to_owned));
        let mut info = match self.scope.info.write() {
            Ok(info) => info,
            Err(poisoned) => poisoned.into_inner(),
        };
        info.initialize = initialize;
        info.protocol_version = version;
    }

    /// A client request some model handles: run the chain, its first step here and the rest
    /// in a task once it waits.
    pub(super) fn start_hooked_request(&mut self, id: &str, method: &str, params: Option<&str>) {
        self.note_envelope(params);
        let call = self.hooks.calls.next_id();
        let cancel = CancellationToken::new();
        let ctx = Context::new(self.scope.clone(), call, cancel.clone());
        let chain = self.chain.clone();
        let calls = self.scope.link.calls.clone();
        let client_end = self.client_end.clone();
        let answered = self.hooks.answered.clone();
        let answer = Answer::default();
        let task_answer = answer.clone();
        let client_id: Box<str> = id.into();
        let task_ctx = ctx.clone();
        let (task_method, task_params) = (method.to_owned(), params.map(str::to_owned));
        // Its first step runs here; it becomes a task once it waits (`first_step`).
        let runtime = tokio::runtime::Handle::current();
        let task = first_step::start(&runtime, async move {
            let run = dispatch::client_request(&chain, &task_ctx, task_method.clone(), task_params);
            let outcome = match AssertUnwindSafe(run).catch_unwind().await {
                Ok(outcome) => outcome,
                Err(panic) => {
                    let message = panic_message(&*panic);
                    tracing::error!(panic = message, "a hook panicked");
                    Err(ErrorData::internal_error(
                        format!("a proxy model's hook failed (it panicked: {message})"),
                        None,
                    ))
                }
            };
            // The chain's outermost step on the way out (routes).
            let outcome = chain.leave(
                &task_method,
                outcome,
                || task_ctx.take_listed(),
                task_ctx.identity(),
            );
            // Straight to the client when the session allows it; through the loop otherwise.
            match client_end.finish(&task_answer, &client_id, outcome) {
                Ok(()) => lock(&answered).push(call),
                Err(outcome) => {
                    let _ = calls.send(LoopCall::Finished { call, outcome });
                }
            }
        });
        self.hooks.calls.insert(
            call,
            HookedCall {
                client_id: id.into(),
                method: method.to_owned(),
                subject: if self.chain.observed() {
                    Subject::of(method, params)
                } else {
                    Subject::default()
                },
                started: Instant::now(),
                deadline: self.options.request_timeout.map(|t| Instant::now() + t),
                ctx,
                cancel,
                task,
                suspended: false,
                answer,
                round_target: if takes_input_rounds(method) && self.client_is_stateless() {
                    super::rounds::target_in(method, params)
                } else {
                    None
                },
            },
        );
    }

    /// A request routes refuse (it names something hidden): answered here, before the chain;
    /// observers see it `rejected`, and nothing reaches the upstream.
    pub(super) fn reject_routed(
        &mut self,
        id: &str,
        method: &str,
        params: Option<&str>,
        error: ErrorData,
    ) {
        let started = Instant::now();
        tracing::debug!(method, error = %error.message, "refused by the routes");
        self.to_client(error_line(id, &error));
        if self.chain.observed() {
            let ctx = self.context(CancellationToken::new());
            self.observe(
                &ctx,
                Observation::new(
                    method.to_owned(),
                    Subject::of(method, params),
                    Outcome::Rejected,
                    started.elapsed(),
                    Some(error.message.into()),
                ),
            );
        }
    }

    /// Cancels the hooked request the client knows as `client_id`, if there is one.
    pub(super) fn cancel_hooked(&mut self, client_id: &str) -> bool {
        let Some((_, call)) = self.hooks.calls.remove_by_peer(client_id) else {
            return false;
        };
        call.answer.take_for_loop();
        call.cancel.cancel();
        call.task.abort();
        self.observe(
            &call.ctx,
            Observation::new(
                call.method,
                call.subject,
                Outcome::Cancelled,
                call.started.elapsed(),
                None,
            ),
        );
        true
    }

    /// Progress arrived for hooked request `call`: its timeout starts again.
    pub(super) fn hooked_alive(&mut self, call: u64) {
        if let Some(timeout) = self.options.request_timeout
            && let Some(call) = self.hooks.calls.get_mut(call)
        {
            call.set_deadline(Instant::now() + timeout);
        }
    }

    /// Answers hooked requests that ran past the request timeout (a hook that never returns),
    /// and stops them.
    pub(super) fn expire_hooked(&mut self, now: Instant) {
        let Some(timeout) = self.options.request_timeout else {
            return;
        };
        // A suspended call waits for the client, not the upstream: it has no deadline here;
        // its input round's lifetime bounds it (`hook_rounds`).
        for (_, call) in self.hooks.calls.expired(now) {
            if !call.answer.take_for_loop() {
                // Its task answered the client just now.
                continue;
            }
            call.cancel.cancel();
            call.task.abort();
            let message = format!(
                "`{}` was not answered within {} s; the request was cancelled",
                call.method,
                timeout.as_secs()
            );
            self.to_client(jsonrpc::error(
                Some(&call.client_id),
                jsonrpc::UPSTREAM_TIMEOUT,
                &message,
            ));
            self.observe(
                &call.ctx,
                Observation::new(
                    call.method,
                    call.subject,
                    Outcome::Error,
                    call.started.elapsed(),
                    Some(message),
                ),
            );
        }
    }

    pub(super) fn finish_hooked(&mut self, call: u64, outcome: RawOutcome) {
        let Some(outcome) = self.hold_if_suspended(call, outcome) else {
            return;
        };
        let Some(call) = self.hooks.remove(call) else {
            return;
        };
        let (kind, error) = match &outcome {
            Ok(result) if call.method == "tools/call" && dispatch::is_tool_error(result) => (
                Outcome::Error,
                Some("the tool reported an error".to_owned()),
            ),
            Ok(_) => (Outcome::Ok, None),
            Err(error) => (Outcome::Error, Some(error.message.to_string())),
        };
        let kind = if kind == Outcome::Error && !call.ctx.reached_upstream() {
            Outcome::Rejected
        } else {
            kind
        };
        let line = match outcome {
            Ok(result) => {
                let completed = match self.era {
                    ClientEra::Bridged(_) => era::complete_result(&call.method, &result),
                    _ => None,
                };
                jsonrpc::result(&call.client_id, completed.as_deref().unwrap_or(&result))
            }
            Err(error) => error_line(&call.client_id, &error),
        };
        self.to_client_as(
            line,
            crate::transport::outbound::Belongs::Response(call.client_id.clone()),
        );
        if self.chain.observed() {
            self.observe(
                &call.ctx,
                Observation::new(
                    call.method,
                    call.subject,
                    kind,
                    call.started.elapsed(),
                    error,
                ),
            );
        }
    }

    /// An unhooked request ended: tell the observers, if it was being timed.
    pub(super) fn observe_end(&mut self, uid: u64, outcome: Outcome, error: Option<String>) {
        let Some(observing) = self.hooks.observing.remove(&uid) else {
            return;
        };
        let ctx = self.context(CancellationToken::new());
        self.observe(
            &ctx,
            Observation::new(
                observing.method,
                observing.subject,
                outcome,
                observing.started.elapsed(),
                error,
            ),
        );
    }

    fn observe(&self, ctx: &Context, observation: Observation) {
        for layer in self.chain.layers() {
            if layer.observers.is_empty() {
                continue;
            }
            let observe = AssertUnwindSafe(|| layer.layer.observe(ctx, &observation));
            if std::panic::catch_unwind(observe).is_err() {
                tracing::warn!(model = layer.name, "an observer panicked");
            }
        }
    }

    /// Serves what a hook task asks of the loop.
    pub(super) fn on_loop_call(&mut self, call: LoopCall) {
        match call {
            LoopCall::Upstream {
                uid,
                call,
                method,
                params,
                reply,
            } => {
                // A restarted or probed upstream: it waits with the client's messages, in
                // the order they came (`upstream_state::Held`).
                if let UpstreamState::Starting { queued, .. } = &mut self.upstream {
                    queued.hold(Held::Hook(LoopCall::Upstream {
                        uid,
                        call,
                        method,
                        params,
                        reply,
                    }));
                    return;
                }
                if !self.ensure_upstream(None, &method) {
                    let reason = match &self.upstream {
                        UpstreamState::Down { reason } => reason.clone(),
                        _ => String::new(),
                    };
                    let _ = reply.send(Err(unavailable(&method, &reason)));
                    return;
                }
                if let UpstreamState::Starting { queued, .. } = &mut self.upstream {
                    queued.hold(Held::Hook(LoopCall::Upstream {
                        uid,
                        call,
                        method,
                        params,
                        reply,
                    }));
                    return;
                }
                if let Some(queued) = self.upstream_backlog() {
                    let message = self.backlog_message(&method, queued);
                    tracing::warn!("{message}");
                    let _ = reply.send(Err(ErrorData::new(
                        ErrorCode(jsonrpc::UPSTREAM_BACKLOG as i32),
                        message,
                        None,
                    )));
                    return;
                }
                self.forward_hook_request(uid, call, &method, params, reply);
            }
            LoopCall::CancelUpstream { uid } => {
                if let UpstreamState::Starting { queued, .. } = &mut self.upstream {
                    queued.retain(|held| !held.is_hook_request(uid));
                }
                if let Some(Pending::Hook { .. }) = self.pending.remove(uid) {
                    let params = format!(
                        r#"{{"requestId":{uid},"reason":"the request was cancelled in the proxy"}}"#
                    );
                    self.send_upstream(jsonrpc::notification(
                        "notifications/cancelled",
                        Some(&params),
                    ));
                }
            }
            LoopCall::Client {
                method,
                params,
                reply,
            } => {
                let did = self.upstream_requests.next_id();
                self.upstream_requests.insert(
                    did,
                    UpstreamRequest {
                        upstream_id: "".into(),
                        progress_token: None,
                        hook: Some(reply),
                    },
                );
                self.to_client(jsonrpc::request(
                    itoa::Buffer::new().format(did),
                    &method,
                    params.as_deref(),
                ));
            }
            LoopCall::Finished { call, outcome } => self.finish_hooked(call, outcome),
            LoopCall::Ask {
                call,
                ask,
                method,
                params,
                reply,
            } => self.on_ask(call, ask, &method, params, reply),
            LoopCall::AskDone { ask } => self.on_ask_done(ask),
            LoopCall::ClientNotification { line } => {
                if let Ok(jsonrpc::Message::Notification { method, params }) =
                    jsonrpc::Message::parse(&line)
                {
                    self.relay_client_notification(&line, &method, params);
                }
            }
            LoopCall::AnswerUpstream {
                upstream_id,
                outcome,
            } => {
                let line = match outcome {
                    Ok(result) => jsonrpc::result(&upstream_id, &result),
                    Err(error) => error_line(&upstream_id, &error),
                };
                self.send_upstream(line);
            }
        }
    }

    /// A client notification some model hooks.
    pub(super) fn hook_client_notification(&mut self, method: &str, params: Option<&str>) {
        let Some(notification) = raw_notification(method, params) else {
            return;
        };
        let chain = self.chain.clone();
        let ctx = self.context(CancellationToken::new());
        run_soon(async move {
            dispatch::notification(&chain, &ctx, notification, dispatch::Toward::Upstream).await
        });
    }

    /// An upstream notification (already mapped for the client) some model hooks.
    pub(super) fn hook_server_notification(&mut self, line: String) {
        let Ok(jsonrpc::Message::Notification { method, params }) = jsonrpc::Message::parse(&line)
        else {
            return;
        };
        let Some(notification) = raw_notification(&method, params) else {
            return;
        };
        let chain = self.chain.clone();
        let ctx = self.context(CancellationToken::new());
        run_soon(async move {
            dispatch::notification(&chain, &ctx, notification, dispatch::Toward::Client).await
        });
    }

    /// A request from the upstream some model hooks.
    pub(super) fn hook_server_request(&mut self, id: &str, method: &str, params: Option<&str>) {
        let params = match params.map(serde_json::from_str::<Value>) {
            None => None,
            Some(Ok(params)) => Some(params),
            Some(Err(_)) => {
                self.send_upstream(jsonrpc::error(
                    Some(id),
                    jsonrpc::INVALID_PARAMS,
                    "Invalid params: not JSON",
                ));
                return;
            }
        };
        let request = RawRequest {
            method: method.to_owned(),
            params,
        };
        let chain = self.chain.clone();
        let ctx = self.context(CancellationToken::new());
        let calls = self.scope.link.calls.clone();
        let upstream_id: Box<str> = id.into();
        tokio::spawn(async move {
            let run = dispatch::server_request(&chain, &ctx, request);
            let outcome = match AssertUnwindSafe(run).catch_unwind().await {
                Ok(outcome) => outcome,
                Err(panic) => Err(ErrorData::internal_error(
                    format!(
                        "a proxy model's hook failed (it panicked: {})",
                        panic_message(&*panic)
                    ),
                    None,
                )),
            };
            let _ = calls.send(LoopCall::AnswerUpstream {
                upstream_id,
                outcome,
            });
        });
    }
}

/// The error a hook's request gets when the upstream cannot take it (`reason`).
pub(super) fn unavailable(method: &str, reason: &str) -> ErrorData {
    ErrorData::new(
        ErrorCode(jsonrpc::UPSTREAM_UNAVAILABLE as i32),
        format!("upstream unavailable for `{method}`: {reason}"),
        None,
    )
}

fn raw_notification(method: &str, params: Option<&str>) -> Option<RawNotification> {
    let params = match params.map(serde_json::from_str::<Value>) {
        None => None,
        Some(Ok(params)) => Some(params),
        Some(Err(err)) => {
            tracing::debug!(method, %err, "dropped a notification whose params are not JSON");
            return None;
        }
    };
    Some(RawNotification {
        method: method.to_owned(),
        params,
    })
}

/// Runs a notification's hooks now if they finish without waiting (so notifications keep their
/// order), else in a task of their own.
fn run_soon<F>(run: F)
where
    F: Future<Output = crate::model::HookResult<()>> + Send + 'static,
{
    let mut run = Box::pin(AssertUnwindSafe(run).catch_unwind());
    let report = |outcome: Result<crate::model::HookResult<()>, _>| match outcome {
        Ok(Ok(())) => {}
        Ok(Err(err)) => tracing::warn!(error = %err.message, "a notification hook failed"),
        Err(_) => tracing::warn!("a notification hook panicked"),
    };
    match (&mut run).now_or_never() {
        Some(outcome) => report(outcome),
        None => {
            tokio::spawn(async move { report(run.await) });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::auth::Identity;
    use crate::chain::Chain;
    use crate::context::{SessionLink, SessionScope};
    use crate::session::{ClientEnd, UpstreamEnd};
    use crate::transport::queue::LineQueue;

    /// A running call the client knows as `client_id`, with a task that never ends.
    fn call(client_id: &str) -> HookedCall {
        let (calls, _) = tokio::sync::mpsc::unbounded_channel();
        let (to_client, _) = LineQueue::new(1024);
        let scope = Arc::new(SessionScope::new(
            "test".into(),
            Identity::local_user(),
            Arc::new(Chain::empty()),
            SessionLink {
                calls,
                to_client: to_client.clone(),
                upstream: Arc::new(UpstreamEnd::new(None, 1024)),
            },
            None,
        ));
        let cancel = CancellationToken::new();
        HookedCall {
            client_id: client_id.into(),
            method: "tools/call".into(),
            subject: Subject::default(),
            started: Instant::now(),
            deadline: None,
            ctx: Context::new(scope, 1, cancel.clone()),
            cancel,
            task: first_step::start(
                &tokio::runtime::Handle::current(),
                std::future::pending::<()>(),
            ),
            suspended: false,
            answer: Answer::default(),
            round_target: None,
        }
    }

    #[tokio::test]
    async fn a_call_its_task_answered_frees_its_id_at_once_and_owes_nothing() {
        let mut hooked = Hooked::default();
        let running = call("1");
        let answer = running.answer.clone();
        let key = hooked.calls.allocate(running);
        assert!(hooked.in_flight("1") && hooked.answering());

        hooked.settle("1");
        assert!(hooked.in_flight("1"), "still running: the id stays taken");

        // The task answered the client itself; the loop has not forgotten it yet.
        let (queue, _rx) = LineQueue::new(1024);
        let end = ClientEnd::new(queue);
        end.set_open(true);
        end.finish(&answer, "1", Ok("{}".into())).unwrap();
        assert!(!hooked.answering(), "nothing more is owed to the client");
        hooked.settle("1");
        assert!(!hooked.in_flight("1"), "the client may reuse the id");
        assert!(
            hooked.remove(key).is_none(),
            "forgetting it later finds nothing"
        );
    }

    #[tokio::test]
    async fn calls_that_answered_themselves_are_forgotten_when_the_loop_next_runs() {
        let mut hooked = Hooked::default();
        let first = hooked.calls.allocate(call("1"));
        let second = hooked.calls.allocate(call("2"));
        lock(&hooked.answered).extend([first, 99]);
        hooked.forget_answered();
        assert!(!hooked.in_flight("1"), "forgotten");
        assert!(hooked.in_flight("2"), "still running");
        assert!(lock(&hooked.answered).is_empty(), "each is forgotten once");
        hooked.forget_answered();
        assert!(hooked.calls.get(second).is_some());
    }

    #[tokio::test]
    async fn a_suspended_call_is_answered_by_the_loop_never_by_its_task() {
        let mut hooked = Hooked::default();
        let running = call("7");
        let answer = running.answer.clone();
        let key = hooked.calls.allocate(running);
        assert_eq!(hooked.suspend(key).as_deref(), Some("7"));
        assert!(!hooked.in_flight("7"), "a suspended call has no client id");
        assert!(!hooked.answering(), "it waits for the client's retry");

        let (queue, mut rx) = LineQueue::new(1024);
        let end = ClientEnd::new(queue);
        end.set_open(true);
        assert!(end.finish(&answer, "7", Ok("{}".into())).is_err());
        assert!(rx.try_recv().is_err(), "the loop answers after the retry");

        assert!(hooked.resume(key, "8", None));
        assert!(hooked.in_flight("8") && hooked.answering());
    }

    #[tokio::test]
    async fn a_call_whose_task_answered_first_cannot_be_suspended() {
        let mut hooked = Hooked::default();
        let running = call("2");
        let answer = running.answer.clone();
        let key = hooked.calls.allocate(running);
        let (queue, _rx) = LineQueue::new(1024);
        let end = ClientEnd::new(queue);
        end.set_open(true);
        end.finish(&answer, "2", Ok("{}".into())).unwrap();
        assert_eq!(hooked.suspend(key), None);
    }
}
