//! The admin API's own MCP session: an in-process client of the same proxy the listener
//! fronts (same model, routes and servers), over a pipe instead of a socket, started on first
//! use and again after it ends. `GET /api/tools` lists through it and
//! `POST /api/tools/{name}/call` calls through it, so what the admin sees is what a client
//! sees: the merged catalog after routes (hidden entries absent, hidden calls refused). It runs
//! as the local user, the identity a stdio client has.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use mcp_middleware::Proxy;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{Mutex, mpsc, oneshot};

/// How long the admin session waits for an answer.
const ANSWER_WITHIN: Duration = Duration::from_secs(120);

/// Builds the proxy the admin session runs (called again to restart it).
pub(crate) type ProxyFactory = Arc<dyn Fn() -> anyhow::Result<Proxy> + Send + Sync>;

/// Why the admin session could not answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ViewError {
    /// The proxy could not be built or started.
    #[error("the admin session could not start: {0}")]
    Start(String),
    /// The session ended or did not answer in time.
    #[error("the admin session {0}")]
    Gone(&'static str),
    /// The proxy answered with a JSON-RPC error.
    #[error("{message}")]
    Rpc {
        /// The JSON-RPC error code.
        code: i64,
        /// Its message.
        message: String,
    },
}

type Pending = Arc<std::sync::Mutex<HashMap<u64, oneshot::Sender<Result<Value, ViewError>>>>>;

struct Live {
    to_proxy: mpsc::Sender<String>,
    pending: Pending,
    closed: tokio_util::sync::CancellationToken,
}

/// The admin session, (re)started on demand.
pub(crate) struct View {
    factory: ProxyFactory,
    live: Mutex<Option<Arc<Live>>>,
    next_id: AtomicU64,
}

impl View {
    pub(crate) fn new(factory: ProxyFactory) -> Self {
        Self {
            factory,
            live: Mutex::new(None),
            next_id: AtomicU64::new(1),
        }
    }

    /// Sends `method` with `params` and waits for the result.
    pub(crate) async fn request(&self, method: &str, params: Value) -> Result<Value, ViewError> {
        let live = self.live().await?;
        self.send(&live, method, params).await
    }

    async fn send(&self, live: &Live, method: &str, params: Value) -> Result<Value, ViewError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        if let Ok(mut pending) = live.pending.lock() {
            pending.insert(id, tx);
        }
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if live.to_proxy.send(line.to_string()).await.is_err() {
            return Err(ViewError::Gone("ended"));
        }
        match tokio::time::timeout(ANSWER_WITHIN, rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(ViewError::Gone("ended before it answered")),
            Err(_) => Err(ViewError::Gone("did not answer in time")),
        }
    }

    /// The running session, started (and initialized) if there is none.
    async fn live(&self) -> Result<Arc<Live>, ViewError> {
        let mut slot = self.live.lock().await;
        if let Some(live) = slot.as_ref().filter(|l| !l.closed.is_cancelled()) {
            return Ok(live.clone());
        }
        let proxy = (self.factory)().map_err(|err| ViewError::Start(format!("{err:#}")))?;
        let live = Arc::new(start(proxy));
        let init = json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "mcpctl-admin", "version": env!("CARGO_PKG_VERSION")},
        });
        self.send(&live, "initialize", init).await?;
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let _ = live.to_proxy.send(initialized.to_string()).await;
        *slot = Some(live.clone());
        Ok(live)
    }

    /// Every tool, following `nextCursor`.
    pub(crate) async fn tools(&self) -> Result<Vec<Value>, ViewError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        // Bounded: a server that keeps handing out cursors cannot keep the admin API busy.
        for _ in 0..100 {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let page = self.request("tools/list", params).await?;
            if let Some(list) = page.get("tools").and_then(Value::as_array) {
                tools.extend(list.iter().cloned());
            }
            cursor = page
                .get("nextCursor")
                .and_then(Value::as_str)
                .map(str::to_owned);
            if cursor.is_none() {
                break;
            }
        }
        Ok(tools)
    }

    /// Stops the session, if one runs.
    pub(crate) async fn stop(&self) {
        if let Some(live) = self.live.lock().await.take() {
            drop(live);
        }
    }
}

/// Runs `proxy` on a pipe, with a reader task that hands answers to their waiters.
fn start(proxy: Proxy) -> Live {
    let (client_end, proxy_end) = tokio::io::duplex(1 << 20);
    let (proxy_read, proxy_write) = tokio::io::split(proxy_end);
    let (client_read, mut client_write) = tokio::io::split(client_end);
    let closed = tokio_util::sync::CancellationToken::new();
    let pending: Pending = Arc::default();
    let (to_proxy, mut outgoing) = mpsc::channel::<String>(64);
    let done = closed.clone();
    tokio::spawn(async move {
        if let Err(err) = proxy.serve(proxy_read, proxy_write).await {
            tracing::warn!(%err, "the admin session ended");
        }
        done.cancel();
    });
    let replies = to_proxy.clone();
    let waiting = pending.clone();
    let done = closed.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(client_read).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            let id = message.get("id").cloned();
            if message.get("method").is_some() {
                // A request from upstream (ping, sampling, roots): the admin has none to give.
                if let Some(id) = id {
                    let answer = if message["method"] == "ping" {
                        json!({"jsonrpc": "2.0", "id": id, "result": {}})
                    } else {
                        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "the admin session does not serve this request"}})
                    };
                    let _ = replies.send(answer.to_string()).await;
                }
                continue;
            }
            let Some(id) = id.as_ref().and_then(Value::as_u64) else {
                continue;
            };
            let Some(waiter) = waiting.lock().ok().and_then(|mut p| p.remove(&id)) else {
                continue;
            };
            let answer = match (message.get("result"), message.get("error")) {
                (Some(result), _) => Ok(result.clone()),
                (None, Some(error)) => Err(ViewError::Rpc {
                    code: error.get("code").and_then(Value::as_i64).unwrap_or(-32603),
                    message: error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("error")
                        .to_owned(),
                }),
                _ => Err(ViewError::Gone("sent an answer without result or error")),
            };
            let _ = waiter.send(answer);
        }
        done.cancel();
        if let Ok(mut pending) = waiting.lock() {
            pending.clear();
        }
    });
    let done = closed.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                line = outgoing.recv() => {
                    let Some(line) = line else { break };
                    let written = async {
                        client_write.write_all(line.as_bytes()).await?;
                        client_write.write_all(b"\n").await?;
                        client_write.flush().await
                    };
                    if written.await.is_err() {
                        break;
                    }
                }
                _ = done.cancelled() => break,
            }
        }
        // Closing the pipe ends the proxy's session (and stops its upstream).
        let _ = client_write.shutdown().await;
    });
    Live {
        to_proxy,
        pending,
        closed,
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.closed.cancel();
    }
}
