//! The request tap: how the embedding binary sees every client request start and end.
//!
//! A [`RequestTap`] in [`SessionOptions::request_tap`](crate::SessionOptions::request_tap) is
//! told when a client request enters a session ([`RequestTap::start`]) and, through the
//! [`TappedRequest`] it returned, when that request is answered, cancelled, or left unanswered
//! by a session that ended ([`TappedRequest::end`]). It is what traces and metrics are fed
//! from (mcpctl's OpenTelemetry spans), for every route (hooked, pass-through, refused) and
//! both transports, because it sits where requests enter the session and where their answers
//! leave it, not inside the chain.
//!
//! A tapped request may also name `_meta` entries ([`TappedRequest::forward_meta`]) that go
//! into the `params._meta` of every request forwarded upstream on its behalf (the request
//! itself, and what hooks send while serving it): W3C trace context, for instance
//! ([`trace_context`](crate::trace_context)). Without a tap nothing is parsed, timed or changed
//! here: what is forwarded stays byte for byte what was received. With one, the envelope of
//! each line to the client is read once more while requests are open, to see which it
//! answers: the cost of seeing every route the same way.
//!
//! The session side is `Taps`: the requests in flight by the client's id.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::context::SessionScope;
use crate::jsonrpc::Message;
use crate::model::Outcome;
use crate::upstream::Upstream;

/// Sees client requests start and end (installed with
/// [`SessionOptions::request_tap`](crate::SessionOptions::request_tap)).
///
/// ```
/// use std::sync::Arc;
/// use mcp_middleware::SessionOptions;
/// use mcp_middleware::request_tap::{RequestEnd, RequestStart, RequestTap, TappedRequest};
///
/// /// Logs each request's method and how long it took.
/// struct Log;
/// struct Started(String);
///
/// impl RequestTap for Log {
///     fn start(&self, request: &RequestStart<'_>) -> Option<Box<dyn TappedRequest>> {
///         Some(Box::new(Started(request.method.to_owned())))
///     }
/// }
///
/// impl TappedRequest for Started {
///     fn end(self: Box<Self>, end: &RequestEnd<'_>) {
///         eprintln!("{} {} in {:?}", self.0, end.outcome.as_str(), end.duration);
///     }
/// }
///
/// let mut options = SessionOptions::default();
/// options.request_tap = Some(Arc::new(Log));
/// ```
pub trait RequestTap: Send + Sync + 'static {
    /// A client request entered a session. `None` leaves this request untapped.
    fn start(&self, request: &RequestStart<'_>) -> Option<Box<dyn TappedRequest>>;
}

impl fmt::Debug for dyn RequestTap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RequestTap")
    }
}

/// One tapped client request in flight.
pub trait TappedRequest: Send {
    /// Entries (name, string value) to set in the `params._meta` of each request the proxy
    /// forwards upstream for this one. Empty (the default) changes nothing.
    fn forward_meta(&self) -> &[(String, String)] {
        &[]
    }

    /// The request ended: answered, cancelled by the client, or unanswered when its session
    /// ended (then [`Outcome::Cancelled`]). Called once.
    fn end(self: Box<Self>, end: &RequestEnd<'_>);
}

/// A client request as it entered the session.
#[derive(Debug)]
#[non_exhaustive]
pub struct RequestStart<'a> {
    /// The JSON-RPC method.
    pub method: &'a str,
    /// The client's JSON-RPC id, as it wrote it (a JSON number, or a JSON string with quotes).
    pub id: &'a str,
    /// The params, raw JSON, as the client sent them.
    pub params: Option<&'a str>,
    /// The members of `params._meta` (trace context arrives here).
    pub meta: &'a Map<String, Value>,
    /// The proxy's id of the session (the one in its logs and [`Context`](crate::Context)).
    pub session_id: &'a str,
    /// The protocol version of the session: the one the upstream accepted in `initialize`,
    /// or the one a 2026-07-28 client names in the request's `_meta`.
    pub protocol_version: Option<&'a str>,
    /// The upstream the session forwards to, as in log messages.
    pub server: &'a str,
}

impl RequestStart<'_> {
    /// What the request is about: `params.name` of `tools/call` and `prompts/get`, `params.uri`
    /// of `resources/read`, `resources/subscribe` and `resources/unsubscribe`.
    pub fn target(&self) -> Option<String> {
        let key = match self.method {
            "tools/call" | "prompts/get" => "name",
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => "uri",
            _ => return None,
        };
        #[derive(serde::Deserialize)]
        struct Target {
            #[serde(default)]
            name: Option<String>,
            #[serde(default)]
            uri: Option<String>,
        }
        let target: Target = serde_json::from_str(self.params?).ok()?;
        if key == "name" {
            target.name
        } else {
            target.uri
        }
    }
}

/// How a tapped request ended.
#[derive(Debug)]
#[non_exhaustive]
pub struct RequestEnd<'a> {
    /// Ok, an error (a JSON-RPC error, or a `tools/call` result with `isError: true`), or
    /// cancelled.
    pub outcome: Outcome,
    /// The JSON-RPC error code, when the answer was an error.
    pub error_code: Option<i64>,
    /// The JSON-RPC error's message, or `tool_error` for a tool result with `isError`.
    pub error_message: Option<&'a str>,
    /// From the request's arrival to its answer.
    pub duration: Duration,
}

/// A session's tapped requests in flight, by the client's id.
///
/// Behind a mutex because answers leave the session through `&self` paths; the lock is never
/// contended (one session loop) and never taken without a tap.
#[derive(Default)]
pub(crate) struct Taps {
    tap: Option<Arc<dyn RequestTap>>,
    open: Mutex<HashMap<Box<str>, Open>>,
}

struct Open {
    method: Box<str>,
    started: Instant,
    tapped: Box<dyn TappedRequest>,
}

impl Taps {
    pub(crate) fn new(tap: Option<Arc<dyn RequestTap>>) -> Self {
        Self {
            tap,
            open: Mutex::default(),
        }
    }

    /// Whether a tap is installed: without one every other method is a no-op.
    pub(crate) fn active(&self) -> bool {
        self.tap.is_some()
    }

    fn open(&self) -> MutexGuard<'_, HashMap<Box<str>, Open>> {
        match self.open.lock() {
            Ok(open) => open,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// A client request entered. A request already open under `id` (one the session queued
    /// while its upstream restarted and now handles again) keeps its first start.
    pub(crate) fn start(
        &self,
        id: &str,
        method: &str,
        params: Option<&str>,
        scope: &SessionScope,
        server: &Upstream,
    ) {
        let Some(tap) = &self.tap else { return };
        if self.open().contains_key(id) {
            return;
        }
        let meta = crate::trace_context::meta_of(params);
        // A 2026-07-28 request names its version; an older session's is the negotiated one.
        let protocol_version = meta
            .get("io.modelcontextprotocol/protocolVersion")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| {
                let info = scope.info.read().ok()?;
                info.protocol_version.clone()
            });
        let server = server.to_string();
        let start = RequestStart {
            method,
            id,
            params,
            meta: &meta,
            session_id: &scope.id,
            protocol_version: protocol_version.as_deref(),
            server: &server,
        };
        let Some(tapped) = guarded("start", || tap.start(&start)).flatten() else {
            return;
        };
        self.open().insert(
            id.into(),
            Open {
                method: method.into(),
                started: Instant::now(),
                tapped,
            },
        );
    }

    /// `line`, a request about to go upstream on behalf of the client's request `client_id`,
    /// with that request's `_meta` entries; unchanged when it has none.
    pub(crate) fn forward(&self, client_id: Option<&str>, line: String) -> String {
        let Some(client_id) = client_id.filter(|_| self.active()) else {
            return line;
        };
        let open = self.open();
        let Some(open) = open.get(client_id) else {
            return line;
        };
        let entries = guarded("forward_meta", || open.tapped.forward_meta().to_vec());
        match entries.filter(|entries| !entries.is_empty()) {
            Some(entries) => crate::trace_context::inject_meta(&line, &entries).unwrap_or(line),
            None => line,
        }
    }

    /// A line on its way to the client: when it answers an open request, that request ends.
    pub(crate) fn answered(&self, line: &str) {
        if !self.active() || self.open().is_empty() {
            return;
        }
        let (id, outcome) = match Message::parse(line) {
            Ok(Message::Result { id, result }) => (id, Ok(result)),
            Ok(Message::Error {
                id: Some(id),
                error,
            }) => (id, Err(error)),
            _ => return,
        };
        let Some(open) = self.open().remove(id) else {
            return;
        };
        let error = match outcome {
            Ok(result)
                if &*open.method == "tools/call" && crate::dispatch::is_tool_error(result) =>
            {
                Some((None, "tool_error".to_owned()))
            }
            Ok(_) => None,
            Err(error) => {
                let error = crate::dispatch::error_data(error);
                Some((Some(i64::from(error.code.0)), error.message.into_owned()))
            }
        };
        let end = RequestEnd {
            outcome: if error.is_some() {
                Outcome::Error
            } else {
                Outcome::Ok
            },
            error_code: error.as_ref().and_then(|(code, _)| *code),
            error_message: error.as_ref().map(|(_, message)| message.as_str()),
            duration: open.started.elapsed(),
        };
        guarded("end", || open.tapped.end(&end));
    }

    /// The client cancelled its request `client_id` (raw JSON id): it ends cancelled.
    pub(crate) fn cancelled(&self, client_id: &str) {
        if !self.active() {
            return;
        }
        let open = self.open().remove(client_id);
        if let Some(open) = open {
            open.end_cancelled();
        }
    }
}

impl Open {
    fn end_cancelled(self) {
        let end = RequestEnd {
            outcome: Outcome::Cancelled,
            error_code: None,
            error_message: None,
            duration: self.started.elapsed(),
        };
        guarded("end", || self.tapped.end(&end));
    }
}

/// Runs a tap's code: a panic in it is logged and costs the request its tapping, never the
/// session (as with observers).
fn guarded<T>(what: &str, run: impl FnOnce() -> T) -> Option<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
        Ok(value) => Some(value),
        Err(_) => {
            tracing::warn!("the request tap's `{what}` panicked");
            None
        }
    }
}

/// The session ended: what is still open ends cancelled.
impl Drop for Taps {
    fn drop(&mut self) {
        for (_, open) in self.open().drain() {
            open.end_cancelled();
        }
    }
}

/// One tap made of several (traces and metrics, say): each is told of every request, in order.
/// `None` for none, the tap itself for one.
///
/// ```
/// use std::sync::Arc;
/// use mcp_middleware::request_tap::{self, RequestEnd, RequestStart, RequestTap, TappedRequest};
///
/// struct Quiet;
/// impl RequestTap for Quiet {
///     fn start(&self, _: &RequestStart<'_>) -> Option<Box<dyn TappedRequest>> {
///         None
///     }
/// }
///
/// assert!(request_tap::fan_out(Vec::new()).is_none());
/// let both = request_tap::fan_out(vec![Arc::new(Quiet), Arc::new(Quiet)]);
/// assert!(both.is_some());
/// ```
pub fn fan_out(mut taps: Vec<Arc<dyn RequestTap>>) -> Option<Arc<dyn RequestTap>> {
    match taps.len() {
        0 => None,
        1 => taps.pop(),
        _ => Some(Arc::new(FanOut(taps))),
    }
}

/// The taps of [`fan_out`].
struct FanOut(Vec<Arc<dyn RequestTap>>);

/// A request several taps follow: each one's handle, and their `_meta` entries together.
struct FannedOut {
    tapped: Vec<Box<dyn TappedRequest>>,
    meta: Vec<(String, String)>,
}

impl RequestTap for FanOut {
    fn start(&self, request: &RequestStart<'_>) -> Option<Box<dyn TappedRequest>> {
        let tapped: Vec<Box<dyn TappedRequest>> = self
            .0
            .iter()
            .filter_map(|tap| guarded("start", || tap.start(request)).flatten())
            .collect();
        if tapped.is_empty() {
            return None;
        }
        let meta = tapped
            .iter()
            .flat_map(|one| one.forward_meta().iter().cloned())
            .collect();
        Some(Box::new(FannedOut { tapped, meta }))
    }
}

impl TappedRequest for FannedOut {
    fn forward_meta(&self) -> &[(String, String)] {
        &self.meta
    }

    fn end(self: Box<Self>, end: &RequestEnd<'_>) {
        for one in self.tapped {
            guarded("end", || one.end(end));
        }
    }
}
