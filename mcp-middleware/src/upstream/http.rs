//! An upstream MCP server reached over streamable HTTP.
//!
//! To the session it is one more upstream spoken to with JSON-RPC lines; a task turns each line
//! into a `POST` to the server's endpoint and each answer (a JSON body, or an SSE stream of
//! messages) back into lines. What the protocol asks of an HTTP client is done here:
//!
//! - the `Mcp-Session-Id` the server gives at `initialize` is sent with every later message,
//!   and `MCP-Protocol-Version` once the version is known;
//! - configured headers go with every request (`Authorization: Bearer ...` and any other);
//!   `${env:VAR}` in them is resolved when the connection starts, never shown;
//! - a `GET` stream is opened after the handshake for messages the server sends on its own
//!   (a `405` means the server has none);
//! - an expired session (`404`, or `400` naming the session, as the TypeScript SDK's examples
//!   answer) is initialized again with the client's own `initialize`, then the message is sent
//!   again: the client never sees it;
//! - a server that cannot be reached, or answers a request with an HTTP error, gives that
//!   request a JSON-RPC error (`-32001`) naming the server and what happened;
//! - SSE is read by [`sse`](super::sse) (the WHATWG rules). A request's stream that ends or
//!   breaks before its answer is resumed: after the server's `retry:` delay (1 s when it gave
//!   none, at most 30 s) a `GET` with `Last-Event-ID` (the last `id:` it sent) picks it up, as
//!   the streamable HTTP transport has clients do; up to [`MAX_RESUMES`] tries in a row that
//!   bring nothing. A stream without event ids cannot be resumed: the request gets the `-32001`
//!   error, as does an answer that breaks off after its first part was cut through to the
//!   client. The `GET` stream is reconnected the same way whenever it ends, until the server
//!   refuses it or the session ends;
//! - a 2026-07-28 request (no session, the per-request envelope) is cancelled by closing its
//!   response stream, as that transport has a client do: the session's `notifications/cancelled`
//!   for it is not posted (such a server drops it) but drops the request's `POST`
//!   ([`stream_cancel`](super::stream_cancel)). A 2025-11-25 session's cancellations are posted.
//!
//! `https://` endpoints are reached over TLS (rustls), trusting the Mozilla roots
//! (`webpki-roots`) and any CA given with [`HttpUpstream::ca_file`].

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use super::cut_stream::CutTo;
use super::env_refs;
use super::http_body::{BodyReader, read_or_cut, read_prefix};
use super::sse::{Cursor, SseReader};
use super::stream_cancel::StreamCancels;
use super::token_exchange::{Caller, TokenExchange};
use super::{UpstreamEvent, UpstreamLink};
use crate::error::UpstreamError;
use crate::jsonrpc::{self, Message};
use crate::transport::cut_through::{CUT_MIN_LIMIT, CutThrough};
use crate::transport::queue::LineQueue;

/// How much of an error page's text goes into the error a request gets (the rest of the page
/// is not read): enough for a server's explanation, not a megabyte of HTML in a message.
const ERROR_DETAIL_BYTES: usize = 4096;

/// A streamable HTTP MCP server (its endpoint URL), with the headers to send it.
///
/// ```
/// use mcp_middleware::upstream::HttpUpstream;
///
/// let server = HttpUpstream::new("http://127.0.0.1:3001/mcp")
///     .bearer("${env:EVERYTHING_TOKEN}")
///     .header("X-Team", "tools");
/// assert_eq!(server.to_string(), "http://127.0.0.1:3001/mcp");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpUpstream {
    url: String,
    headers: Vec<(String, String)>,
    ca_files: Vec<std::path::PathBuf>,
    /// Token exchange for `Authorization` (RFC 8693), and the session's caller it exchanges for.
    token_exchange: Option<TokenExchange>,
    caller: Option<Caller>,
    era_record: Option<super::EraRecord>,
}

impl HttpUpstream {
    /// The server whose MCP endpoint is `url` (`http://host:port/path`).
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            headers: Vec::new(),
            ca_files: Vec::new(),
            token_exchange: None,
            caller: None,
            era_record: None,
        }
    }

    /// Records the protocol era this server is seen speaking in `record` (for `describe`).
    pub fn era_record(mut self, record: super::EraRecord) -> Self {
        self.era_record = Some(record);
        self
    }

    pub(crate) fn era_record_of(&self) -> Option<&super::EraRecord> {
        self.era_record.as_ref()
    }

    /// Sends `Authorization: Bearer TOKEN` where `TOKEN` is exchanged for the caller's own
    /// verified token at the configured endpoint (RFC 8693, see [`TokenExchange`]); the caller's
    /// token itself is never sent. A static `Authorization` header is then not sent.
    pub fn token_exchange(mut self, exchange: TokenExchange) -> Self {
        self.token_exchange = Some(exchange);
        self
    }

    /// This server as one session's upstream: token exchange acts for `caller`.
    pub(crate) fn for_caller(&self, caller: &Caller) -> Self {
        let mut bound = self.clone();
        bound.caller = Some(caller.clone());
        bound
    }

    /// Also trusts the certificate authorities in this PEM file, for an `https://` server whose
    /// certificate is not signed by a public CA.
    pub fn ca_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.ca_files.push(path.into());
        self
    }

    /// Sends `name: value` with every request (`${env:VAR}` in the value is resolved when the
    /// proxy connects).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sends `Authorization: Bearer TOKEN` with every request.
    pub fn bearer(self, token: impl Into<String>) -> Self {
        let token = token.into();
        self.header("Authorization", format!("Bearer {token}"))
    }

    pub(crate) fn spawn(
        &self,
        generation: u64,
        max_line: usize,
        events: super::ReaderOut,
    ) -> Result<UpstreamLink, UpstreamError> {
        let fail = |problem: String| UpstreamError::Spawn {
            server: self.to_string(),
            cause: std::io::Error::other(problem),
        };
        let endpoint = Endpoint::parse(&self.url).map_err(fail)?;
        let tls = if endpoint.tls {
            Some(tls_connector(&self.ca_files).map_err(fail)?)
        } else {
            None
        };
        if let Some(exchange) = &self.token_exchange {
            exchange.check().map_err(fail)?;
        }
        let mut headers = Vec::new();
        for (name, value) in &self.headers {
            if self.token_exchange.is_some() && name.eq_ignore_ascii_case("authorization") {
                continue;
            }
            let value = env_refs::resolve(std::ffi::OsStr::new(value)).map_err(fail)?;
            headers.push((name.clone(), value.to_string_lossy().into_owned()));
        }
        let reader_out = events.clone();
        let up: Up = Arc::new(move |line, request| {
            let events = events.clone();
            let event = match request {
                Some(request) => UpstreamEvent::LineFor {
                    generation,
                    line,
                    request,
                },
                None => UpstreamEvent::Line { generation, line },
            };
            Box::pin(async move { events.send(event).await })
        });
        // Small limits mean small messages only: every answer is then read and checked whole.
        let cut = (max_line >= CUT_MIN_LIMIT).then(Arc::<CutThrough>::default);
        let client = Arc::new(Client {
            name: self.to_string(),
            endpoint,
            tls,
            headers,
            token_exchange: self.token_exchange.clone(),
            caller: self.caller.clone(),
            max_line,
            up,
            cut: cut.clone(),
            events: reader_out,
            generation,
            session: Mutex::new(SessionState::default()),
            idle: Mutex::new(Vec::new()),
            reinit_ids: AtomicU64::new(0),
            closed: std::sync::atomic::AtomicBool::new(false),
            cancels: StreamCancels::default(),
        });
        let (outgoing, mut from_session) = LineQueue::new(usize::MAX);
        let task = tokio::spawn(async move {
            while let Some(line) = from_session.recv().await {
                let line = line.into_line();
                // Registered (and cancelled) here, in the session's order, so a cancellation
                // that follows its request at once still finds it.
                let cancel = match Message::parse(&line) {
                    // The envelope alone decides here (no lock: this loop must not wait on a
                    // request in flight); `deliver` lets go of one a handshake session sends.
                    Ok(Message::Request { id, .. }) if carries_envelope(&line) => {
                        Some(client.cancels.register(id))
                    }
                    Ok(Message::Notification { method, params })
                        if method == "notifications/cancelled" && client.cancels.cancel(params) =>
                    {
                        continue;
                    }
                    // Posted before anything after it: a server may refuse (or list other
                    // tools for) a request that overtakes it.
                    Ok(Message::Notification { method, .. })
                        if method == "notifications/initialized" =>
                    {
                        client.clone().deliver_now(line).await;
                        continue;
                    }
                    _ => None,
                };
                let client = client.clone();
                tokio::spawn(async move { client.deliver(line, cancel).await });
            }
            client.end_session().await;
        });
        let link = UpstreamLink::new(outgoing, task);
        Ok(match cut {
            Some(cut) => link.with_cut_through(cut),
            None => link,
        })
    }
}

impl fmt::Display for HttpUpstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.url)
    }
}

/// How many times in a row a broken stream is resumed without bringing a single event, before
/// the request it carries fails (or the `GET` stream is given up).
const MAX_RESUMES: u32 = 5;

/// A `GET` stream open at least this long before it ended counts as having worked, even with
/// no event (a server may close idle streams now and then).
const HEALTHY_STREAM: std::time::Duration = std::time::Duration::from_secs(30);

/// A connection's driver, whatever its stream (plain TCP or TLS).
type Connection = std::pin::Pin<Box<dyn Future<Output = Result<(), hyper::Error>> + Send>>;

/// Sends one message up to the session, with the id of the request whose stream carried it.
type Up = Arc<
    dyn Fn(String, Option<Box<str>>) -> std::pin::Pin<Box<dyn Future<Output = bool> + Send>>
        + Send
        + Sync,
>;

/// Where the endpoint is.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// Whether it is `https://`.
    tls: bool,
    /// The host name the certificate must be for.
    server_name: String,
    /// `host:port`, to connect to.
    authority: String,
    /// The `Host` header.
    host: String,
    /// Path and query.
    path: String,
}

impl Endpoint {
    pub(crate) fn parse(url: &str) -> Result<Self, String> {
        let (tls, rest) = match (url.strip_prefix("https://"), url.strip_prefix("http://")) {
            (Some(rest), _) => (true, rest),
            (None, Some(rest)) => (false, rest),
            (None, None) => return Err(format!("`{url}` is not an http:// or https:// URL")),
        };
        let (authority, path) = match rest.find('/') {
            Some(slash) => (&rest[..slash], &rest[slash..]),
            None => (rest, "/"),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(format!("`{url}`: expected http(s)://host[:port]/path"));
        }
        let port = authority
            .rsplit_once(':')
            .filter(|(host, port)| port.parse::<u16>().is_ok() && !host.ends_with('['));
        let (host, with_port) = match port {
            Some((host, _)) => (host, authority.to_owned()),
            None => (
                authority,
                format!("{authority}:{}", if tls { 443 } else { 80 }),
            ),
        };
        Ok(Self {
            tls,
            server_name: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
            authority: with_port,
            host: authority.to_owned(),
            path: path.to_owned(),
        })
    }
}

/// What the server told us about the session.
#[derive(Debug, Default)]
struct SessionState {
    id: Option<String>,
    protocol_version: Option<String>,
    /// The client's `initialize` params, replayed when the session expires.
    initialize: Option<String>,
    initialized: bool,
    /// Bumped each time the session is replaced, so concurrent failures re-initialize once.
    epoch: u64,
    get_stream: bool,
}

/// What a request to the server needs from [`SessionState`]: taken under the lock, which is
/// then released, so requests of one session go out side by side instead of queueing behind
/// each other's response headers (a server answering with a JSON body sends its headers only
/// with the result). A re-initialization holds the lock across its `initialize`, so requests
/// that start meanwhile wait for the new session id.
#[derive(Debug, Default, Clone)]
struct Addressing {
    id: Option<String>,
    protocol_version: Option<String>,
}

impl SessionState {
    fn addressing(&self) -> Addressing {
        Addressing {
            id: self.id.clone(),
            protocol_version: self.protocol_version.clone(),
        }
    }
}

struct Client {
    name: String,
    endpoint: Endpoint,
    tls: Option<tokio_rustls::TlsConnector>,
    headers: Vec<(String, String)>,
    token_exchange: Option<TokenExchange>,
    caller: Option<Caller>,
    max_line: usize,
    up: Up,
    /// The requests whose large answers may be cut through to the client (`http_body.rs` for
    /// a JSON body, `sse.rs` for an SSE event); `None` under a small limit.
    cut: Option<Arc<CutThrough>>,
    /// Where a cut-through answer's head goes (what `up` sends to, as events).
    events: super::ReaderOut,
    /// Which start of the server this is.
    generation: u64,
    session: Mutex<SessionState>,
    idle: Mutex<Vec<SendRequest<Full<Bytes>>>>,
    reinit_ids: AtomicU64,
    /// Set when the proxy's session ends: streams are no longer resumed.
    closed: std::sync::atomic::AtomicBool,
    /// The 2026-07-28 requests in flight, cancelled by closing their streams.
    cancels: StreamCancels,
}

/// How a `POST` ended.
enum Posted {
    /// Answered (its messages already sent up).
    Done,
    /// The session is gone: initialize again and resend.
    SessionExpired,
    /// Failed; the reason in words.
    Failed(String),
}

impl Client {
    async fn send_up(&self, line: String) {
        let _ = (self.up)(line, None).await;
    }

    /// Sends up a message that came on the response stream of request `request_id`.
    async fn send_up_for(&self, line: String, request_id: Option<&str>) {
        let _ = (self.up)(line, request_id.map(Box::from)).await;
    }

    /// Sends one message from the session to the server, and its answers back; a request
    /// whose `cancel` fires first is dropped with its stream, and answered by no one (the
    /// session cancelled it).
    async fn deliver(self: Arc<Self>, line: String, cancel: Option<CancellationToken>) {
        let Some(cancel) = cancel else {
            return self.deliver_now(line).await;
        };
        let id = match Message::parse(&line) {
            Ok(Message::Request { id, .. }) => id.to_owned(),
            _ => String::new(),
        };
        // A request of a negotiated (2025-11-25) session is cancelled by the posted
        // notification, as the handshake transport has it.
        if self.session.lock().await.protocol_version.is_some() {
            self.cancels.finished(&id);
            return self.deliver_now(line).await;
        }
        tokio::select! {
            () = self.clone().deliver_now(line) => {}
            () = cancel.cancelled() => {
                tracing::debug!(server = %self.name, request = %id, "closing a cancelled request's stream");
            }
        }
        self.cancels.finished(&id);
    }

    async fn deliver_now(self: Arc<Self>, line: String) {
        let Ok(message) = Message::parse(&line) else {
            return;
        };
        let request = match &message {
            Message::Request { id, method, params } => {
                if method == "initialize" {
                    let mut session = self.session.lock().await;
                    session.initialize = Some(params.unwrap_or("{}").to_owned());
                    session.id = None;
                }
                Some(((*id).to_owned(), method.to_string()))
            }
            Message::Notification { method, .. } => {
                if method == "notifications/initialized" {
                    self.session.lock().await.initialized = true;
                }
                None
            }
            _ => None,
        };
        let epoch = self.session.lock().await.epoch;
        let asked = request
            .as_ref()
            .map(|(id, method)| (id.as_str(), method.as_str()));
        let mut outcome = self.post(&line, asked).await;
        if matches!(outcome, Posted::SessionExpired) {
            match self.reinitialize(epoch).await {
                Ok(()) => outcome = self.post(&line, asked).await,
                Err(reason) => outcome = Posted::Failed(reason),
            }
        }
        let failure = match outcome {
            Posted::Done => None,
            Posted::SessionExpired => Some("the server ended the session again".to_owned()),
            Posted::Failed(reason) => Some(reason),
        };
        if let (Some(reason), Some((id, method))) = (failure, request) {
            self.send_up(jsonrpc::error(
                Some(&id),
                jsonrpc::UPSTREAM_UNAVAILABLE,
                &format!("upstream `{}` failed `{method}`: {reason}", self.name),
            ))
            .await;
        }
        if let Ok(Message::Notification { method, .. }) = Message::parse(&line)
            && method == "notifications/initialized"
        {
            self.clone().open_get_stream().await;
        }
    }

    /// Starts a new session with the client's own `initialize`, unless another message did
    /// since `epoch`.
    async fn reinitialize(&self, epoch: u64) -> Result<(), String> {
        let mut session = self.session.lock().await;
        if session.epoch != epoch {
            return Ok(());
        }
        let Some(params) = session.initialize.clone() else {
            return Err("the server ended the session before it was initialized".to_owned());
        };
        tracing::info!(server = %self.name, "the upstream's session expired; initializing again");
        session.id = None;
        let n = self.reinit_ids.fetch_add(1, Ordering::Relaxed) + 1;
        let id = format!("\"mcp-middleware-reinitialize-{n}\"");
        let line = jsonrpc::request(&id, "initialize", Some(&params));
        let (status, headers, body) = self
            .exchange(&line, &session.addressing())
            .await
            .map_err(|err| format!("initializing again failed: {err}"))?;
        if !status.is_success() {
            return Err(format!("initializing again failed: HTTP {status}"));
        }
        session.id = header(&headers, "mcp-session-id");
        let text = read_messages(&headers, body, self.max_line).await?;
        if let Some(version) = text.iter().find_map(|m| protocol_version(m)) {
            session.protocol_version = Some(version);
        }
        if session.initialized {
            let line = jsonrpc::notification("notifications/initialized", None);
            let _ = self.exchange(&line, &session.addressing()).await;
        }
        session.epoch += 1;
        Ok(())
    }

    /// `POST`s one message (a request when it has `asked`: its id and method) and relays what
    /// comes back.
    async fn post(&self, line: &str, asked: Option<(&str, &str)>) -> Posted {
        let request_id = asked.map(|(id, _)| id);
        let is_request = request_id.is_some();
        let addressing = self.session.lock().await.addressing();
        let (status, headers, body) = match self.exchange(line, &addressing).await {
            Ok(answer) => answer,
            Err(err) => return Posted::Failed(err),
        };
        let had_session = addressing.id.is_some();
        if had_session
            && (status == StatusCode::NOT_FOUND
                || (status == StatusCode::BAD_REQUEST && is_json(&headers)))
        {
            return Posted::SessionExpired;
        }
        if status == StatusCode::ACCEPTED || (!is_request && status.is_success()) {
            return Posted::Done;
        }
        if !status.is_success() {
            let detail =
                String::from_utf8_lossy(&read_prefix(body, ERROR_DETAIL_BYTES).await).into_owned();
            return Posted::Failed(format!("HTTP {status}: {}", detail.trim()));
        }
        if let Some(id) = header(&headers, "mcp-session-id") {
            self.session.lock().await.id = Some(id);
        }
        match self.relay(&headers, body, asked).await {
            Ok(()) => Posted::Done,
            Err(err) => Posted::Failed(err),
        }
    }

    /// Sends each message of an answer (a JSON body or an SSE stream) up to the session. An
    /// SSE stream that ends before the answer to the request `asked` (id, method) is resumed;
    /// a large answer the session allows is cut through while it arrives.
    async fn relay(
        &self,
        headers: &hyper::HeaderMap,
        body: hyper::body::Incoming,
        asked: Option<(&str, &str)>,
    ) -> Result<(), String> {
        let to = self.cut_to(asked);
        // Only an `initialize` answer names the protocol version: nothing else is searched for it.
        let negotiates = asked.is_some_and(|(_, method)| method == "initialize");
        if is_event_stream(headers) {
            return self
                .relay_stream(body, asked.map(|(id, _)| id), to.as_ref(), negotiates)
                .await;
        }
        let reader = BodyReader::new(body, content_length(headers), self.max_line)
            .map_err(|err| err.to_string())?;
        let bytes = match to {
            Some(to) => {
                match read_or_cut(reader, to).await {
                    Ok(Some(bytes)) => bytes,
                    // Cut through: it went up as it came, ending in its own error if it broke.
                    Ok(None) => return Ok(()),
                    Err(err) => return Err(err.to_string()),
                }
            }
            None => reader.read_all().await.map_err(|err| err.to_string())?,
        };
        for message in json_messages(bytes)? {
            if negotiates {
                self.note(&message).await;
            }
            self.send_up(message).await;
        }
        Ok(())
    }

    /// Where the answer to the request `asked` (id, method) may be cut through: nowhere for a
    /// message that is not a request, or when this connection cuts nothing through.
    fn cut_to<'a>(&'a self, asked: Option<(&str, &'a str)>) -> Option<CutTo<'a>> {
        let (table, (_, method)) = self.cut.as_deref().zip(asked)?;
        Some(CutTo {
            table,
            events: &self.events,
            generation: self.generation,
            name: &self.name,
            method,
        })
    }

    /// Relays a request's SSE stream until it has carried the answer and ended, resuming it
    /// (`GET` with `Last-Event-ID`) when it ends or breaks before the answer. An answer cut
    /// through (`to`) that breaks off is not resumed: its first part is with the client, and
    /// its request got an error.
    async fn relay_stream(
        &self,
        body: hyper::body::Incoming,
        request_id: Option<&str>,
        to: Option<&CutTo<'_>>,
        negotiates: bool,
    ) -> Result<(), String> {
        let wanted = request_id.and_then(|id| serde_json::from_str::<serde_json::Value>(id).ok());
        let wanted_uid = wanted.as_ref().and_then(serde_json::Value::as_u64);
        let mut events = SseReader::new(body, self.max_line);
        let mut cursor = Cursor::default();
        let mut answered = wanted.is_none();
        let mut fruitless = 0;
        loop {
            let broke = loop {
                match events.next_cut(to).await {
                    Ok(Some(event)) => {
                        cursor.note(&event);
                        fruitless = 0;
                        if event.cut.is_some() {
                            answered = answered || event.cut == wanted_uid;
                        }
                        if let Some(data) = event.data {
                            answered = answered || answers(&data, wanted.as_ref());
                            if negotiates {
                                self.note(&data).await;
                            }
                            self.send_up_for(data, request_id).await;
                        }
                    }
                    Ok(None) => break None,
                    Err(err) => break Some(err),
                }
            };
            if answered {
                return Ok(());
            }
            let why = broke.unwrap_or_else(|| "the event stream ended before the answer".into());
            let Some(last) = cursor.last_event_id.clone() else {
                return Err(format!("{why}, and it gave no event id to resume from"));
            };
            fruitless += 1;
            if fruitless > MAX_RESUMES || self.closed.load(Ordering::SeqCst) {
                return Err(format!(
                    "{why}; resuming it brought nothing {MAX_RESUMES} times"
                ));
            }
            tracing::debug!(server = %self.name, %why, last_event_id = %last, "resuming the upstream's event stream");
            tokio::time::sleep(cursor.delay()).await;
            events = match self.resume(&last).await {
                Ok(body) => body,
                Err(err) => return Err(format!("{why}; resuming it failed: {err}")),
            };
        }
    }

    /// `GET` with `Last-Event-ID`: the rest of a broken stream.
    async fn resume(&self, last_event_id: &str) -> Result<SseReader, String> {
        let addressing = self.session.lock().await.addressing();
        let (status, headers, body) = self
            .request(Method::GET, None, &addressing, Some(last_event_id))
            .await?;
        if !status.is_success() || !is_event_stream(&headers) {
            return Err(format!("HTTP {status}"));
        }
        Ok(SseReader::new(body, self.max_line))
    }

    /// Keeps the protocol version an `initialize` result names.
    async fn note(&self, line: &str) {
        if let Some(version) = protocol_version(line) {
            self.session.lock().await.protocol_version = Some(version);
        }
    }

    /// Opens the `GET` stream for messages the server sends on its own, once per session.
    async fn open_get_stream(self: Arc<Self>) {
        {
            let mut session = self.session.lock().await;
            if session.get_stream || session.id.is_none() {
                return;
            }
            session.get_stream = true;
        }
        tokio::spawn(async move {
            self.follow_get_stream().await;
            self.session.lock().await.get_stream = false;
        });
    }

    /// Relays the `GET` stream, reconnecting (with `Last-Event-ID` once the server has given
    /// an event id) each time it ends, until the server refuses it, [`MAX_RESUMES`] tries in a
    /// row bring nothing, or the session ends.
    async fn follow_get_stream(&self) {
        let mut cursor = Cursor::default();
        let mut fruitless = 0;
        loop {
            let addressing = self.session.lock().await.addressing();
            if addressing.id.is_none() {
                return;
            }
            let last = cursor.last_event_id.as_deref();
            let answer = self.request(Method::GET, None, &addressing, last).await;
            match answer {
                Ok((status, headers, body)) if status.is_success() && is_event_stream(&headers) => {
                    let opened = std::time::Instant::now();
                    let mut events = SseReader::new(body, self.max_line);
                    loop {
                        match events.next().await {
                            Ok(Some(event)) => {
                                cursor.note(&event);
                                fruitless = 0;
                                if let Some(data) = event.data {
                                    self.send_up(data).await;
                                }
                            }
                            Ok(None) => break,
                            Err(err) => {
                                tracing::debug!(server = %self.name, %err, "the upstream's GET stream broke");
                                break;
                            }
                        }
                    }
                    // A quiet stream that stayed open a while was healthy, not a failure.
                    if opened.elapsed() >= HEALTHY_STREAM {
                        fruitless = 0;
                    }
                }
                Ok((status, ..)) => {
                    tracing::debug!(server = %self.name, %status, "the upstream offers no GET stream");
                    return;
                }
                Err(err) => {
                    tracing::debug!(server = %self.name, %err, "the upstream's GET stream failed");
                }
            }
            fruitless += 1;
            if fruitless > MAX_RESUMES || self.closed.load(Ordering::SeqCst) {
                return;
            }
            tokio::time::sleep(cursor.delay()).await;
            if self.closed.load(Ordering::SeqCst) {
                return;
            }
        }
    }

    /// Ends the session on the server (`DELETE`), when the proxy's session ends.
    async fn end_session(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let addressing = self.session.lock().await.addressing();
        if addressing.id.is_some() {
            let _ = self.request(Method::DELETE, None, &addressing, None).await;
        }
    }

    async fn exchange(
        &self,
        line: &str,
        session: &Addressing,
    ) -> Result<(StatusCode, hyper::HeaderMap, hyper::body::Incoming), String> {
        self.request(Method::POST, Some(line), session, None).await
    }

    /// One HTTP request to the endpoint (`Last-Event-ID: last_event_id` when resuming).
    async fn request(
        &self,
        method: Method,
        line: Option<&str>,
        session: &Addressing,
        last_event_id: Option<&str>,
    ) -> Result<(StatusCode, hyper::HeaderMap, hyper::body::Incoming), String> {
        let mut builder = Request::builder()
            .method(method.clone())
            .uri(&self.endpoint.path)
            .header("host", &self.endpoint.host)
            .header("accept", "application/json, text/event-stream");
        if line.is_some() {
            builder = builder.header("content-type", "application/json");
        }
        if let Some(id) = &session.id {
            builder = builder.header("mcp-session-id", id);
        }
        if let Some(version) = &session.protocol_version {
            builder = builder.header("mcp-protocol-version", version);
        } else if let Some(line) = line {
            // A 2026-07-28 request has no session: its headers come from its envelope and body.
            for (name, value) in super::stateless_http::routing_headers(line) {
                builder = builder.header(name, value);
            }
        }
        if let Some(last) = last_event_id {
            builder = builder.header("last-event-id", last);
        }
        for (name, value) in &self.headers {
            builder = builder.header(name, value);
        }
        if let Some(exchange) = &self.token_exchange {
            let token = exchange.token_for(self.caller.as_ref()).await?;
            builder = builder.header("authorization", format!("Bearer {token}"));
        }
        let body = Full::new(Bytes::from(line.unwrap_or_default().to_owned()));
        let request = builder
            .body(body)
            .map_err(|err| format!("the request could not be built: {err}"))?;
        let mut sender = self.connection().await?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|err| format!("{method} failed: {err}"))?;
        // The connection goes back to the pool once this response's body is read (hyper
        // reports it ready again then); a stream keeps it until it ends.
        self.idle.lock().await.push(sender);
        let (parts, body) = response.into_parts();
        Ok((parts.status, parts.headers, body))
    }

    /// A connection ready for a request: an idle one, or a new one. (HTTP/1.1 carries one
    /// exchange at a time; a connection still streaming an answer is skipped, not waited for.)
    async fn connection(&self) -> Result<SendRequest<Full<Bytes>>, String> {
        {
            let mut idle = self.idle.lock().await;
            idle.retain(|sender| !sender.is_closed());
            if let Some(ready) = idle.iter().position(SendRequest::is_ready) {
                return Ok(idle.swap_remove(ready));
            }
        }
        let stream = tokio::net::TcpStream::connect(&self.endpoint.authority)
            .await
            .map_err(|err| format!("cannot connect to {}: {err}", self.endpoint.authority))?;
        let _ = stream.set_nodelay(true);
        let authority = &self.endpoint.authority;
        let handshake_failed =
            |err: hyper::Error| format!("HTTP handshake with {authority} failed: {err}");
        let (sender, connection): (_, Connection) = match &self.tls {
            Some(tls) => {
                let name =
                    rustls_pki_types::ServerName::try_from(self.endpoint.server_name.clone())
                        .map_err(|err| {
                            format!(
                                "`{}` is not a TLS server name: {err}",
                                self.endpoint.server_name
                            )
                        })?;
                let stream = tls
                    .connect(name, stream)
                    .await
                    .map_err(|err| format!("TLS with {authority} failed: {err}"))?;
                let (sender, connection) =
                    hyper::client::conn::http1::handshake(TokioIo::new(stream))
                        .await
                        .map_err(handshake_failed)?;
                (sender, Box::pin(connection))
            }
            None => {
                let (sender, connection) =
                    hyper::client::conn::http1::handshake(TokioIo::new(stream))
                        .await
                        .map_err(handshake_failed)?;
                (sender, Box::pin(connection))
            }
        };
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(sender)
    }
}

/// Whether `line` carries the 2026-07-28 per-request envelope (what [`Client::request`] sends
/// that era's routing headers for when no session version was negotiated).
fn carries_envelope(line: &str) -> bool {
    !super::stateless_http::routing_headers(line).is_empty()
}

fn header(headers: &hyper::HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

fn is_event_stream(headers: &hyper::HeaderMap) -> bool {
    header(headers, "content-type").is_some_and(|t| t.starts_with("text/event-stream"))
}

/// One request to another HTTP server that is not an upstream (an issuer's documents, a token
/// endpoint, an LLM endpoint), over the same hyper + rustls stack as the upstream client, on a
/// connection of its own: `method url` with `headers` and `body`, answered with its status and at
/// most `max` bytes of its body. The callers bound the time.
async fn request_once(
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
    max: usize,
) -> Result<(StatusCode, Bytes), String> {
    let endpoint = Endpoint::parse(url)?;
    let stream = tokio::net::TcpStream::connect(&endpoint.authority)
        .await
        .map_err(|err| format!("cannot connect to {}: {err}", endpoint.authority))?;
    let mut request = Request::builder()
        .method(method.clone())
        .uri(&endpoint.path)
        .header("host", &endpoint.host)
        .header("accept", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request
        .body(Full::new(Bytes::from(body)))
        .map_err(|_| "the request could not be built (a header value is not valid)".to_owned())?;
    let failed = |err: hyper::Error| format!("{method} {url} failed: {err}");
    let response = if endpoint.tls {
        let tls = tls_connector(&[])?;
        let name = rustls_pki_types::ServerName::try_from(endpoint.server_name.clone())
            .map_err(|err| format!("`{}` is not a TLS server name: {err}", endpoint.server_name))?;
        let stream = tls
            .connect(name, stream)
            .await
            .map_err(|err| format!("TLS with {} failed: {err}", endpoint.authority))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(failed)?;
        tokio::spawn(connection);
        sender.send_request(request).await.map_err(failed)?
    } else {
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(failed)?;
        tokio::spawn(connection);
        sender.send_request(request).await.map_err(failed)?
    };
    let status = response.status();
    let body = http_body_util::Limited::new(response.into_body(), max)
        .collect()
        .await
        .map_err(|err| {
            format!("{method} {url}: the answer could not be read (over {max} bytes?): {err}")
        })?;
    Ok((status, body.to_bytes()))
}

/// The body of `GET url` (an `https://` URL, or `http://` on a loopback address: the caller
/// decides which it allows, see [`is_secure_or_loopback`]), at most `max` bytes, within `timeout`:
/// for documents the proxy reads from other servers (an issuer's metadata and keys).
pub(crate) async fn get_document(
    url: &str,
    max: usize,
    timeout: std::time::Duration,
) -> Result<Bytes, String> {
    let work = async {
        let (status, body) = request_once(Method::GET, url, &[], Vec::new(), max).await?;
        if status != StatusCode::OK {
            return Err(format!("GET {url} answered {status}"));
        }
        Ok(body)
    };
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| format!("GET {url} took longer than {} s", timeout.as_secs()))?
}

/// `POST url` with a JSON `body` and `headers`: the answer's status and body (at most `max`
/// bytes). For JSON APIs the proxy calls on a model's behalf (`crate::llm`'s endpoint); the
/// caller bounds the time.
pub(crate) async fn post_json(
    url: &str,
    headers: &[(&str, String)],
    body: Vec<u8>,
    max: usize,
) -> Result<(StatusCode, Bytes), String> {
    let mut all: Vec<(&str, &str)> = vec![("content-type", "application/json")];
    all.extend(headers.iter().map(|(name, value)| (*name, value.as_str())));
    request_once(Method::POST, url, &all, body, max).await
}

/// `POST url` with a form body (`application/x-www-form-urlencoded`) and `Authorization:
/// authorization`: the status and at most `max` bytes of the body, within `timeout`. For the
/// token exchange ([`super::token_exchange`]).
pub(crate) async fn post_form(
    url: &str,
    authorization: &str,
    form: String,
    max: usize,
    timeout: std::time::Duration,
) -> Result<(StatusCode, Bytes), String> {
    let headers = [
        ("content-type", "application/x-www-form-urlencoded"),
        ("authorization", authorization),
    ];
    tokio::time::timeout(
        timeout,
        request_once(Method::POST, url, &headers, form.into_bytes(), max),
    )
    .await
    .map_err(|_| format!("POST {url} took longer than {} s", timeout.as_secs()))?
}

/// Whether `url` is `https://`, or `http://` to a loopback address (`localhost`, `127.x`,
/// `[::1]`): the only places the proxy fetches keys from, so that no one on the path can
/// swap them.
pub(crate) fn is_secure_or_loopback(url: &str) -> bool {
    match Endpoint::parse(url) {
        Ok(endpoint) if endpoint.tls => true,
        Ok(endpoint) => {
            endpoint.server_name == "localhost"
                || endpoint
                    .server_name
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }
        Err(_) => false,
    }
}

/// TLS for `https://` servers: the Mozilla roots, and the CAs in `ca_files`.
pub(crate) fn tls_connector(
    ca_files: &[std::path::PathBuf],
) -> Result<tokio_rustls::TlsConnector, String> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    for path in ca_files {
        let certs = CertificateDer::pem_file_iter(path)
            .map_err(|err| format!("cannot read CA file {}: {err}", path.display()))?;
        for cert in certs {
            let cert = cert.map_err(|err| format!("CA file {}: {err}", path.display()))?;
            roots
                .add(cert)
                .map_err(|err| format!("CA file {}: {err}", path.display()))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| format!("TLS setup failed: {err}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

/// Whether an answer is JSON. A `400` in JSON to a message that carried a session id is read as
/// "unknown session": what the TypeScript SDK's example servers answer where the spec says `404`.
fn is_json(headers: &hyper::HeaderMap) -> bool {
    header(headers, "content-type").is_some_and(|t| t.starts_with("application/json"))
}

fn protocol_version(line: &str) -> Option<String> {
    /// The one member looked for; the rest of the result is skipped, not built.
    #[derive(serde::Deserialize)]
    struct Negotiated {
        #[serde(rename = "protocolVersion")]
        protocol_version: Option<String>,
    }
    if !line.contains("\"protocolVersion\"") {
        return None;
    }
    let Ok(Message::Result { result, .. }) = Message::parse(line) else {
        return None;
    };
    serde_json::from_str::<Negotiated>(result)
        .ok()?
        .protocol_version
}

/// The declared length of a body (`Content-Length`), when there is one.
fn content_length(headers: &hyper::HeaderMap) -> Option<u64> {
    headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// The messages of a JSON body: one message, or (from old servers) a batch.
async fn read_messages(
    headers: &hyper::HeaderMap,
    body: hyper::body::Incoming,
    max_line: usize,
) -> Result<Vec<String>, String> {
    if is_event_stream(headers) {
        let mut events = SseReader::new(body, max_line);
        let mut out = Vec::new();
        while let Some(event) = events.next().await? {
            out.extend(event.data);
        }
        return Ok(out);
    }
    let bytes = BodyReader::new(body, content_length(headers), max_line)
        .map_err(|err| err.to_string())?
        .read_all()
        .await
        .map_err(|err| err.to_string())?;
    json_messages(bytes)
}

/// The messages of a JSON body read whole: one message, or (from old servers) a batch.
fn json_messages(bytes: Vec<u8>) -> Result<Vec<String>, String> {
    // UTF-8 (the usual case) becomes the message without a copy; anything else is read with
    // replacement characters, as before.
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(err) => String::from_utf8_lossy(err.as_bytes()).into_owned(),
    };
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Ok(Vec::new());
    }
    let text = if trimmed.len() == text.len() {
        text
    } else {
        trimmed.to_owned()
    };
    if text.starts_with('[') {
        // A batch: each member as the server wrote it.
        return match serde_json::from_str::<Vec<&RawValue>>(&text) {
            Ok(batch) => Ok(batch.iter().map(|m| m.get().to_owned()).collect()),
            Err(err) => Err(format!("the answer is not JSON: {err}")),
        };
    }
    // Checked to be JSON without building it: a `Value` of a 1.25 MB listing was most of the
    // proxy's CPU per `tools/list` from an HTTP upstream (the same parser, so the same errors).
    match serde_json::from_str::<IgnoredAny>(&text) {
        Ok(_) => Ok(vec![text]),
        Err(err) => Err(format!("the answer is not JSON: {err}")),
    }
}

/// Whether `line` is the answer (a result or an error) to the request whose id is `wanted`.
fn answers(line: &str, wanted: Option<&serde_json::Value>) -> bool {
    let Some(wanted) = wanted else {
        return false;
    };
    jsonrpc::response_id(line).is_some_and(|id| {
        serde_json::from_str::<serde_json::Value>(id).is_ok_and(|id| id == *wanted)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_with_and_without_a_port() {
        let e = Endpoint::parse("http://127.0.0.1:3001/mcp").unwrap();
        assert_eq!(
            (e.authority.as_str(), e.path.as_str()),
            ("127.0.0.1:3001", "/mcp")
        );
        let e = Endpoint::parse("http://example.com").unwrap();
        assert_eq!(
            (e.authority.as_str(), e.path.as_str()),
            ("example.com:80", "/")
        );
        let e = Endpoint::parse("https://mcp.example.com/mcp").unwrap();
        assert!(e.tls);
        assert_eq!(e.authority, "mcp.example.com:443");
        assert_eq!(e.server_name, "mcp.example.com");
        let e = Endpoint::parse("https://[::1]:8443/mcp").unwrap();
        assert_eq!(
            (e.authority.as_str(), e.server_name.as_str()),
            ("[::1]:8443", "::1")
        );
        assert!(Endpoint::parse("ftp://x").is_err());
    }

    #[test]
    fn only_the_requests_own_result_or_error_answers_it() {
        let wanted = serde_json::json!(7);
        let answer = |line: &str| answers(line, Some(&wanted));
        assert!(answer(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#));
        assert!(answer(
            r#"{"jsonrpc":"2.0","id": 7 ,"error":{"code":1,"message":"x"}}"#
        ));
        assert!(!answer(r#"{"jsonrpc":"2.0","id":"7","result":{}}"#));
        assert!(!answer(r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#));
        assert!(!answer(
            r#"{"jsonrpc":"2.0","method":"notifications/progress"}"#
        ));
        assert!(!answers(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#, None));
    }
}
