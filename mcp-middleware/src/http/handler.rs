//! One HTTP request to the MCP endpoint: checks, then POST (a message in), GET (a stream out)
//! or DELETE (end the session).

use std::future::poll_fn;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use hyper::body::{Body as _, Incoming};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Map, Value};
use tokio_util::task::AbortOnDropHandle;

use super::authn::{Authenticated, Validity};
use super::body::{Body, Delivery, Framing, SseBody};
use super::front::Front;
use super::quota::Owner;
use super::reject::{HEADER_MISMATCH, Reject};
use super::sessions::{SessionHandle, SessionTable, StatelessKey};
use super::streams::Opened;
use super::tls::PeerCertificate;
use crate::auth::Identity;
use crate::era::{self, STATELESS_VERSION, UNSUPPORTED_PROTOCOL_VERSION};
use crate::jsonrpc::{self, Message};

const SESSION_ID: &str = "mcp-session-id";
const PROTOCOL_VERSION: &str = "mcp-protocol-version";
const LAST_EVENT_ID: &str = "last-event-id";
const MCP_METHOD: &str = "mcp-method";
const MCP_NAME: &str = "mcp-name";

/// The protocol versions the HTTP front accepts in `MCP-Protocol-Version`.
pub const SUPPORTED_VERSIONS: [&str; 5] = [
    "2024-11-05",
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    STATELESS_VERSION,
];

/// How long a request body may take to arrive.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves one request from `peer`; never fails (a refusal is a response too).
pub(crate) async fn handle(
    table: Arc<SessionTable>,
    front: Arc<Front>,
    certificate: Option<&PeerCertificate>,
    peer: IpAddr,
    request: Request<Incoming>,
) -> Response<Body> {
    // CORS headers only for a request with exactly one Origin (two are refused anyway).
    let mut origins = request.headers().get_all(header::ORIGIN).iter();
    let origin = match (origins.next(), origins.next()) {
        (Some(origin), None) => origin.to_str().ok().map(str::to_owned),
        _ => None,
    };
    let method = request.method().clone();
    let mut response = match dispatch(&table, &front, certificate, peer, request).await {
        Ok(response) => response,
        Err(reject) => {
            if reject.status.is_server_error() {
                tracing::warn!(%method, status = %reject.status, "{}", reject.message);
            } else {
                tracing::debug!(%method, status = %reject.status, "{}", reject.message);
            }
            rejected(&reject)
        }
    };
    // Browsers may read the response when the origin passed the guard.
    if let Some(origin) = origin
        && front.guard.check(None, Some(&origin)).is_ok()
        && let Ok(value) = HeaderValue::from_str(&origin)
    {
        let headers = response.headers_mut();
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, value);
        headers.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static("mcp-session-id, www-authenticate"),
        );
        headers.append(header::VARY, HeaderValue::from_static("origin"));
    }
    response
}

async fn dispatch(
    table: &Arc<SessionTable>,
    front: &Front,
    certificate: Option<&PeerCertificate>,
    peer: IpAddr,
    request: Request<Incoming>,
) -> Result<Response<Body>, Reject> {
    let path = &table.options().path;
    // Before the Host guard and authentication: probes send neither a listed Host nor a
    // credential, and the answer is only a status.
    if request.uri().path() != path && super::health::Health::serves(request.uri().path()) {
        let closing = table.check_open().err().map(|reject| reject.message);
        let (status, body) = front
            .health
            .answer(request.method(), request.uri().path(), closing)
            .await;
        return Ok(json_response(status, body));
    }
    if let Some(resource) = &front.resource
        && super::resource::Published::serves(request.uri().path(), path)
    {
        front.guard.check_headers(request.headers())?;
        return match *request.method() {
            Method::GET => {
                let mut response = json_response(StatusCode::OK, resource.document.clone());
                // Public, and read by browser-based clients of any origin.
                response.headers_mut().insert(
                    header::ACCESS_CONTROL_ALLOW_ORIGIN,
                    HeaderValue::from_static("*"),
                );
                Ok(response)
            }
            Method::OPTIONS => Ok(preflight(request.headers())),
            _ => Err(method_not_allowed(
                "Method Not Allowed: the protected-resource metadata is read with GET",
            )),
        };
    }
    if request.uri().path() != path {
        return Err(Reject::new(
            StatusCode::NOT_FOUND,
            jsonrpc::INVALID_REQUEST,
            format!("Not Found: the MCP endpoint is {path}"),
        ));
    }
    let headers = request.headers();
    front.guard.check_headers(headers)?;
    match *request.method() {
        Method::POST | Method::GET | Method::DELETE => {}
        Method::OPTIONS => return Ok(preflight(request.headers())),
        _ => {
            return Err(method_not_allowed(format!(
                "Method Not Allowed: the MCP endpoint takes POST, GET and DELETE, not {}",
                request.method()
            )));
        }
    }
    // Every request authenticates, and its session must belong to whoever it authenticates as.
    // A stream it opens lasts only as long as the credential.
    let authenticated = front.authn.authenticate(headers, certificate).await;
    let Authenticated {
        identity,
        validity,
        bearer,
    } = match authenticated {
        Ok(authenticated) => authenticated,
        Err(reject) => {
            // Read a small body to its end first, so the connection stays usable: a client that
            // reuses it (as an SDK does after logging in) gets the refusal, not a closed socket.
            discard_body(request.into_body()).await;
            return Err(reject);
        }
    };
    let bearer = bearer.as_ref().map(|token| &*token.0);
    match *request.method() {
        Method::POST => post(table, &identity, validity, bearer, peer, request).await,
        Method::GET => get(table, &identity, validity, request.headers()).await,
        _ => delete(table, &identity, request.headers()).await,
    }
}

// ------------------------------------------------------------------------------------- POST

async fn post(
    table: &Arc<SessionTable>,
    identity: &Identity,
    validity: Validity,
    bearer: Option<&str>,
    peer: IpAddr,
    request: Request<Incoming>,
) -> Result<Response<Body>, Reject> {
    table.check_open()?;
    let (parts, body) = request.into_parts();
    let headers = &parts.headers;
    if !accepts(headers, "application/json") || !accepts(headers, "text/event-stream") {
        return Err(Reject::new(
            StatusCode::NOT_ACCEPTABLE,
            jsonrpc::INVALID_REQUEST,
            "Not Acceptable: a POST must accept both application/json and text/event-stream",
        ));
    }
    let is_json = text(headers, header::CONTENT_TYPE.as_str())
        .is_some_and(|t| media_type(t).eq_ignore_ascii_case("application/json"));
    if !is_json {
        return Err(Reject::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            jsonrpc::INVALID_REQUEST,
            "Unsupported Media Type: the body must be Content-Type: application/json",
        ));
    }
    let version = protocol_version(headers)?;
    let max = table.options().max_body_bytes;
    let bytes = read_body(body, max, headers).await?;
    let line = String::from_utf8(bytes).map_err(|err| {
        Reject::new(
            StatusCode::BAD_REQUEST,
            jsonrpc::PARSE_ERROR,
            format!(
                "Parse error: the body is not UTF-8 (invalid byte at offset {})",
                err.utf8_error().valid_up_to()
            ),
        )
    })?;
    let message = Message::parse(&line).map_err(|malformed| {
        Reject::new(StatusCode::BAD_REQUEST, malformed.code, malformed.message)
            .with_id(malformed.id.as_deref())
    })?;
    let session_header = text(headers, SESSION_ID);
    match message {
        Message::Request { id, method, params } => {
            let (handle, created) = if method == "initialize" {
                // A new session, unless it names one that is open (a second initialize on a
                // session goes to that session, as on stdio).
                match session_header.and_then(|sid| table.find(sid, identity)) {
                    Some(handle) => (handle, false),
                    None => (
                        table
                            .create(identity, Owner::of(identity, peer))
                            .await
                            .map_err(|r| r.with_id(Some(id)))?,
                        true,
                    ),
                }
            } else if let Some(sid) = session_header {
                let handle = table
                    .lookup(sid, identity)
                    .await
                    .map_err(|r| r.with_id(Some(id)))?
                    .ok_or_else(|| Reject::session_not_found().with_id(Some(id)))?;
                (handle, false)
            } else if version == Some(STATELESS_VERSION) || params.is_some_and(era::has_envelope) {
                let owner = Owner::of(identity, peer);
                let key = check_stateless(headers, version, id, &method, params, owner)?;
                (
                    table
                        .stateless(key, identity)
                        .await
                        .map_err(|r| r.with_id(Some(id)))?,
                    false,
                )
            } else {
                return Err(Reject::bad_request(
                    "Bad Request: Mcp-Session-Id header is required; start a session with \
                     `initialize` (or send 2026-07-28 requests, which need none)",
                )
                .with_id(Some(id)));
            };
            // Before the request is routed: its restrictions, and the token exchange to
            // upstreams, follow the credential it came with.
            handle.present(identity, bearer);
            let stateless = handle.id.starts_with("stateless:");
            let opened = {
                let mut streams = handle
                    .streams
                    .lock()
                    .map_err(|_| Reject::session_not_found())?;
                streams.open_request(&handle.streams, &line, id, &method, params)?
            };
            request_response(table, &handle, opened, created, stateless, validity).await
        }
        Message::Notification { method, params } => {
            let Some(handle) =
                session_for_message(table, identity, session_header, version).await?
            else {
                return Ok(accepted());
            };
            if method == "notifications/cancelled"
                && let Some(request_id) = params
                    .and_then(|p| serde_json::from_str::<Map<String, Value>>(p).ok())
                    .and_then(|p| p.get("requestId").map(Value::to_string))
                && let Ok(mut streams) = handle.streams.lock()
            {
                streams.cancelled_by_client(&request_id);
            }
            // With a shared store, one of a server request's, for the replica that asked.
            if method == "notifications/cancelled"
                && super::shared_streams::cancelled(table, &handle, &line, params).await?
            {
                return Ok(accepted());
            }
            let initialized = method == "notifications/initialized";
            handle.send(line).await?;
            if initialized {
                // With a shared store, the session's upstreams on other replicas learn it too.
                super::shared_streams::initialized(table, &handle).await;
            }
            Ok(accepted())
        }
        Message::Result { .. } | Message::Error { .. } => {
            let Some(handle) =
                session_for_message(table, identity, session_header, version).await?
            else {
                return Err(Reject::bad_request(
                    "Bad Request: 2026-07-28 clients send no responses (input comes back as \
                     `inputResponses` on a retried request)",
                ));
            };
            // With a shared store the replica whose upstream asked may be another one.
            super::shared_streams::answer(table, &handle, line).await?;
            Ok(accepted())
        }
    }
}

/// The session a notification or response belongs to; `None` for a 2026-07-28 client, whose
/// notifications mean nothing over HTTP (a request is cancelled by closing its stream).
async fn session_for_message(
    table: &SessionTable,
    identity: &Identity,
    session_header: Option<&str>,
    version: Option<&str>,
) -> Result<Option<Arc<SessionHandle>>, Reject> {
    match session_header {
        Some(sid) => table
            .lookup(sid, identity)
            .await?
            .map(Some)
            .ok_or_else(Reject::session_not_found),
        None if version == Some(STATELESS_VERSION) => Ok(None),
        None => Err(Reject::bad_request(
            "Bad Request: Mcp-Session-Id header is required; start a session with `initialize`",
        )),
    }
}

/// Sends the request into its session and answers with its stream.
async fn request_response(
    table: &SessionTable,
    handle: &Arc<SessionHandle>,
    opened: Opened,
    created: bool,
    stateless: bool,
    validity: Validity,
) -> Result<Response<Body>, Reject> {
    let Opened {
        stream,
        line,
        mut deliveries,
        guard,
        priming,
    } = opened;
    tracing::trace!(session = %super::sessions::short(&handle.id), stream, "request stream opened");
    handle.send(line).await?;
    let keep_alive = table.options().keep_alive;
    let first = first_message(&mut deliveries, table.options().json_window).await;
    if !stateless {
        // The priming event and a quick first message leave in one write.
        let first = match first {
            First::Arrived(first) => Some(first),
            First::Late | First::Ended => None,
        };
        let body = SseBody::new(priming, deliveries, keep_alive, Some(guard.boxed()))
            .until(validity)
            .with_first(first);
        let mut response = sse_response(Body::Sse(Box::new(body)));
        if created && let Ok(value) = HeaderValue::from_str(&handle.id) {
            response.headers_mut().insert(SESSION_ID, value);
        }
        return Ok(response);
    }
    // Stateless: a lone response goes out as JSON with a status that matches it; anything
    // before it (progress, logs), or a long wait, turns the answer into an SSE stream.
    let first = match first {
        First::Arrived(first) if first.last && first.framing == Framing::Event => {
            let status = status_for(&first.line);
            drop(guard);
            return Ok(json_response(status, first.line.to_string()));
        }
        First::Arrived(first) => Some(first),
        First::Late => None,
        First::Ended => {
            return Err(Reject::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                jsonrpc::INTERNAL_ERROR,
                "Internal error: the request ended without a response",
            ));
        }
    };
    let body = SseBody::new(None, deliveries, keep_alive, Some(guard.boxed()))
        .until(validity)
        .with_first(first);
    Ok(sse_response(Body::Sse(Box::new(body))))
}

/// What came of waiting for a request stream's first message.
enum First {
    /// It arrived within the window.
    Arrived(Delivery),
    /// The window passed first: the stream starts without it.
    Late,
    /// The stream's channel closed with nothing in it.
    Ended,
}

/// Waits up to `window` for the first message of a request's stream before its response
/// starts. A quick answer then goes out with the response's head in one write (one read for
/// the client) instead of the head, then the answer; a slow one only delays the head by
/// `window` (HTTP clients wait for it as they would for the answer).
async fn first_message(
    deliveries: &mut tokio::sync::mpsc::UnboundedReceiver<Delivery>,
    window: Duration,
) -> First {
    match tokio::time::timeout(window, deliveries.recv()).await {
        Ok(Some(first)) => First::Arrived(first),
        Ok(None) => First::Ended,
        Err(_) => First::Late,
    }
}

/// The HTTP status a 2026-07-28 answer goes out with.
fn status_for(line: &str) -> StatusCode {
    let code = match Message::parse(line) {
        Ok(Message::Error { error, .. }) => serde_json::from_str::<Value>(error)
            .ok()
            .and_then(|e| e.get("code")?.as_i64()),
        _ => None,
    };
    match code {
        Some(jsonrpc::METHOD_NOT_FOUND) => StatusCode::NOT_FOUND,
        Some(HEADER_MISMATCH | -32021 | UNSUPPORTED_PROTOCOL_VERSION) => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

/// The 2026-07-28 header checks (the headers mirror the body), and the key of the stateless
/// session the request belongs to.
fn check_stateless(
    headers: &HeaderMap,
    version: Option<&str>,
    id: &str,
    method: &str,
    params: Option<&str>,
    owner: Owner,
) -> Result<StatelessKey, Reject> {
    let params: Map<String, Value> = params
        .and_then(|p| serde_json::from_str(p).ok())
        .unwrap_or_default();
    let meta = params.get("_meta");
    let envelope_version = meta
        .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
        .and_then(Value::as_str);
    let mismatch = |message: String| {
        Reject::new(StatusCode::BAD_REQUEST, HEADER_MISMATCH, message).with_id(Some(id))
    };
    if let Some(envelope_version) = envelope_version
        && version != Some(envelope_version)
    {
        return Err(mismatch(format!(
            "Header mismatch: MCP-Protocol-Version `{}` does not match the envelope's \
             protocol version `{envelope_version}`",
            version.unwrap_or("(missing)")
        )));
    }
    let requested = envelope_version.or(version).unwrap_or_default();
    if requested != STATELESS_VERSION {
        let data = serde_json::json!({ "supported": [STATELESS_VERSION], "requested": requested });
        return Err(Reject::new(
            StatusCode::BAD_REQUEST,
            UNSUPPORTED_PROTOCOL_VERSION,
            format!("Unsupported protocol version `{requested}` for a request without a session"),
        )
        .with_id(Some(id))
        .with_data(data.to_string()));
    }
    if text(headers, MCP_METHOD) != Some(method) {
        return Err(mismatch(format!(
            "Header mismatch: Mcp-Method `{}` does not match the body's method `{method}`",
            text(headers, MCP_METHOD).unwrap_or("(missing)")
        )));
    }
    let name_key = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    };
    if let Some(key) = name_key
        && let Some(body_value) = params.get(key).and_then(Value::as_str)
    {
        let header = text(headers, MCP_NAME).map(decode_header_value);
        if header.as_deref() != Some(body_value) {
            return Err(mismatch(format!(
                "Header mismatch: Mcp-Name does not match the body's `{key}` `{body_value}`"
            )));
        }
    }
    let client = meta
        .and_then(|m| m.get("io.modelcontextprotocol/clientInfo"))
        .and_then(|info| info.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    Ok(StatelessKey { client, owner })
}

/// A header value with the `=?base64?...?=` sentinel decoded (standard base64, RFC 4648 §4,
/// padded or not).
fn decode_header_value(value: &str) -> String {
    value
        .strip_prefix("=?base64?")
        .and_then(|rest| rest.strip_suffix("?="))
        .and_then(|text| SENTINEL_BASE64.decode(text).ok())
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .unwrap_or_else(|| value.to_owned())
}

/// The sentinel's base64: the standard alphabet only, padding optional.
const SENTINEL_BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

// -------------------------------------------------------------------------------------- GET

async fn get(
    table: &SessionTable,
    identity: &Identity,
    validity: Validity,
    headers: &HeaderMap,
) -> Result<Response<Body>, Reject> {
    table.check_open()?;
    let version = protocol_version(headers)?;
    if version == Some(STATELESS_VERSION) {
        return Err(method_not_allowed(
            "Method Not Allowed: 2026-07-28 has no GET stream; change notifications come on \
             a `subscriptions/listen` request's stream",
        ));
    }
    if !accepts(headers, "text/event-stream") {
        return Err(Reject::new(
            StatusCode::NOT_ACCEPTABLE,
            jsonrpc::INVALID_REQUEST,
            "Not Acceptable: a GET must accept text/event-stream",
        ));
    }
    let handle = session_of(table, identity, headers).await?;
    if let Some(resumed) =
        super::shared_streams::resume_elsewhere(table, &handle, text(headers, LAST_EVENT_ID))
            .await?
    {
        handle.touch();
        let body = SseBody::new(
            Some(resumed.priming),
            resumed.deliveries,
            table.options().keep_alive,
            None,
        )
        .until(validity);
        return Ok(sse_response(Body::Sse(Box::new(body))));
    }
    let attached = {
        let mut streams = handle
            .streams
            .lock()
            .map_err(|_| Reject::session_not_found())?;
        streams.attach(&handle.streams, text(headers, LAST_EVENT_ID))?
    };
    handle.touch();
    let body = SseBody::new(
        Some(attached.priming),
        attached.deliveries,
        table.options().keep_alive,
        attached.guard.map(|g| g.boxed()),
    )
    .until(validity);
    Ok(sse_response(Body::Sse(Box::new(body))))
}

// ----------------------------------------------------------------------------------- DELETE

async fn delete(
    table: &SessionTable,
    identity: &Identity,
    headers: &HeaderMap,
) -> Result<Response<Body>, Reject> {
    let id = text(headers, SESSION_ID).ok_or_else(|| {
        Reject::bad_request("Bad Request: DELETE needs the Mcp-Session-Id of the session to end")
    })?;
    if !table
        .remove(id, identity, "the client ended the session")
        .await?
    {
        return Err(Reject::session_not_found());
    }
    tracing::info!(session = %super::sessions::short(id), "HTTP session ended by the client");
    Ok(Response::new(Body::Empty))
}

async fn session_of(
    table: &SessionTable,
    identity: &Identity,
    headers: &HeaderMap,
) -> Result<Arc<SessionHandle>, Reject> {
    let id = text(headers, SESSION_ID)
        .ok_or_else(|| Reject::bad_request("Bad Request: Mcp-Session-Id header is required"))?;
    table
        .lookup(id, identity)
        .await?
        .ok_or_else(Reject::session_not_found)
}

// ---------------------------------------------------------------------------------- helpers

fn text<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// `MCP-Protocol-Version`, if given; an unknown version is refused.
fn protocol_version(headers: &HeaderMap) -> Result<Option<&'static str>, Reject> {
    let Some(value) = headers.get(PROTOCOL_VERSION) else {
        return Ok(None);
    };
    let value = value.to_str().unwrap_or_default().trim();
    match SUPPORTED_VERSIONS.iter().find(|v| **v == value) {
        Some(known) => Ok(Some(known)),
        None => {
            let data = serde_json::json!({ "supported": SUPPORTED_VERSIONS, "requested": value });
            Err(Reject::new(
                StatusCode::BAD_REQUEST,
                UNSUPPORTED_PROTOCOL_VERSION,
                format!(
                    "Bad Request: unsupported MCP-Protocol-Version `{value}` (supported: {})",
                    SUPPORTED_VERSIONS.join(", ")
                ),
            )
            .with_data(data.to_string()))
        }
    }
}

fn media_type(value: &str) -> &str {
    value.split(';').next().unwrap_or_default().trim()
}

/// Whether `Accept` admits `wanted` (wildcards count).
fn accepts(headers: &HeaderMap, wanted: &str) -> bool {
    let (kind, _) = wanted.split_once('/').unwrap_or((wanted, ""));
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(media_type)
        .any(|m| {
            m.eq_ignore_ascii_case(wanted)
                || m == "*/*"
                || m.strip_suffix("/*")
                    .is_some_and(|k| k.eq_ignore_ascii_case(kind))
        })
}

/// Reads a request's body, within `max` bytes and [`BODY_TIMEOUT`], on a task of its own.
///
/// Why a task: taking a chunk from hyper's body channel wakes the task that sent it (hyper
/// 1.12, `body/chan.rs`, `Receiver::poll_next`), which is the connection's own task, the one
/// running this handler. A task woken while it runs is rescheduled as a yield, and tokio
/// answers a yield by waking another worker to take it: one hand-off between threads per
/// request. Read on a task of its own, the body wakes the connection's task while that one is
/// idle, which puts it in this worker's LIFO slot. HTTP>stdio passthrough echo: 3.5 -> 2.0
/// context switches, a third less CPU (the guide's Performance page). The task is aborted if
/// the request is dropped (its client went away).
async fn read_body(mut body: Incoming, max: usize, headers: &HeaderMap) -> Result<Vec<u8>, Reject> {
    let too_large = move || {
        Reject::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            jsonrpc::INVALID_REQUEST,
            format!("Payload Too Large: the body is over the proxy's limit of {max} bytes"),
        )
    };
    let declared =
        text(headers, header::CONTENT_LENGTH.as_str()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > max as u64) {
        return Err(too_large());
    }
    let read = async move {
        let mut out = Vec::with_capacity(declared.map_or(1024, |len| len as usize));
        while let Some(frame) = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
            let frame = frame.map_err(|err| {
                Reject::bad_request(format!("Bad Request: reading the body failed: {err}"))
            })?;
            if let Ok(data) = frame.into_data() {
                if out.len() + data.len() > max {
                    return Err(too_large());
                }
                out.extend_from_slice(&data);
            }
        }
        Ok(out)
    };
    let read = AbortOnDropHandle::new(tokio::spawn(tokio::time::timeout(BODY_TIMEOUT, read)));
    match read.await {
        Ok(Ok(read)) => read,
        Ok(Err(_elapsed)) => Err(Reject::new(
            StatusCode::REQUEST_TIMEOUT,
            jsonrpc::INVALID_REQUEST,
            format!(
                "Request Timeout: the body took over {} s",
                BODY_TIMEOUT.as_secs()
            ),
        )),
        // Only a panic, which the reading above has no way to make.
        Err(stopped) => Err(Reject::bad_request(format!(
            "Bad Request: reading the body stopped: {stopped}"
        ))),
    }
}

/// The most of a refused request's body read (and dropped) to keep its connection open; past
/// it, or past [`DISCARD_TIMEOUT`], the connection closes after the answer instead.
const DISCARD_MAX: usize = 64 * 1024;
/// How long a refused request's body may take to arrive before the connection is closed.
const DISCARD_TIMEOUT: Duration = Duration::from_secs(2);

/// Reads and drops up to [`DISCARD_MAX`] bytes of `body` within [`DISCARD_TIMEOUT`].
async fn discard_body(mut body: Incoming) {
    let drain = async {
        let mut read = 0usize;
        while let Some(Ok(frame)) = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
            if let Ok(data) = frame.into_data() {
                read += data.len();
                if read > DISCARD_MAX {
                    return;
                }
            }
        }
    };
    let _ = tokio::time::timeout(DISCARD_TIMEOUT, drain).await;
}

fn accepted() -> Response<Body> {
    let mut response = Response::new(Body::Empty);
    *response.status_mut() = StatusCode::ACCEPTED;
    response
}

fn json_response(status: StatusCode, body: String) -> Response<Body> {
    let mut response = Response::new(Body::full(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn sse_response(body: Body) -> Response<Body> {
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

fn method_not_allowed(message: impl Into<String>) -> Reject {
    Reject::new(
        StatusCode::METHOD_NOT_ALLOWED,
        jsonrpc::INVALID_REQUEST,
        message,
    )
}

/// The response that carries `reject`.
pub(crate) fn rejected(reject: &Reject) -> Response<Body> {
    let mut response = json_response(reject.status, reject.body());
    if reject.status == StatusCode::METHOD_NOT_ALLOWED {
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
    }
    if let Some(challenge) = &reject.challenge
        && let Ok(value) = HeaderValue::from_str(challenge)
    {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    if reject.status == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
    }
    response
}

/// A CORS preflight: the methods and headers the endpoint takes.
fn preflight(headers: &HeaderMap) -> Response<Body> {
    let mut response = Response::new(Body::Empty);
    *response.status_mut() = StatusCode::NO_CONTENT;
    let out = response.headers_mut();
    out.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, DELETE"),
    );
    let allow = headers
        .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
        .cloned()
        .unwrap_or_else(|| {
            HeaderValue::from_static(
                "content-type, accept, authorization, mcp-session-id, mcp-protocol-version, \
                 last-event-id, mcp-method, mcp-name",
            )
        });
    out.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, allow);
    out.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    out.insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_sentinels_decode() {
        assert_eq!(
            decode_header_value("=?base64?SGVsbG8sIOS4lueVjA==?="),
            "Hello, 世界"
        );
        assert_eq!(decode_header_value("plain"), "plain");
        assert_eq!(decode_header_value("=?base64?!!?="), "=?base64?!!?=");
        assert_eq!(decode_header_value("=?base64?SGk?="), "Hi", "unpadded");
        // The URL-safe alphabet is not the sentinel's (`-` and `_` are not standard base64).
        assert_eq!(decode_header_value("=?base64?-_8?="), "=?base64?-_8?=");
    }

    #[test]
    fn accept_admits_wildcards() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json;q=1, text/*"),
        );
        assert!(accepts(&headers, "application/json"));
        assert!(accepts(&headers, "text/event-stream"));
        headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        assert!(!accepts(&headers, "text/event-stream"));
    }

    #[test]
    fn stateless_errors_map_to_statuses() {
        assert_eq!(
            status_for(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"x"}}"#),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            status_for(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"x"}}"#),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            status_for(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            StatusCode::OK
        );
    }
}
