//! The admin listener and its router. hyper directly, the way the library's MCP front uses it
//! (`mcp-middleware/src/http/server.rs`): the routes are a dozen fixed paths, which one `match`
//! shows whole, and axum would add a dependency tree to every `mcpctl` build for that.
//!
//! Every path needs a caller ([`super::auth`]) except the UI's own page, script and style
//! (which hold no data: the page asks the API for everything) and its login: anything else
//! unauthenticated is `401` with an error body and nothing more.

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
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::api::{self, Body, error};
use super::{AdminState, ui};

/// The largest request body the admin API reads (an `apply` of many documents fits).
const MAX_BODY: usize = 8 * 1024 * 1024;

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
        loop {
            tokio::select! {
                _ = stopping.cancelled() => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _peer)) => {
                        let state = state.clone();
                        let stopping = stopping.clone();
                        connections.spawn(async move {
                            let service = service_fn(move |request| {
                                let state = state.clone();
                                async move { Ok::<_, Infallible>(handle(&state, request).await) }
                            });
                            let connection = http1::Builder::new()
                                .timer(TokioTimer::new())
                                .header_read_timeout(Duration::from_secs(30))
                                .serve_connection(TokioIo::new(stream), service);
                            tokio::select! {
                                result = connection => if let Err(err) = result {
                                    tracing::debug!(%err, "an admin connection failed");
                                },
                                _ = stopping.cancelled() => {}
                            }
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

/// The query parameter `name`, percent-decoded (`Some("")` for a bare `?follow`).
fn query(request: &Request<Incoming>, name: &str) -> Option<String> {
    form_value(request.uri().query()?, name)
}

/// The value of `name` in an `a=1&b=2` string, percent- and `+`-decoded.
pub(crate) fn form_value(text: &str, name: &str) -> Option<String> {
    text.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (key == name).then(|| {
            let value = value.replace('+', " ");
            percent_encoding::percent_decode_str(&value)
                .decode_utf8_lossy()
                .into_owned()
        })
    })
}

async fn read_body(request: Request<Incoming>) -> Result<Bytes, Response<Body>> {
    match Limited::new(request.into_body(), MAX_BODY).collect().await {
        Ok(body) => Ok(body.to_bytes()),
        Err(_) => Err(error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is over {MAX_BODY} bytes, or could not be read"),
        )),
    }
}

async fn handle(state: &AdminState, request: Request<Incoming>) -> Response<Body> {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
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
            let body = match read_body(request).await {
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
            match read_body(request).await {
                Ok(body) => api::call_tool(state, &name, &body).await,
                Err(response) => response,
            }
        }
        (&Method::POST, ["api", endpoint @ ("search" | "inspect" | "execute")]) => {
            match read_body(request).await {
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
            match read_body(request).await {
                Ok(body) => api::apply(state, &content_type, &body),
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
