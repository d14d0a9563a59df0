//! The listener: accepting connections, serving HTTP/1.1 on each, the connection limit, the
//! idle-session reaper, and graceful shutdown.
//!
//! The connection limit ([`HttpOptions::max_connections`](super::HttpOptions::max_connections))
//! refuses rather than holds: a connection past it is still accepted (after its TLS handshake,
//! on HTTPS), its one request is answered `503` with `Retry-After` and a JSON-RPC error naming
//! the limit, and it is closed. Holding it in the backlog instead would leave a client waiting
//! with no word of why, behind whoever holds the open connections. Refusals are bounded too
//! ([`REFUSING`] at a time, each within [`REFUSAL_TIMEOUT`]); past that a connection is closed at
//! once.
//!
//! Each client address may hold at most
//! [`HttpOptions::connection_quota`](super::HttpOptions::connection_quota) of those connections
//! (counted as the session quota counts anonymous clients: IPv4, or the /64 of IPv6), so one
//! client holding connections open cannot leave a valid caller from elsewhere with nothing but
//! `503`s. A connection past it is refused the same way, naming
//! `--max-connections-per-address`, before it takes a place under the global limit. The count
//! is a small map of addresses to numbers, touched once when a connection opens and once when
//! it closes.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use super::front::Front;
use super::handler;
use super::quota;
use super::sessions::SessionTable;
use super::tls::PeerCertificate;

/// How long a client may take to send a request's headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// How many connections past the limit may be in the middle of being refused at once.
const REFUSING: usize = 64;

/// How long refusing one connection may take (TLS handshake, reading the request, answering).
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(5);

/// A running streamable HTTP front, from [`Proxy::serve_http`](crate::Proxy::serve_http).
///
/// Dropping it does not stop the server; [`shutdown`](Self::shutdown) does, gracefully.
///
/// ```no_run
/// use mcp_middleware::{Proxy, http::HttpOptions, upstream::StdioServer};
///
/// # async fn run() -> Result<(), mcp_middleware::ProxyError> {
/// let options = HttpOptions::default().listen("127.0.0.1:0".parse().unwrap());
/// let server = Proxy::new(StdioServer::new("my-server")).serve_http(options).await?;
/// println!("MCP endpoint: {}", server.url());
/// server.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct HttpServer {
    local_addr: SocketAddr,
    url: String,
    stop: CancellationToken,
    task: JoinHandle<()>,
    sessions: super::sessions::Sessions,
}

impl HttpServer {
    /// The address the server listens on (with the real port when `0` was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The MCP endpoint's URL, e.g. `http://127.0.0.1:8080/mcp` (`https://` with TLS).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Stops gracefully: no new connections or sessions; requests in flight get
    /// [`HttpOptions::shutdown_grace`](super::HttpOptions::shutdown_grace) to finish; then
    /// every session ends (open requests are answered with an error, streams close, upstreams
    /// stop) and connections close. Returns when all of that is done.
    pub async fn shutdown(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }

    /// The open sessions, for an operator (list, end one).
    pub fn sessions(&self) -> super::sessions::Sessions {
        self.sessions.clone()
    }

    /// Serves until `signal` resolves, then [shuts down](Self::shutdown).
    pub async fn shutdown_on(self, signal: impl Future<Output = ()>) {
        tokio::select! {
            _ = signal => {}
            _ = self.stop.cancelled() => {}
        }
        self.shutdown().await;
    }
}

/// Starts serving `listener` in a task of its own.
pub(crate) fn start(
    listener: TcpListener,
    table: Arc<SessionTable>,
    front: Arc<Front>,
) -> std::io::Result<HttpServer> {
    let local_addr = listener.local_addr()?;
    let scheme = if front.tls.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://{local_addr}{}", table.options().path);
    let stop = CancellationToken::new();
    let task = tokio::spawn(serve(listener, table.clone(), front, stop.clone()));
    Ok(HttpServer {
        local_addr,
        url,
        stop,
        task,
        sessions: super::sessions::Sessions(table),
    })
}

async fn serve(
    listener: TcpListener,
    table: Arc<SessionTable>,
    front: Arc<Front>,
    stop: CancellationToken,
) {
    let closing = CancellationToken::new();
    let mut connections = JoinSet::new();
    let options = table.options();
    // A replica's copy of a shared session may idle out sooner than the session itself.
    let idle = match (&options.shared_store, options.replica_idle_timeout) {
        (Some(_), Some(replica)) => replica.min(options.idle_timeout),
        _ => options.idle_timeout,
    };
    let every = (idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(30));
    let mut reaper = tokio::time::interval(every);
    reaper.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let open = Arc::new(Semaphore::new(table.options().max_connections));
    let addresses = Arc::new(PerAddress::default());
    let refusing = Arc::new(Semaphore::new(REFUSING));
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => match admit(&open, &addresses, peer, options) {
                    Ok(held) => {
                        connections.spawn(connection(stream, peer, table.clone(), front.clone(), closing.clone(), held));
                    }
                    Err(reject) => match refusing.clone().try_acquire_owned() {
                        Ok(permit) => {
                            connections.spawn(refuse(stream, peer, reject, front.clone(), permit));
                        }
                        // Dropped: closed at once.
                        Err(_) => tracing::debug!(%peer, "connection limit reached; closing a connection unanswered"),
                    },
                },
                Err(err) => {
                    // Out of descriptors, say: wait a little instead of spinning.
                    tracing::warn!(%err, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = connections.join_next() => {}
            _ = reaper.tick() => table.expire_idle(),
        }
    }
    drop(listener);
    let grace = table.options().shutdown_grace;
    tracing::info!("HTTP front stopping: no new connections; finishing requests in flight");
    table.begin_shutdown("the proxy is shutting down");
    let deadline = Instant::now() + grace;
    while table.in_flight() > 0 && Instant::now() < deadline {
        tokio::select! {
            Some(_) = connections.join_next() => {}
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
    }
    table
        .end_all("the proxy is shutting down", grace + Duration::from_secs(5))
        .await;
    closing.cancel();
    let drained = tokio::time::timeout(grace, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!("closing connections that did not finish within the grace period");
        connections.abort_all();
    }
    tracing::info!("HTTP front stopped");
}

/// A connection's places under the connection limit and its address's quota, held for as
/// long as it is open.
struct Held {
    _permit: OwnedSemaphorePermit,
    _slot: AddressSlot,
}

/// Whether a connection from `peer` may be served: its address under its quota, then the
/// proxy under its limit; else the refusal naming the limit reached.
fn admit(
    open: &Arc<Semaphore>,
    addresses: &Arc<PerAddress>,
    peer: SocketAddr,
    options: &super::HttpOptions,
) -> Result<Held, super::reject::Reject> {
    let address = quota::network(peer.ip());
    let slot = addresses
        .take(address, options.connection_quota())
        .ok_or_else(|| quota::address_full(options, address))?;
    let permit = open
        .clone()
        .try_acquire_owned()
        .map_err(|_| quota::connections_full(options))?;
    Ok(Held {
        _permit: permit,
        _slot: slot,
    })
}

/// How many connections each client address holds.
#[derive(Debug, Default)]
struct PerAddress(Mutex<HashMap<IpAddr, usize>>);

/// One connection's place in its address's count, given back when dropped.
struct AddressSlot {
    counts: Arc<PerAddress>,
    address: IpAddr,
}

impl PerAddress {
    /// A place for one more connection from `address`, unless it holds `quota` already.
    fn take(self: &Arc<Self>, address: IpAddr, quota: usize) -> Option<AddressSlot> {
        let mut counts = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let count = counts.entry(address).or_insert(0);
        if *count >= quota {
            return None;
        }
        *count += 1;
        Some(AddressSlot {
            counts: self.clone(),
            address,
        })
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut counts = self.counts.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = counts.get_mut(&self.address) {
            *count -= 1;
            // Gone when zero, so the map holds only addresses with open connections.
            if *count == 0 {
                counts.remove(&self.address);
            }
        }
    }
}

async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    table: Arc<SessionTable>,
    front: Arc<Front>,
    closing: CancellationToken,
    // Held for as long as the connection is open.
    _held: Held,
) {
    let _ = stream.set_nodelay(true);
    let Some(acceptor) = front.tls.clone() else {
        return serve_connection(stream, peer, None, table, front, closing).await;
    };
    let handshake = tokio::select! {
        done = tokio::time::timeout(HEADER_TIMEOUT, acceptor.accept(stream)) => done,
        _ = closing.cancelled() => return,
    };
    let stream = match handshake {
        Ok(Ok(stream)) => stream,
        Ok(Err(err)) => {
            tracing::debug!(%peer, %err, "TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(%peer, "TLS handshake timed out");
            return;
        }
    };
    // The handshake verified the chain against the client CA; what is left is who it names.
    let certificate = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
        .and_then(|der| {
            let read = PeerCertificate::from_der(der.as_ref());
            if read.is_none() {
                tracing::warn!(%peer, "a verified client certificate's subject could not be read");
            }
            read
        })
        .map(Arc::new);
    if let Some(certificate) = &certificate {
        tracing::debug!(%peer, subject = certificate.identity.subject(), "TLS client certificate verified");
    }
    serve_connection(stream, peer, certificate, table, front, closing).await;
}

/// Answers the one request of a connection past a connection limit with `reject` (a `503`)
/// and closes it.
async fn refuse(
    stream: TcpStream,
    peer: SocketAddr,
    reject: super::reject::Reject,
    front: Arc<Front>,
    _permit: OwnedSemaphorePermit,
) {
    tracing::warn!(%peer, reason = %reject.message, "refusing a connection");
    let answer = async {
        match &front.tls {
            None => answer_once(stream, &reject).await,
            Some(acceptor) => {
                if let Ok(stream) = acceptor.accept(stream).await {
                    answer_once(stream, &reject).await;
                }
            }
        }
    };
    let _ = tokio::time::timeout(REFUSAL_TIMEOUT, answer).await;
}

/// Reads one request on `stream`, answers it with `reject`, and closes the connection.
async fn answer_once<S>(stream: S, reject: &super::reject::Reject)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(|_request| {
        let response = handler::rejected(reject);
        async move { Ok::<_, Infallible>(response) }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(REFUSAL_TIMEOUT)
        .keep_alive(false);
    let _ = builder
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// Serves HTTP/1.1 on one connection (plain or TLS) until it closes.
async fn serve_connection<S>(
    stream: S,
    peer: SocketAddr,
    certificate: Option<Arc<PeerCertificate>>,
    table: Arc<SessionTable>,
    front: Arc<Front>,
    closing: CancellationToken,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |request| {
        let table = table.clone();
        let front = front.clone();
        let certificate = certificate.clone();
        async move {
            Ok::<_, Infallible>(
                handler::handle(table, front, certificate.as_deref(), peer.ip(), request).await,
            )
        }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .keep_alive(true);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let mut shutting_down = false;
    loop {
        tokio::select! {
            served = conn.as_mut() => {
                if let Err(err) = served {
                    tracing::debug!(%peer, %err, "HTTP connection ended with an error");
                }
                return;
            }
            _ = closing.cancelled(), if !shutting_down => {
                shutting_down = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_holds_at_most_its_quota_and_gets_places_back_as_connections_close() {
        let counts = Arc::new(PerAddress::default());
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let first = counts.take(a, 2).expect("a place");
        let second = counts.take(a, 2).expect("a place");
        assert!(counts.take(a, 2).is_none(), "a holds its quota");
        assert!(counts.take(b, 2).is_some(), "b is counted apart");
        drop(first);
        let third = counts.take(a, 2).expect("a place given back");
        drop((second, third));
        assert!(
            counts.0.lock().unwrap().is_empty(),
            "addresses without connections are forgotten"
        );
    }

    #[test]
    fn the_default_quota_is_a_quarter_of_the_connections_at_most_64() {
        use super::super::HttpOptions;
        assert_eq!(HttpOptions::default().connection_quota(), 64);
        assert_eq!(
            HttpOptions::default()
                .max_connections(40)
                .connection_quota(),
            10
        );
        assert_eq!(
            HttpOptions::default().max_connections(2).connection_quota(),
            1
        );
        assert_eq!(
            HttpOptions::default()
                .max_connections_per_address(3)
                .connection_quota(),
            3
        );
    }
}
