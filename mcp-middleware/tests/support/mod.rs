//! A JSON-RPC client for driving a [`Proxy`] served on in-memory pipes, in front of the scripted
//! upstream (`tests/fixtures/scripted_upstream.py`, a real child process over stdio).

#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;
use std::time::Duration;

use mcp_middleware::upstream::StdioServer;
use mcp_middleware::{Proxy, ProxyError};
use serde_json::{Value, json};
use tokio::io::{
    AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf,
};
use tokio::task::JoinHandle;

/// The scripted upstream, as a stdio server.
pub fn scripted_upstream() -> StdioServer {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/scripted_upstream.py");
    StdioServer::new("python3").arg(script)
}

/// One client connection to a proxy.
pub struct Client {
    writer: WriteHalf<DuplexStream>,
    lines: Lines<BufReader<ReadHalf<DuplexStream>>>,
    next_id: u64,
    /// Notifications and requests received while waiting for answers.
    pub received: Vec<Value>,
    pub served: JoinHandle<Result<(), ProxyError>>,
}

impl Client {
    /// Serves `proxy` on fresh pipes and connects to it (no handshake yet).
    pub fn connect(proxy: Proxy) -> Self {
        let (client_side, proxy_side) = tokio::io::duplex(1 << 20);
        let (proxy_read, proxy_write) = tokio::io::split(proxy_side);
        let served = tokio::spawn(proxy.serve(proxy_read, proxy_write));
        let (read, writer) = tokio::io::split(client_side);
        Self {
            writer,
            lines: BufReader::new(read).lines(),
            next_id: 0,
            received: Vec::new(),
            served,
        }
    }

    /// Connects and performs the 2025-11-25 handshake.
    pub async fn initialized(proxy: Proxy) -> Self {
        let mut client = Self::connect(proxy);
        let answer = client
            .request(
                "initialize",
                json!({
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"sampling": {}},
                    "clientInfo": {"name": "framework-test", "version": "1.0.0"},
                }),
            )
            .await;
        assert!(
            answer.get("result").is_some(),
            "initialize failed: {answer}"
        );
        client.notify("notifications/initialized", None).await;
        client
    }

    pub async fn send(&mut self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.writer.write_all(line.as_bytes()).await.expect("write");
    }

    /// Sends one line as it is (a newline is added).
    pub async fn send_raw(&mut self, line: &str) {
        self.writer
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("write");
    }

    /// The next line from the proxy, as it came (10 s at most).
    pub async fn next_line(&mut self) -> String {
        tokio::time::timeout(Duration::from_secs(10), self.lines.next_line())
            .await
            .expect("the proxy answered within 10 s")
            .expect("read")
            .expect("the proxy closed the connection")
    }

    pub async fn notify(&mut self, method: &str, params: Option<Value>) {
        let mut message = json!({"jsonrpc": "2.0", "method": method});
        if let Some(params) = params {
            message["params"] = params;
        }
        self.send(&message).await;
    }

    /// Sends a request and returns its id.
    pub async fn start(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// Sends a request and waits for its answer (the whole response message).
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.start(method, params).await;
        self.answer(id).await
    }

    /// Waits for the answer to request `id`, keeping whatever else arrives.
    pub async fn answer(&mut self, id: u64) -> Value {
        loop {
            let message = self.next_message().await;
            if message.get("method").is_none() && message["id"] == json!(id) {
                return message;
            }
            self.received.push(message);
        }
    }

    /// The next message from the proxy (10 s at most).
    pub async fn next_message(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(10), self.lines.next_line())
            .await
            .expect("the proxy answered within 10 s")
            .expect("read")
            .expect("the proxy closed the connection");
        serde_json::from_str(&line).expect("the proxy wrote JSON")
    }

    /// Calls a tool; returns the response message.
    pub async fn call_tool(&mut self, name: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
            .await
    }

    /// The texts of a tool result's text parts.
    pub fn texts(answer: &Value) -> Vec<String> {
        answer["result"]["content"]
            .as_array()
            .map(|parts| {
                parts
                    .iter()
                    .filter_map(|p| p["text"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Closes the client side and waits for the proxy to finish.
    pub async fn close(self) -> Result<(), ProxyError> {
        drop(self.writer);
        drop(self.lines);
        self.served.await.expect("the proxy task did not panic")
    }
}

/// A FIFO the scripted upstream holds open for writing while it lives (`SCRIPTED_LIFELINE`), so
/// a test can wait for upstreams to exit without polling or sleeping.
pub struct Lifeline {
    dir: PathBuf,
    /// The FIFO, for the upstream's environment.
    pub path: PathBuf,
}

impl Lifeline {
    /// A new FIFO in a scratch directory of its own.
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("lifeline-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        let path = dir.join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .expect("mkfifo runs");
        assert!(made.success(), "mkfifo {}", path.display());
        Self { dir, path }
    }

    /// Starts watching; call it before the upstream starts. The receiver resolves once every
    /// upstream that opened the FIFO meanwhile has exited.
    pub fn watch(&self) -> tokio::sync::oneshot::Receiver<()> {
        let (exited, on_exit) = tokio::sync::oneshot::channel();
        let path = self.path.clone();
        std::thread::spawn(move || {
            use std::io::Read as _;
            if let Ok(mut fifo) = std::fs::File::open(&path) {
                let _ = fifo.read_to_end(&mut Vec::new());
                let _ = exited.send(());
            }
        });
        on_exit
    }
}

impl Drop for Lifeline {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
