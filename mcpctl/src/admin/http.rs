//! The admin listener and its router. hyper directly, the way the library's MCP front uses it
//! (`mcp-middleware/src/http/server.rs`): the routes are a dozen fixed paths, which one `match`
//! shows whole, and axum would add a dependency tree to every `mcpctl` build for that.
//!
//! Every path needs a caller ([`super::auth`]) except the UI's own page, script and style
//! (which hold no data: the page asks the API for everything) and its login: anything else
//! unauthenticated is `401` with an error body and nothing more.
//!
//! Before that, every request passes the MCP front's `Host`/`Origin` check (the same
//! [`Guard`](mcp_middleware::http::Guard), built from the same `--allow-host` and
//! `--allow-origin`), so a web page cannot reach the admin listener by DNS rebinding; a page the
//! admin listener serves itself (its `Origin` is the `Host` the check accepted) passes too.
//!
//! The listener is bounded so that no one without a token can make it hold much:
//! [`MAX_CONNECTIONS`] connections at once (one more is answered `503` and closed), headers
//! within [`HEADER_TIMEOUT`] and [`MAX_HEAD`] bytes, and a body read only after authentication, except the login
//! form's, which may be [`MAX_OPEN_BODY`] bytes sent within [`OPEN_BODY_TIMEOUT`]; an
//! authenticated body may be [`MAX_BODY`] bytes sent within [`BODY_TIMEOUT`]. Past a size the
//! answer is `413`, past a time `408`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode, header};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::api::{self, Body, error};
use super::request::form_value;
use super::{AdminState, ui};

/// The largest body an authenticated caller may send: an `apply` of hundreds of documents
/// fits (a server document is a few hundred bytes).
const MAX_BODY: usize = 1024 * 1024;
/// The largest body read before the caller is known: the login form, a token of a few dozen
/// bytes. Small, so that connections without a token cannot make the listener buffer much.
const MAX_OPEN_BODY: usize = 16 * 1024;
/// The largest request head (request line and headers) read; a larger one is answered `431`
/// (or the connection closed while it is still arriving). Unset, hyper buffers about 400 KB,
/// which 64 connections without a token could each fill.
const MAX_HEAD: usize = 64 * 1024;
/// How long a client may take to send a request's headers (then the connection is closed).
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the login form's body may take to arrive (`408` past it).
const OPEN_BODY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long an authenticated request's body may take to arrive (`408` past it).
const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// How many admin connections may be open at once. An operator's browser opens a handful and
/// scripts one each; past this a connection is answered `503` and closed, so held connections
/// cannot use up the process's file descriptors (which the MCP front and upstreams need).
const MAX_CONNECTIONS: usize = 64;
/// How many connections past [`MAX_CONNECTIONS`] may be in the middle of being refused; past
/// that one is closed unanswered.
const REFUSING: usize = 16;
/// How long refusing one connection may take (writing the `503`, reading what it sent).
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(1);

/// A running admin listener.
pub(crate) struct AdminServer {
    pub(crate) addr: SocketAddr,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl AdminServer {
    /// Stops accepting and closes every connection.
    pub(crate) async fn shutdown(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

/// Starts serving `state` on `listener`.
pub(crate) fn start(listener: TcpListener, state: Arc<AdminState>) -> std::io::Result<AdminServer> {
    let addr = listener.local_addr()?;
    let stop = CancellationToken::new();
    let stopping = stop.clone();
    let task = tokio::spawn(async move {
        let mut connections = tokio::task::JoinSet::new();
        let open = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        let refusing = Arc::new(Semaphore::new(REFUSING));
        loop {
            tokio::select! {
                _ = stopping.cancelled() => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let Ok(permit) = open.clone().try_acquire_owned() else {
                            tracing::warn!(%peer, max = MAX_CONNECTIONS, "the admin listener holds its limit of connections; refusing one");
                            if let Ok(refusal) = refusing.clone().try_acquire_owned() {
                                connections.spawn(async move {
                                    let _ = tokio::time::timeout(REFUSAL_TIMEOUT, refuse(stream)).await;
                                    drop(refusal);
                                });
                            }
                            continue;
                        };
                        let state = state.clone();
                        let stopping = stopping.clone();
                        connections.spawn(async move {
                            let service = service_fn(move |request| {
                                let state = state.clone();
                                async move { Ok::<_, Infallible>(handle(&state, request).await) }
                            });
                            let connection = http1::Builder::new()
                                .timer(TokioTimer::new())
                                .header_read_timeout(HEADER_TIMEOUT)
                                .max_header_size(MAX_HEAD)
                                .serve_connection(TokioIo::new(stream), service);
                            tokio::select! {
                                result = connection => if let Err(err) = result {
                                    tracing::debug!(%err, "an admin connection failed");
                                },
                                _ = stopping.cancelled() => {}
                            }
                            drop(permit);
                        });
                    }
                    Err(err) => {
                        tracing::warn!(%err, "accepting an admin connection failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                },
                Some(_) = connections.join_next() => {}
            }
        }
        connections.shutdown().await;
    });
    Ok(AdminServer { addr, stop, task })
}

/// Answers a connection past [`MAX_CONNECTIONS`] with `503` and closes it. What the client
/// sent is read (and dropped) after the answer, so closing does not reset the connection
/// before the client has read why.
async fn refuse(mut stream: TcpStream) {
    let body = serde_json::json!({"error": {"message": format!(
        "the admin listener holds its limit of {MAX_CONNECTIONS} connections; close one or try again later"
    )}})
    .to_string();
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    if stream.write_all(answer.as_bytes()).await.is_err() {
        return;
    }
    let _ = stream.shutdown().await;
    let mut sink = [0u8; 1024];
    while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
}

/// The query parameter `name`, percent-decoded (`Some("")` for a bare `?follow`).
fn query(request: &Request<Incoming>, name: &str) -> Option<String> {
    form_value(request.uri().query()?, name)
}

/// The body of `request`: at most `limit` bytes, arriving within `time`; else the `413` or
/// `408` to answer. A `Content-Length` over the limit is refused before anything is read.
async fn read_body(
    request: Request<Incoming>,
    limit: usize,
    time: Duration,
) -> Result<Bytes, Response<Body>> {
    let too_large = || {
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request body is over this endpoint's limit of {limit} bytes"),
        )
    };
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    match tokio::time::timeout(time, Limited::new(request.into_body(), limit).collect()).await {
        Ok(Ok(body)) => Ok(body.to_bytes()),
        Ok(Err(err)) if err.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Ok(Err(err)) => Err(error(
            StatusCode::BAD_REQUEST,
            format!("the request body could not be read: {err}"),
        )),
        Err(_) => Err(error(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request body did not arrive within {} s",
                time.as_secs()
            ),
        )),
    }
}

/// The body of an authenticated request (see [`read_body`]).
async fn read_caller_body(request: Request<Incoming>) -> Result<Bytes, Response<Body>> {
    read_body(request, MAX_BODY, BODY_TIMEOUT).await
}

/// The MCP front's `Host`/`Origin` check, with one addition for the UI's own requests: an
/// `Origin` naming the very `Host` the check accepted is the admin listener's own page, so it
/// is checked by that `Host` alone (a browser sends `Origin` on the UI's `POST` and `DELETE`).
fn check_host(
    guard: &mcp_middleware::http::Guard,
    headers: &header::HeaderMap,
) -> Result<(), mcp_middleware::http::GuardRefusal> {
    let refused = match guard.check_request(headers) {
        Ok(()) => return Ok(()),
        Err(refused) => refused,
    };
    let single = |name: &header::HeaderName| {
        let mut values = headers.get_all(name).iter();
        match (values.next(), values.next()) {
            (Some(value), None) => value.to_str().ok(),
            _ => None,
        }
    };
    let same_origin = single(&header::HOST)
        .zip(single(&header::ORIGIN))
        .is_some_and(|(host, origin)| {
            origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"))
                .is_some_and(|authority| authority.trim_end_matches('/').eq_ignore_ascii_case(host))
        });
    // With `--allow-host '*'` every Host passes, so an Origin naming its own Host says nothing
    // about whose page it is: the Origin check stands as the MCP front's does.
    let mut any_host = header::HeaderMap::new();
    any_host.insert(
        header::HOST,
        header::HeaderValue::from_static("host.invalid"),
    );
    if !same_origin || guard.check_request(&any_host).is_ok() {
        return Err(refused);
    }
    let mut host_only = header::HeaderMap::new();
    for value in headers.get_all(header::HOST) {
        host_only.append(header::HOST, value.clone());
    }
    guard.check_request(&host_only)
}

async fn handle(state: &AdminState, request: Request<Incoming>) -> Response<Body> {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    // Before anything else, login included: a rebound name must not reach even the login.
    if let Err(refused) = check_host(&state.guard, request.headers()) {
        return error(refused.status, refused.message);
    }
    // The UI's shell and login need no caller; they hold no data.
    match (&method, path.as_str()) {
        (&Method::GET, "/") => return ui::redirect("/ui/"),
        (&Method::GET, "/ui") => return ui::redirect("/ui/"),
        (&Method::GET, "/ui/") => {
            if let Some(token) = query(&request, "token") {
                return ui::login_with(state, &token);
            }
            return ui::page();
        }
        (&Method::GET, "/ui/app.js") => return ui::script(),
        (&Method::GET, "/ui/style.css") => return ui::style(),
        (&Method::POST, "/ui/login") => {
            let body = match read_body(request, MAX_OPEN_BODY, OPEN_BODY_TIMEOUT).await {
                Ok(body) => body,
                Err(response) => return response,
            };
            let token = form_value(&String::from_utf8_lossy(&body), "token").unwrap_or_default();
            return ui::login_with(state, &token);
        }
        _ => {}
    }
    let Some(caller) = state.auth.caller(request.headers()) else {
        return error(
            StatusCode::UNAUTHORIZED,
            "the admin API needs `Authorization: Bearer TOKEN` with a token from --admin-tokens",
        );
    };
    let mutating = !matches!(method, Method::GET | Method::HEAD);
    if mutating && !caller.may_change(request.headers()) {
        return error(
            StatusCode::FORBIDDEN,
            "a request with the UI's cookie that changes something needs the `X-Admin-CSRF` header",
        );
    }
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match (&method, segments.as_slice()) {
        (&Method::POST, ["ui", "logout"]) => {
            state.auth.close_ui(request.headers());
            ui::logged_out()
        }
        (&Method::GET, ["api", "whoami"]) => api::json_response(
            StatusCode::OK,
            &serde_json::json!({"subject": caller.subject, "csrf": caller.csrf}),
        ),
        (&Method::GET, ["api", "openapi.json"]) => {
            let mut response =
                Response::new(Full::new(Bytes::from_static(OPENAPI.as_bytes())).boxed());
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("application/json"),
            );
            response
        }
        (&Method::GET, ["api", "servers"]) => api::servers(state).await,
        (&Method::GET, ["api", "tools"]) => api::tools(state).await,
        (&Method::POST, ["api", "tools", name, "call"]) => {
            let name = percent_encoding::percent_decode_str(name)
                .decode_utf8_lossy()
                .into_owned();
            match read_caller_body(request).await {
                Ok(body) => api::call_tool(state, &name, &body).await,
                Err(response) => response,
            }
        }
        (&Method::POST, ["api", endpoint @ ("search" | "inspect" | "execute")]) => {
            match read_caller_body(request).await {
                Ok(body) => api::code_mode(state, endpoint, &body).await,
                Err(response) => response,
            }
        }
        (&Method::GET, ["api", "sessions"]) => api::sessions(state),
        (&Method::DELETE, ["api", "sessions", id]) => api::end_session(state, id, &caller.subject),
        (&Method::GET, ["api", "proxymodels"]) => api::proxy_models(state),
        (&Method::GET, ["api", "project"]) => api::project(state),
        (&Method::GET, ["api", "audit"]) => {
            let tail = match query(&request, "tail").map(|t| t.parse::<usize>()) {
                None => 50,
                Some(Ok(n)) => n,
                Some(Err(_)) => {
                    return error(StatusCode::BAD_REQUEST, "`tail` must be a whole number");
                }
            };
            api::audit(state, tail)
        }
        (&Method::GET, ["api", "logs"]) => {
            let tail = match query(&request, "tail").map(|t| t.parse::<usize>()) {
                None => None,
                Some(Ok(n)) => Some(n),
                Some(Err(_)) => {
                    return error(StatusCode::BAD_REQUEST, "`tail` must be a whole number");
                }
            };
            let follow = query(&request, "follow").is_some_and(|f| f != "false" && f != "0");
            api::logs(tail, follow)
        }
        (&Method::POST, ["api", "apply"]) => {
            let content_type = request
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned();
            match read_caller_body(request).await {
                Ok(body) => api::apply(state, &content_type, &body).await,
                Err(response) => response,
            }
        }
        #[cfg(feature = "metrics")]
        (&Method::GET, ["metrics"]) => api::metrics(state),
        (_, ["api", ..]) | (_, ["metrics"]) => error(
            StatusCode::NOT_FOUND,
            format!("no admin endpoint `{method} {path}` (see /api/openapi.json)"),
        ),
        _ => error(StatusCode::NOT_FOUND, format!("nothing at `{path}`")),
    }
}

/// The OpenAPI document of this API.
const OPENAPI: &str = include_str!("openapi.json");
