//! Cut-through from an HTTP upstream: a large answer of a streamable HTTP server, as
//! a JSON body or as an SSE event (what the SDKs' servers send), reaches the client, over HTTP
//! (`mcpctl serve --url`) and over stdio (`mcpctl proxy --url`), while the server is still
//! sending it; one that breaks off or passes the limit half-way ends in an error for its
//! request, not a hang.
//!
//! The upstream is an HTTP/1.1 server in this test (a thread per connection) whose
//! `big_paused` sends the first half of a 4 MB answer's body and then waits for the test to
//! open its gate. Without cut-through the proxy holds the half body until its end, so the
//! client sees none of it and the test fails at its bound. Each wait is for an event, with a
//! bound; the proxies are killed when their guards drop.

#[path = "../../mcp-middleware/tests/support/http_client.rs"]
mod http_client;
#[path = "support/process.rs"]
mod process;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread;

use http_client::{Conn, WAIT, call, open_event, request, start_session};
use serde_json::{Value, json};

/// The size of the answer's text: 4 MB, sent in two halves.
const SIZE: usize = 4_000_000;

/// The test's HTTP MCP server; `gate` lets a paused answer go on (one send, one answer).
struct Upstream {
    url: String,
    gate: Sender<()>,
}

impl Upstream {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the upstream");
        let addr = listener.local_addr().expect("its address");
        let (gate, opened) = channel();
        let opened = Arc::new(Mutex::new(opened));
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { break };
                let opened = opened.clone();
                thread::spawn(move || {
                    let _ = serve(stream, &opened);
                });
            }
        });
        Self {
            url: format!("http://{addr}/mcp"),
            gate,
        }
    }

    fn open_gate(&self) {
        self.gate.send(()).expect("the upstream waits on its gate");
    }
}

/// Serves one keep-alive connection until it closes (or an answer is cut short).
fn serve(stream: TcpStream, opened: &Mutex<Receiver<()>>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    loop {
        let mut method = String::new();
        if reader.read_line(&mut method)? == 0 {
            return Ok(());
        }
        let mut length = 0;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line)?;
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        if !method.starts_with("POST") {
            out.write_all(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")?;
            continue;
        }
        let message: Value = serde_json::from_slice(&body).unwrap_or_default();
        let Some(id) = message.get("id").map(Value::to_string) else {
            out.write_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")?;
            continue;
        };
        let params = &message["params"];
        let answer = match message["method"].as_str().unwrap_or_default() {
            "initialize" => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":"2025-11-25","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"paused-http","version":"1"}}}}}}"#
            ),
            "custom/echo" => json!({"jsonrpc": "2.0", "id": message["id"], "result": {"echo": params}})
                .to_string(),
            "big_paused" => {
                let mode = params["mode"].as_str().unwrap_or_default();
                return big_paused(out, &id, mode, opened);
            }
            _ => json!({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "no such method"}})
                .to_string(),
        };
        write!(
            out,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
            answer.len()
        )?;
    }
}

/// A 4 MB answer, pretty-printed in places (line breaks between tokens) as servers do. Its
/// first half is sent, then (`whole`, `short`) the gate is waited for; `whole` sends the rest,
/// `short` closes the connection instead; `chunked` sends it all in 64 KiB chunks without a
/// declared length. `sse` and `sse_short` are `whole` and `short` as an SSE stream: a priming
/// event, then the answer as one event of several `data:` lines (one per line of the text)
/// with its `id:` after them, as rmcp's server writes it. The connection is not used again.
fn big_paused(
    mut out: TcpStream,
    id: &str,
    mode: &str,
    opened: &Mutex<Receiver<()>>,
) -> std::io::Result<()> {
    let body = format!(
        "{{\"jsonrpc\": \"2.0\",\r\n \"id\": {id},\n \"result\": {{\"text\": \"{}\"}},\n \"x-extra\": {{\"kept\": true}}}}\n",
        "x".repeat(SIZE)
    );
    let body = if mode.starts_with("sse") {
        let data: String = body.lines().map(|line| format!("data:{line}\n")).collect();
        format!("id: 0\nretry: 100\ndata:\n\n{data}id: 1\n\n")
    } else {
        body
    };
    let (first, rest) = body.as_bytes().split_at(body.len() / 2);
    if mode.starts_with("sse") {
        out.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
        )?;
        write!(out, "{:x}\r\n", first.len())?;
        out.write_all(first)?;
        out.write_all(b"\r\n")?;
        out.flush()?;
        wait_for_gate(opened)?;
        if mode == "sse_short" {
            return out.shutdown(std::net::Shutdown::Both);
        }
        write!(out, "{:x}\r\n", rest.len())?;
        out.write_all(rest)?;
        return out.write_all(b"\r\n0\r\n\r\n");
    }
    if mode == "chunked" {
        out.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n",
        )?;
        for chunk in body.as_bytes().chunks(64 * 1024) {
            write!(out, "{:x}\r\n", chunk.len())?;
            out.write_all(chunk)?;
            out.write_all(b"\r\n")?;
        }
        return out.write_all(b"0\r\n\r\n");
    }
    write!(
        out,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )?;
    out.write_all(first)?;
    out.flush()?;
    wait_for_gate(opened)?;
    if mode == "short" {
        return out.shutdown(std::net::Shutdown::Both);
    }
    out.write_all(rest)
}

/// Waits (with a bound) until the test opens the gate.
fn wait_for_gate(opened: &Mutex<Receiver<()>>) -> std::io::Result<()> {
    let gate = opened.lock().map_err(|_| std::io::Error::other("gate"))?;
    gate.recv_timeout(WAIT)
        .map_err(|_| std::io::Error::other("the gate was never opened"))
}

/// `mcpctl ARGS`, killed with its process group when dropped.
struct Mcpctl {
    child: Child,
}

impl Mcpctl {
    fn command(args: &[&str]) -> Command {
        use std::os::unix::process::CommandExt as _;
        let mut command = Command::new(env!("CARGO_BIN_EXE_mcpctl"));
        command
            .args(args)
            .env_remove("MCPCTL_LOG")
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        command
    }

    /// `mcpctl serve --url URL ARGS`, and the address it listens on.
    fn serve(url: &str, args: &[&str]) -> (Self, SocketAddr) {
        let mut command = Self::command(&["serve", "--listen", "127.0.0.1:0", "--url", url]);
        command.args(args);
        let mut child = command.spawn().expect("mcpctl serve starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let served = Self { child };
        let addr = process::listening_address(stderr)
            .recv_timeout(WAIT)
            .expect("mcpctl serve listens");
        (served, addr.parse().expect("a socket address"))
    }
}

impl Drop for Mcpctl {
    fn drop(&mut self) {
        process::kill_group(self.child.id());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_answer_reaches_the_http_client_while_the_http_upstream_is_still_sending_it() {
    large_answer_over_http(
        "whole",
        r#"{"jsonrpc": "2.0",   "id": "big-1",  "result": {"text": "xxx"#,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_sse_answer_reaches_the_http_client_while_the_http_upstream_is_still_sending_it() {
    // The data lines are joined with a space (a line feed in the spec; whitespace in JSON),
    // each without the one space after its `data:`.
    large_answer_over_http(
        "sse",
        r#"{"jsonrpc": "2.0", "id": "big-1", "result": {"text": "xxx"#,
    )
    .await;
}

/// A 4 MB answer sent in `mode`: its first megabyte reaches an HTTP client, starting with
/// `head`, before the upstream sends its second half; then all of it, unchanged.
async fn large_answer_over_http(mode: &str, head: &str) {
    let upstream = Upstream::start();
    let (_served, addr) = Mcpctl::serve(&upstream.url, &[]);
    let mut conn = Conn::connect(addr).await;
    let session = start_session(&mut conn, "cut-through-http-upstream").await;
    {
        let big = request("big-1", "big_paused", json!({"mode": mode}));
        let mut reply = conn.post(Some(&session), &big).await.expect("POST");
        assert_eq!(reply.status, 200);
        let held = reply
            .read_until("the first megabyte of the answer", |held| {
                open_event(held, 1 << 20).is_some()
            })
            .await;
        let open = open_event(held, 1 << 20).unwrap_or_default();
        let data = open
            .lines()
            .find_map(|line| line.strip_prefix("data: "))
            .unwrap_or_default();
        assert!(
            data.starts_with(head),
            "the head goes out with the client's id, line breaks as spaces: {data:.120}"
        );
        upstream.open_gate();
        let answer = reply.message().await.expect("the answer");
        assert_eq!(answer["id"], "big-1");
        assert_eq!(answer["result"]["text"].as_str().map(str::len), Some(SIZE));
        assert_eq!(answer["x-extra"]["kept"], true, "nothing is normalised");
        assert!(reply.message().await.is_none(), "the stream ends after it");
    }
    still_answers(&mut conn, &session, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_upstream_answer_past_the_limit_mid_way_fails_its_request_over_http() {
    let upstream = Upstream::start();
    let (_served, addr) = Mcpctl::serve(&upstream.url, &["--max-message-bytes", "1048576"]);
    let mut conn = Conn::connect(addr).await;
    let session = start_session(&mut conn, "cut-through-http-upstream").await;
    {
        let big = request("big-2", "big_paused", json!({"mode": "chunked"}));
        let mut reply = conn.post(Some(&session), &big).await.expect("POST");
        assert_eq!(reply.status, 200);
        // What went out of it is ended as an event of its own (not JSON: a client drops it),
        // then the request gets the over-limit error under its id, and the stream ends.
        let cut = reply.event().await.expect("the event cut short");
        assert!(
            cut.len() <= (1 << 20) + 16 && serde_json::from_str::<Value>(&cut).is_err(),
            "{} bytes",
            cut.len()
        );
        let refused = reply.message().await.expect("the error");
        assert_eq!(refused["id"], "big-2", "{refused}");
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("over the proxy's limit of 1048576 bytes"),
            "{message}"
        );
        assert!(reply.message().await.is_none(), "the stream ends after it");
    }
    still_answers(&mut conn, &session, 2).await;
}

/// The session still answers: a small echo comes back whole.
async fn still_answers(conn: &mut Conn, session: &str, id: u64) {
    let echo = call(conn, session, id, "custom/echo", json!({"still": "here"})).await;
    assert_eq!(
        echo.last().map(|m| &m["result"]["echo"]["still"]),
        Some(&json!("here"))
    );
}

/// `mcpctl proxy --url URL` with a client on its pipes that reads raw bytes (a thread), so the
/// test sees a line before its end.
struct StdioClient {
    _proxy: Mcpctl,
    stdin: ChildStdin,
    bytes: Receiver<Vec<u8>>,
    held: Vec<u8>,
}

impl StdioClient {
    fn start(url: &str) -> Self {
        let mut command = Mcpctl::command(&["proxy", "--url", url]);
        command.stdin(Stdio::piped()).stdout(Stdio::piped());
        let mut child = command.spawn().expect("mcpctl proxy starts");
        let stdin = child.stdin.take().expect("stdin is piped");
        let mut stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        let _ = process::collect_lines(stderr);
        let (tx, bytes) = channel();
        thread::spawn(move || {
            let mut chunk = vec![0; 64 * 1024];
            while let Ok(n) = stdout.read(&mut chunk) {
                if n == 0 || tx.send(chunk[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        let mut client = Self {
            _proxy: Mcpctl { child },
            stdin,
            bytes,
            held: Vec::new(),
        };
        let answer = client.request(
            json!(0),
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "cut-through", "version": "1"}}),
        );
        assert!(answer.get("result").is_some(), "{answer}");
        client.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        client
    }

    fn send(&mut self, message: &Value) {
        self.stdin
            .write_all(format!("{message}\n").as_bytes())
            .and_then(|()| self.stdin.flush())
            .expect("write to mcpctl");
    }

    /// Waits (at most `WAIT` for each read) until `enough` says the bytes held are enough.
    fn read_until(&mut self, what: &str, enough: impl Fn(&[u8]) -> bool) {
        while !enough(&self.held) {
            match self.bytes.recv_timeout(WAIT) {
                Ok(chunk) => self.held.extend_from_slice(&chunk),
                Err(_) => panic!(
                    "{what}: nothing more from mcpctl within {WAIT:?} ({} bytes held)",
                    self.held.len()
                ),
            }
        }
    }

    /// The next whole line.
    fn line(&mut self) -> String {
        self.read_until("a whole line", |held| held.contains(&b'\n'));
        let at = self.held.iter().position(|b| *b == b'\n').unwrap_or(0);
        let rest = self.held.split_off(at + 1);
        let mut line = std::mem::replace(&mut self.held, rest);
        line.pop();
        String::from_utf8(line).expect("the proxy writes UTF-8")
    }

    /// The next line that is a JSON message answering `id` (a line cut short is skipped).
    fn answer(&mut self, id: &Value) -> Value {
        loop {
            let line = self.line();
            if let Ok(message) = serde_json::from_str::<Value>(&line)
                && message.get("method").is_none()
                && message["id"] == *id
            {
                return message;
            }
        }
    }

    fn request(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.answer(&id)
    }
}

/// Whether `held` has at least `n` bytes and no line end: a line still arriving.
fn mid_line(held: &[u8], n: usize) -> bool {
    held.len() >= n && !held.contains(&b'\n')
}

#[test]
fn a_large_answer_reaches_the_stdio_client_while_the_http_upstream_is_still_sending_it() {
    let upstream = Upstream::start();
    let mut client = StdioClient::start(&upstream.url);
    client.send(&json!({"jsonrpc": "2.0", "id": "big-1", "method": "big_paused", "params": {"mode": "whole"}}));
    client.read_until("the first megabyte of the answer", |held| {
        mid_line(held, 1 << 20)
    });
    let head = String::from_utf8_lossy(&client.held[..64]).into_owned();
    assert!(
        head.starts_with(r#"{"jsonrpc": "2.0",   "id": "big-1",  "result": {"text": "xxx"#),
        "the head goes out with the client's id, line breaks as spaces: {head}"
    );
    upstream.open_gate();
    let answer = client.answer(&json!("big-1"));
    assert_eq!(answer["result"]["text"].as_str().map(str::len), Some(SIZE));
    assert_eq!(answer["x-extra"]["kept"], true, "nothing is normalised");
    assert!(client.held.is_empty(), "one line, ended once");
    let echo = client.request(json!(2), "custom/echo", json!({"still": "here"}));
    assert_eq!(echo["result"]["echo"]["still"], "here");
}

#[test]
fn an_http_upstream_answer_cut_short_mid_way_fails_its_request_over_stdio() {
    answer_cut_short_over_stdio("short", "failed `big_paused`: the answer broke off");
}

#[test]
fn an_sse_answer_cut_short_mid_way_fails_its_request_over_stdio_and_is_not_resumed() {
    // The stream gave event ids, so it could be resumed: not this answer, whose first part
    // is with the client already.
    answer_cut_short_over_stdio("sse_short", "failed `big_paused`: the event stream broke");
}

/// A 4 MB answer whose upstream closes the connection half-way (`mode`): what went out is
/// ended, the request gets an error saying `why`, and the session still answers.
fn answer_cut_short_over_stdio(mode: &str, why: &str) {
    let upstream = Upstream::start();
    let mut client = StdioClient::start(&upstream.url);
    client.send(
        &json!({"jsonrpc": "2.0", "id": "big-3", "method": "big_paused", "params": {"mode": mode}}),
    );
    client.read_until("the first megabyte of the answer", |held| {
        mid_line(held, 1 << 20)
    });
    upstream.open_gate();
    // The part that went out is ended as a line of its own (not JSON), then the error.
    let cut = client.line();
    assert!(serde_json::from_str::<Value>(&cut).is_err());
    let failed = client.answer(&json!("big-3"));
    let message = failed["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(why), "{failed}");
    let echo = client.request(json!(4), "custom/echo", json!({"still": "here"}));
    assert_eq!(echo["result"]["echo"]["still"], "here");
}
