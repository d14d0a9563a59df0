//! A small raw HTTP/1.1 client for the streamable HTTP front: keep-alive connections, bodies
//! read as they arrive (Content-Length or chunked), SSE events taken one at a time. Raw, so a
//! test can also send what no SDK would, stop reading, or drop a connection mid-stream.
//! Shared by `mcp-middleware/tests/robustness_http.rs` and `mcpctl/tests/load_http.rs`.

#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// How long one read may take before a test fails.
pub const WAIT: Duration = Duration::from_secs(20);

/// `Accept` and `Content-Type` as a streamable HTTP client sends them.
pub const MCP_HEADERS: [(&str, &str); 2] = [
    ("accept", "application/json, text/event-stream"),
    ("content-type", "application/json"),
];

/// One keep-alive connection.
pub struct Conn {
    addr: SocketAddr,
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
}

/// A response whose head has been read; its body is read as needed.
pub struct Reply<'c> {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    conn: &'c mut Conn,
    chunked: bool,
    /// Body bytes left (Content-Length), or left in the current chunk (chunked).
    left: usize,
    /// Decoded body text not yet taken.
    pending: String,
    done: bool,
}

impl Conn {
    pub async fn connect(addr: SocketAddr) -> Self {
        let stream = tokio::time::timeout(WAIT, TcpStream::connect(addr))
            .await
            .expect("connect in time")
            .expect("connect");
        Self::over(addr, stream)
    }

    /// Connects from the local address `source` (any of 127.0.0.0/8 on loopback), so one
    /// machine can be several clients.
    pub async fn connect_from(addr: SocketAddr, source: std::net::IpAddr) -> Self {
        let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
        socket
            .bind(SocketAddr::new(source, 0))
            .expect("bind the source address");
        let stream = tokio::time::timeout(WAIT, socket.connect(addr))
            .await
            .expect("connect in time")
            .expect("connect");
        Self::over(addr, stream)
    }

    fn over(addr: SocketAddr, stream: TcpStream) -> Self {
        stream.set_nodelay(true).expect("nodelay");
        let (read, writer) = stream.into_split();
        Self {
            addr,
            reader: BufReader::new(read),
            writer,
        }
    }

    /// Sends a request to `/mcp` (a `host` header is added) and reads the response's head.
    pub async fn send(
        &mut self,
        method: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> std::io::Result<Reply<'_>> {
        self.send_to(method, "/mcp", headers, body).await
    }

    /// [`Conn::send`] to another path.
    #[allow(dead_code)] // not every test binary that includes this file uses it
    pub async fn send_to(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> std::io::Result<Reply<'_>> {
        let mut head = format!("{method} {path} HTTP/1.1\r\nhost: {}\r\n", self.addr);
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body);
        self.writer.write_all(&bytes).await?;
        self.head().await
    }

    /// POSTs a JSON-RPC message with the streamable HTTP headers, and `session` if given.
    pub async fn post(&mut self, session: Option<&str>, body: &str) -> std::io::Result<Reply<'_>> {
        let mut headers = MCP_HEADERS.to_vec();
        if let Some(session) = session {
            headers.push(("mcp-session-id", session));
        }
        self.send("POST", &headers, body.as_bytes()).await
    }

    /// Writes raw bytes (a request head and body the test builds itself).
    pub async fn write_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.writer.write_all(bytes).await
    }

    /// Reads a response head.
    pub async fn head(&mut self) -> std::io::Result<Reply<'_>> {
        let mut status_line = String::new();
        let read = tokio::time::timeout(WAIT, self.reader.read_line(&mut status_line))
            .await
            .map_err(|_| std::io::Error::other("no response in time"))??;
        if read == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let status = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("bad status line {status_line:?}")))?;
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).await?;
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
            }
        }
        let find = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        let chunked = find("transfer-encoding").is_some_and(|v| v.contains("chunked"));
        let length = find("content-length").and_then(|v| v.parse().ok());
        Ok(Reply {
            status,
            headers,
            chunked,
            left: length.unwrap_or(0),
            done: !chunked && length.unwrap_or(0) == 0,
            pending: String::new(),
            conn: self,
        })
    }
}

impl Reply<'_> {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Reads more of the body; false at its end.
    async fn fill(&mut self) -> bool {
        if self.done {
            return false;
        }
        let reader = &mut self.conn.reader;
        if self.chunked && self.left == 0 {
            let mut size_line = String::new();
            if reader.read_line(&mut size_line).await.unwrap_or(0) == 0 {
                self.done = true;
                return false;
            }
            let size = usize::from_str_radix(size_line.trim(), 16).unwrap_or(0);
            if size == 0 {
                let mut end = String::new();
                let _ = reader.read_line(&mut end).await;
                self.done = true;
                return false;
            }
            self.left = size;
        }
        let mut buf = vec![0u8; self.left.min(64 * 1024)];
        if reader.read_exact(&mut buf).await.is_err() {
            self.done = true;
            return false;
        }
        self.left -= buf.len();
        if self.chunked && self.left == 0 {
            let mut crlf = [0u8; 2];
            let _ = reader.read_exact(&mut crlf).await;
        }
        if !self.chunked && self.left == 0 {
            self.done = true;
        }
        self.pending.push_str(&String::from_utf8_lossy(&buf));
        true
    }

    /// Reads (at most `WAIT` for each read) until `enough` holds for the body text read and
    /// not yet taken, which it returns: a test sees an event before its end.
    pub async fn read_until(&mut self, what: &str, enough: impl Fn(&str) -> bool) -> &str {
        while !enough(&self.pending) {
            let more = tokio::time::timeout(WAIT, self.fill())
                .await
                .unwrap_or_else(|_| {
                    panic!(
                        "{what}: nothing more within {WAIT:?} ({} bytes held)",
                        self.pending.len()
                    )
                });
            assert!(
                more,
                "{what}: the body ended ({} bytes held)",
                self.pending.len()
            );
        }
        &self.pending
    }

    /// The whole (rest of the) body.
    pub async fn body(mut self) -> String {
        while tokio::time::timeout(WAIT, self.fill())
            .await
            .expect("the body in time")
        {}
        std::mem::take(&mut self.pending)
    }

    pub async fn json(self) -> Value {
        let body = self.body().await;
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
    }

    /// The next SSE event's data (priming events and comments skipped); `None` at the end.
    pub async fn event(&mut self) -> Option<String> {
        loop {
            if let Some(end) = self.pending.find("\n\n") {
                let block: String = self.pending.drain(..end + 2).collect();
                let data: Vec<&str> = block
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(|d| d.strip_prefix(' ').unwrap_or(d))
                    .collect();
                if data.iter().all(|d| d.is_empty()) {
                    continue;
                }
                return Some(data.join("\n"));
            }
            if !tokio::time::timeout(WAIT, self.fill())
                .await
                .expect("an SSE event in time")
            {
                return None;
            }
        }
    }

    /// The next JSON-RPC message on the stream.
    pub async fn message(&mut self) -> Option<Value> {
        let data = self.event().await?;
        Some(serde_json::from_str(&data).unwrap_or_else(|e| panic!("{e}: {data}")))
    }

    /// Every message until the stream ends.
    pub async fn messages(mut self) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(message) = self.message().await {
            out.push(message);
        }
        out
    }
}

/// A JSON-RPC request line.
pub fn request(id: impl Into<Value>, method: &str, params: Value) -> String {
    serde_json::json!({"jsonrpc": "2.0", "id": id.into(), "method": method, "params": params})
        .to_string()
}

/// The 2025-11-25 `initialize` request.
pub fn initialize_request(client: &str) -> String {
    request(
        0,
        "initialize",
        serde_json::json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": client, "version": "1"}}),
    )
}

/// Starts a session on `conn`: initialize, then notifications/initialized. Returns its id.
pub async fn start_session(conn: &mut Conn, client: &str) -> String {
    let mut reply = conn
        .post(None, &initialize_request(client))
        .await
        .expect("initialize");
    assert_eq!(reply.status, 200);
    let session = reply
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned();
    let answer = reply.message().await.expect("the initialize answer");
    assert!(answer.get("result").is_some(), "{answer}");
    assert!(reply.message().await.is_none(), "the stream ends");
    let notified = conn
        .post(
            Some(&session),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        )
        .await
        .expect("initialized");
    assert_eq!(notified.status, 202);
    drop(notified.body().await);
    session
}

/// Sends a request in `session` and returns every message of its stream, the answer last.
pub async fn call(
    conn: &mut Conn,
    session: &str,
    id: u64,
    method: &str,
    params: Value,
) -> Vec<Value> {
    let reply = conn
        .post(Some(session), &request(id, method, params))
        .await
        .expect("POST");
    assert_eq!(reply.status, 200, "{method}");
    reply.messages().await
}

/// The SSE event being received in `held` (what a stream has delivered so far): what follows
/// the last complete event (`\n\n`), when at least `n` bytes of it are here.
pub fn open_event(held: &str, n: usize) -> Option<&str> {
    let start = held.rfind("\n\n").map_or(0, |at| at + 2);
    let open = &held[start..];
    (open.len() >= n).then_some(open)
}
