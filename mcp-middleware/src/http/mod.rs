//! The streamable HTTP front: MCP clients reach the proxy at `/mcp` over HTTP.
//!
//! ```no_run
//! use mcp_middleware::{Proxy, http::HttpOptions, upstream::StdioServer};
//!
//! fn main() -> Result<(), mcp_middleware::ProxyError> {
//!     let server = StdioServer::new("npx").args(["-y", "@modelcontextprotocol/server-everything"]);
//!     let options = HttpOptions::default().listen("127.0.0.1:8080".parse().unwrap());
//!     Proxy::new(server).run_http(options) // until SIGTERM, SIGINT or SIGHUP
//! }
//! ```
//!
//! # Sessions
//!
//! Each HTTP session is one core session, exactly as one stdio connection is: its own upstream
//! (started when the session starts, restarted when it dies), its own model state, its own
//! forwarding loop. Nothing in the forwarding path knows it runs over HTTP; this module only
//! moves lines between HTTP requests and that loop.
//!
//! - **Stateful** (2025-11-25 and older clients): `initialize` without `Mcp-Session-Id` starts a
//!   session and its response carries the new id (128 random bits). Every later request must
//!   carry it: without it, `400`; with an id that names no open session (ended, expired,
//!   never issued), `404`, and the client starts over. `DELETE` ends a session.
//! - **Stateless** (2026-07-28 clients, whose requests carry the `_meta` envelope and no
//!   session id): requests are served by a *stateless session* keyed by the client's name in
//!   the envelope (`io.modelcontextprotocol/clientInfo.name`) and the identity the request
//!   authenticated as (see below). So model state (a gate opened by
//!   `begin_session`, pages of a paginated result, the bridge's input rounds) carries from one
//!   request of a client to the next, as 2026-07-28 intends ("servers that need cross-call
//!   state" keep it themselves), while different clients do not share it. Requests of one key
//!   share the session: each gets an id and progress token of the session's own on the way in
//!   and the client's back on the way out, so clients may reuse ids freely. Such a session
//!   ends when idle like any other. A lone response goes out as one JSON body whose status
//!   matches it (`404` with -32601, `400` with -32020/-32021/-32022), anything streamed as SSE;
//!   closing the stream cancels the request; no GET stream (`405`), no resumption.
//!
//! # Streams
//!
//! A POST carrying a request opens an SSE stream for it (stateful sessions always answer with
//! SSE: a priming event and `retry:` first, so even an early break is resumable). Where each
//! message from the session goes is decided per session (private module `streams`): a response
//! to its request's stream; progress to the stream of the request whose token it carries;
//! server requests, log messages and cancellations of server requests to the newest request
//! stream a client is connected to, else the GET stream, else stored on the newest open
//! request stream; other notifications to the GET stream, kept in a backlog while none is
//! open. A message goes on one stream only. Every event of a stateful session is kept in its
//! event store (bounded: [`HttpOptions::event_store_events`] and
//! [`HttpOptions::event_store_bytes`]) under the id `STREAM-SEQ`; a GET with `Last-Event-ID`
//! replays that stream after that event and carries it on. A second GET stream replaces the
//! first. Idle streams get a comment line every [`HttpOptions::keep_alive`].
//!
//! # Checks
//!
//! In order, each with a JSON-RPC error body (without an id unless the request's was read):
//!
//! | check | status | code |
//! |---|---|---|
//! | `GET /healthz`, `GET /readyz`: answered before every other check ([`Readiness`]) | 200 / 503 | |
//! | path is not the endpoint (nor, with [`HttpOptions::protected_resource`], a GET of its metadata) | 404 | -32600 |
//! | `Host` or `Origin` not loopback or configured (DNS rebinding) | 403 | -32600 |
//! | method other than POST, GET, DELETE (OPTIONS answers CORS preflight) | 405 | -32600 |
//! | no valid credential, when [`HttpOptions::auth`] or client certificates are configured | 401 | [`UNAUTHORIZED`] |
//! | a JWT without every scope [`ProtectedResource::scopes`] requires | 403 | [`UNAUTHORIZED`] |
//! | shutting down, or [`HttpOptions::max_sessions`] or the caller's [`HttpOptions::session_quota`] reached (with `Retry-After`) | 503 | -32000 |
//! | POST `Accept` lacks `application/json` or `text/event-stream`; GET lacks the latter | 406 | -32600 |
//! | POST `Content-Type` not `application/json` | 415 | -32600 |
//! | unknown `MCP-Protocol-Version` | 400 | -32022 |
//! | body over [`HttpOptions::max_body_bytes`] | 413 | -32600 |
//! | body not UTF-8 or not JSON | 400 | -32700 |
//! | not one JSON-RPC message (a batch, a bad envelope) | 400 | -32600 |
//! | no `Mcp-Session-Id` where one is needed | 400 | -32600 |
//! | `Mcp-Session-Id` names no open session (or one another identity started) | 404 | -32600 |
//! | a request id already in flight in the session | 409 | -32600 |
//! | 2026-07-28 headers disagree with the body (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`) | 400 | -32020 |
//! | the upstream could not be started for a new session | 502 | -32001 |
//!
//! `Mcp-Param-*` headers are passed over: the proxy does not keep tool schemas to check them
//! against.
//!
//! # Quotas
//!
//! Each session runs its own upstream, so sessions are bounded globally
//! ([`HttpOptions::max_sessions`]) and per principal ([`HttpOptions::session_quota`]; a client
//! that authenticates as no one is counted by its address), stateless sessions included, and
//! connections by [`HttpOptions::max_connections`], of which one client address may hold
//! [`HttpOptions::connection_quota`]. A refusal is `503` with `Retry-After` and a -32000 error
//! whose `data.quota` names the limit (`max-sessions`, `max-sessions-per-principal`,
//! `max-connections`, `max-connections-per-address`).
//!
//! # Identity and TLS
//!
//! Every request is authenticated before anything else reads it (see [`crate::auth`] for the
//! order and the rules): a bearer token from a [`TokenList`](crate::auth::TokenList), a JWT a
//! [`JwtVerifier`](crate::auth::JwtVerifier) accepts, or the connection's client
//! certificate. The session's [`Identity`](crate::Identity) is what its first request
//! authenticated as; hooks read it from [`Context::identity`](crate::Context::identity), and
//! observers too. A later request must authenticate as the same principal: an expired or
//! revoked credential gets `401`, another principal `404`.
//!
//! With [`HttpOptions::tls`] the front speaks HTTPS (rustls, `ring`), and with
//! [`TlsOptions::client_certificates`] it asks for client certificates issued by a CA (mTLS):
//! required (a client without one cannot connect) or optional (beside bearer credentials).
//! The handshake has the header timeout (30 s) to finish.
//!
//! # Lifecycle
//!
//! Sessions idle for [`HttpOptions::idle_timeout`] (no request, no stream attached) are ended:
//! their upstream stops, and a later request with their id gets `404`. Shutdown
//! ([`HttpServer::shutdown`]) stops accepting, refuses new work with `503`, gives requests in
//! flight [`HttpOptions::shutdown_grace`], then ends every session (a request still open is
//! answered with a -32000 error saying the proxy is shutting down), closes every stream and
//! connection and stops every upstream.

mod authn;
mod body;
mod event_store;
mod front;
mod guard;
mod handler;
mod health;
mod options;
mod quota;
mod reject;
mod resource;
mod server;
mod sessions;
mod shared_streams;
mod streams;
mod tls;

use std::sync::Arc;

pub use guard::{Guard, GuardRefusal};
pub use handler::SUPPORTED_VERSIONS;
pub use health::{NotReady, Readiness};
pub use options::HttpOptions;
pub use reject::{HEADER_MISMATCH, SERVER_ERROR, UNAUTHORIZED};
pub use resource::ProtectedResource;
pub use server::HttpServer;
pub use sessions::{SessionSummary, Sessions};
pub use tls::{ClientCertificates, TlsError, TlsOptions};

pub(crate) use sessions::SessionFactory;

/// Starts the front on `listener` with sessions made by `factory`.
pub(crate) fn start(
    listener: tokio::net::TcpListener,
    factory: SessionFactory,
    options: HttpOptions,
) -> std::io::Result<HttpServer> {
    let scheme = if options.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let base = format!("{scheme}://{}", listener.local_addr()?);
    let published = options
        .protected_resource
        .as_ref()
        .map(|config| resource::Published::new(config, &base, &options.path));
    let front = Arc::new(front::Front {
        guard: guard::Guard::new(&options),
        authn: authn::Authenticator::new(&options, published.clone()),
        resource: published,
        tls: options.tls.as_ref().map(tls::TlsOptions::acceptor),
        health: health::Health::new(&options),
    });
    let table = Arc::new(sessions::SessionTable::new(factory, options));
    table.listen_to_store();
    server::start(listener, table, front)
}
