//! [`HttpOptions`]: the settings of the streamable HTTP front.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use super::health::Readiness;
use super::resource::ProtectedResource;
use super::tls::TlsOptions;
use crate::auth::Auth;

/// Settings of the streamable HTTP front ([`Proxy::serve_http`](crate::Proxy::serve_http)).
///
/// The defaults are safe for a local proxy: bound to `127.0.0.1:8080`, only loopback `Host` and
/// `Origin` values accepted (DNS-rebinding protection), 64 MiB request bodies (as the stdio side's
/// message limit; no limit below 16 MiB), 256 sessions of which one principal (or,
/// without authentication, one client address) may hold 32, 1,024 connections of which one
/// client address may hold 64, sessions ended
/// after 10 idle minutes.
///
/// ```
/// use std::time::Duration;
/// use mcp_middleware::http::HttpOptions;
///
/// let options = HttpOptions::default()
///     .listen("127.0.0.1:0".parse().unwrap())
///     .allow_host("mcp.example.com")
///     .allow_origin("https://app.example.com")
///     .max_sessions(32)
///     .max_sessions_per_principal(4)
///     .max_connections(128)
///     .idle_timeout(Duration::from_secs(60));
/// assert_eq!(options.max_sessions, 32);
/// assert_eq!(options.session_quota(), 4);
/// // Unset, the quota is an eighth of the session limit.
/// assert_eq!(HttpOptions::default().session_quota(), 32);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpOptions {
    /// Where to listen. Default `127.0.0.1:8080`: loopback only. Listening on another address
    /// does not by itself admit requests addressed to it: list the names clients use in
    /// [`allowed_hosts`](Self::allowed_hosts).
    pub listen: SocketAddr,
    /// The endpoint's path. Default `/mcp`.
    pub path: String,
    /// `Host` values accepted besides the loopback names (`localhost`, `127.0.0.1`, `[::1]`,
    /// with any port). Each entry is a host name, optionally with a port (`mcp.example.com`,
    /// `mcp.example.com:8443`); `*` accepts any host (turning the DNS-rebinding check of `Host`
    /// off).
    pub allowed_hosts: Vec<String>,
    /// `Origin` values accepted besides loopback origins (`http://localhost:PORT` and the
    /// like). Each entry is an origin (`https://app.example.com`) or `*`. A request without
    /// `Origin` (any non-browser client) is not checked.
    pub allowed_origins: Vec<String>,
    /// The largest request body accepted, in bytes; a larger one gets `413`. Default 64 MiB.
    pub max_body_bytes: usize,
    /// How many sessions (stateful and stateless together) may be open at once; one more gets
    /// `503`. Each session runs its own upstream. Default 256.
    pub max_sessions: usize,
    /// How many of those sessions one principal may hold
    /// ([`Identity::principal`](crate::Identity::principal)); a client that authenticates as no one is counted by its
    /// address instead (IPv4, or the /64 prefix of IPv6, since one host commonly holds a whole
    /// /64). One more gets `503`. `None` (the default): an eighth of
    /// [`max_sessions`](Self::max_sessions), at least 1 (32 of 256), so at least eight
    /// principals always find room whatever one of them does. See
    /// [`session_quota`](Self::session_quota).
    pub max_sessions_per_principal: Option<usize>,
    /// How many TCP (or TLS) connections may be open at once; one more is answered `503` and
    /// closed. Each SSE stream holds a connection for as long as it is open. Default 1,024:
    /// every one of the default 256 sessions can keep its GET stream and a few request streams
    /// open, and each connection is a file descriptor (keep it under `ulimit -n`, which the
    /// sessions' upstreams draw on too).
    pub max_connections: usize,
    /// How many of those connections one client address may hold (IPv4, or the /64 prefix of
    /// IPv6, as the session quota counts anonymous clients); one more from that address is
    /// answered `503` and closed while other addresses are still served, so one client cannot
    /// take every connection. `None` (the default): a quarter of
    /// [`max_connections`](Self::max_connections) or 64, whichever is smaller, at least 1 (64
    /// of 1,024). See [`connection_quota`](Self::connection_quota).
    pub max_connections_per_address: Option<usize>,
    /// A session with no request and no open stream for this long is ended (and its upstream
    /// stopped). Default 10 minutes.
    pub idle_timeout: Duration,
    /// How many SSE events each session keeps for `Last-Event-ID` replay; the oldest are
    /// dropped first. Default 1,024.
    pub event_store_events: usize,
    /// How many bytes of SSE events each session keeps for replay. Default 1 MiB: enough to
    /// resume a stream broken in the middle of ordinary traffic, and small enough that hundreds
    /// of sessions stay within tens of megabytes. (A resumption from an event no longer kept
    /// replays what is left, and the log says so.) A response longer than this is kept as an
    /// error for its request, so a client that lost it is told so when it resumes; an answer
    /// cut through is copied for the store only while it is no longer than this.
    pub event_store_bytes: usize,
    /// How often an idle SSE stream gets a comment line, so intermediaries keep it open and a
    /// vanished client is noticed. Default 15 s.
    pub keep_alive: Duration,
    /// The reconnection delay (`retry:`) announced on every resumable SSE stream, in ms.
    /// Default 1,000.
    pub sse_retry_ms: u64,
    /// How long a request's response waits for its first message before its head goes out.
    /// A stateless (2026-07-28) request's lone response that comes within it goes out as one
    /// JSON body with an HTTP status that matches it (`404` for an unknown method, ...); a
    /// session's request stream then starts with its priming event and that message in one
    /// write. After it the response starts as an SSE stream and messages follow as they come.
    /// Default 1 s.
    pub json_window: Duration,
    /// On shutdown, how long requests in flight may take to finish before their sessions are
    /// ended anyway. Default 5 s.
    pub shutdown_grace: Duration,
    /// The credentials clients authenticate with (see [`crate::auth`]). Default: none, every
    /// client is anonymous (unless [`tls`](Self::tls) asks for client certificates).
    pub auth: Auth,
    /// Serve HTTPS with these settings (and identify clients by their certificates, when they
    /// ask for them). Default: plain HTTP.
    pub tls: Option<TlsOptions>,
    /// Publish the front as an OAuth protected resource (RFC 9728 metadata, `resource_metadata`
    /// in every `401`, required scopes). Default: not published.
    pub protected_resource: Option<ProtectedResource>,
    /// Keep sessions in this shared store, so that any replica of the project serves any
    /// session (see [`crate::shared_store`]). Default: none, sessions live in this process.
    pub shared_store: Option<crate::shared_store::SharedStore>,
    /// With a shared store: how long this replica keeps its copy of a session (and the
    /// session's upstream) without a request before it ends the copy; the session itself lives
    /// on in the store for [`idle_timeout`](Self::idle_timeout) and any replica restores it on
    /// its next request. Default: `None`, the idle timeout.
    pub replica_idle_timeout: Option<Duration>,
    /// What `/readyz` checks besides the shared store (see [`Readiness`]). Default: nothing,
    /// ready while serving. `/healthz` and `/readyz` are served on every front, before the
    /// `Host` check and without authentication (they reveal only status).
    pub readiness: Option<Readiness>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 8080)),
            path: "/mcp".to_owned(),
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            max_body_bytes: 64 * 1024 * 1024,
            max_sessions: 256,
            max_sessions_per_principal: None,
            max_connections: 1024,
            max_connections_per_address: None,
            idle_timeout: Duration::from_secs(600),
            event_store_events: 1024,
            event_store_bytes: 1024 * 1024,
            keep_alive: Duration::from_secs(15),
            sse_retry_ms: 1000,
            json_window: Duration::from_secs(1),
            shutdown_grace: Duration::from_secs(5),
            auth: Auth::default(),
            tls: None,
            protected_resource: None,
            shared_store: None,
            replica_idle_timeout: None,
            readiness: None,
        }
    }
}

impl HttpOptions {
    /// Sets the address to listen on (port `0`: any free port; see
    /// [`HttpServer::local_addr`](crate::http::HttpServer::local_addr)).
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }

    /// Sets the endpoint's path (default `/mcp`).
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path = path.into();
        self
    }

    /// Accepts one more `Host` value (see [`allowed_hosts`](Self::allowed_hosts)).
    pub fn allow_host(mut self, host: impl Into<String>) -> Self {
        self.allowed_hosts.push(host.into());
        self
    }

    /// Accepts one more `Origin` value (see [`allowed_origins`](Self::allowed_origins)).
    pub fn allow_origin(mut self, origin: impl Into<String>) -> Self {
        self.allowed_origins.push(origin.into());
        self
    }

    /// Sets the request body limit in bytes.
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// Sets how many sessions may be open at once.
    pub fn max_sessions(mut self, sessions: usize) -> Self {
        self.max_sessions = sessions;
        self
    }

    /// Sets how many sessions one principal (or one anonymous client address) may hold.
    pub fn max_sessions_per_principal(mut self, sessions: usize) -> Self {
        self.max_sessions_per_principal = Some(sessions);
        self
    }

    /// The per-principal session quota in force:
    /// [`max_sessions_per_principal`](Self::max_sessions_per_principal), or an eighth of [`max_sessions`](Self::max_sessions)
    /// (at least 1) when that is unset.
    pub fn session_quota(&self) -> usize {
        self.max_sessions_per_principal
            .unwrap_or((self.max_sessions / 8).max(1))
    }

    /// Sets how many connections may be open at once.
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections;
        self
    }

    /// Sets how many connections one client address may hold.
    pub fn max_connections_per_address(mut self, connections: usize) -> Self {
        self.max_connections_per_address = Some(connections);
        self
    }

    /// The per-address connection quota in force:
    /// [`max_connections_per_address`](Self::max_connections_per_address), or a quarter of
    /// [`max_connections`](Self::max_connections) capped at 64 (at least 1) when that is unset.
    pub fn connection_quota(&self) -> usize {
        self.max_connections_per_address
            .unwrap_or((self.max_connections / 4).clamp(1, 64))
    }

    /// Sets how long an idle session lives.
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// Sets how many events (and bytes) each session keeps for replay.
    pub fn event_store(mut self, events: usize, bytes: usize) -> Self {
        self.event_store_events = events;
        self.event_store_bytes = bytes;
        self
    }

    /// Sets the SSE keep-alive interval.
    pub fn keep_alive(mut self, interval: Duration) -> Self {
        self.keep_alive = interval;
        self
    }

    /// Sets how long shutdown waits for requests in flight.
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// Sets the credentials clients authenticate with.
    pub fn auth(mut self, auth: Auth) -> Self {
        self.auth = auth;
        self
    }

    /// Publishes the front as an OAuth protected resource.
    pub fn protected_resource(mut self, resource: ProtectedResource) -> Self {
        self.protected_resource = Some(resource);
        self
    }

    /// Keeps sessions in `store`, shared with the project's other replicas.
    pub fn shared_store(mut self, store: crate::shared_store::SharedStore) -> Self {
        self.shared_store = Some(store);
        self
    }

    /// Makes `/readyz` also run `check` (see [`readiness`](Self::readiness)).
    pub fn readiness(mut self, check: Readiness) -> Self {
        self.readiness = Some(check);
        self
    }

    /// Serves HTTPS with `tls`.
    pub fn tls(mut self, tls: TlsOptions) -> Self {
        self.tls = Some(tls);
        self
    }
}
