//! The streamable HTTP front end to end: a raw HTTP/1.1 client (so it can also send what no
//! SDK would) against `Proxy::serve_http` in front of the scripted upstream
//! (`tests/fixtures/scripted_upstream.py`, a real child process on stdio).

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mcp_middleware::Proxy;
use mcp_middleware::http::{HttpOptions, HttpServer};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

const WAIT: Duration = Duration::from_secs(20);
const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"http-test","version":"1.0.0"}}}"#;

fn options() -> HttpOptions {
    HttpOptions::default().listen("127.0.0.1:0".parse().unwrap())
}

async fn serve(options: HttpOptions) -> HttpServer {
    Proxy::new(support::scripted_upstream())
        .serve_http(options)
        .await
        .expect("serve_http")
}

/// Serves with upstreams that hold `lifeline` open while they live.
async fn serve_watched(options: HttpOptions, lifeline: &support::Lifeline) -> HttpServer {
    Proxy::new(support::scripted_upstream().env("SCRIPTED_LIFELINE", &lifeline.path))
        .serve_http(options)
        .await
        .expect("serve_http")
}

/// A response whose head has been read; the body is read as needed.
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    reader: BufReader<OwnedReadHalf>,
    /// Held so the connection stays open (not half-closed) until the reply is dropped.
    _writer: OwnedWriteHalf,
    chunked: bool,
    length: Option<usize>,
    /// Decoded body bytes not yet taken as SSE events.
    pending: String,
    done: bool,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
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
        if !self.chunked {
            let mut buf = vec![0u8; 64 * 1024];
            let want = self.length.map(|l| l.min(buf.len()));
            let n = match want {
                Some(0) => 0,
                Some(want) => self.reader.read(&mut buf[..want]).await.unwrap_or(0),
                None => self.reader.read(&mut buf).await.unwrap_or(0),
            };
            if let Some(length) = &mut self.length {
                *length -= n;
            }
            if n == 0 {
                self.done = true;
                return false;
            }
            self.pending.push_str(&String::from_utf8_lossy(&buf[..n]));
            return true;
        }
        let mut size_line = String::new();
        if self.reader.read_line(&mut size_line).await.unwrap_or(0) == 0 {
            self.done = true;
            return false;
        }
        let size = usize::from_str_radix(size_line.trim(), 16).unwrap_or(0);
        if size == 0 {
            self.done = true;
            return false;
        }
        let mut chunk = vec![0u8; size + 2];
        if self.reader.read_exact(&mut chunk).await.is_err() {
            self.done = true;
            return false;
        }
        chunk.truncate(size);
        self.pending.push_str(&String::from_utf8_lossy(&chunk));
        true
    }

    async fn body(mut self) -> String {
        while self.fill().await {}
        self.pending
    }

    async fn json(self) -> Value {
        let body = self.body().await;
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
    }

    /// The next SSE event as (id, data); `None` when the stream ends.
    async fn event(&mut self) -> Option<(Option<String>, String)> {
        loop {
            if let Some(end) = self.pending.find("\n\n") {
                let block: String = self.pending.drain(..end + 2).collect();
                let mut id = None;
                let mut data = Vec::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id: ") {
                        id = Some(v.to_owned());
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data.push(v);
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push(v);
                    }
                }
                if id.is_none() && data.is_empty() {
                    continue; // a comment or a lone retry:
                }
                return Some((id, data.join("\n")));
            }
            if !tokio::time::timeout(WAIT, self.fill())
                .await
                .expect("no SSE event in time")
            {
                return None;
            }
        }
    }

    /// The next message on the stream (skipping the priming event).
    async fn message(&mut self) -> Option<(Option<String>, Value)> {
        loop {
            let (id, data) = self.event().await?;
            if data.is_empty() {
                continue;
            }
            let value = serde_json::from_str(&data).unwrap_or_else(|e| panic!("{e}: {data}"));
            return Some((id, value));
        }
    }

    async fn messages(mut self) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some((_, value)) = self.message().await {
            out.push(value);
        }
        out
    }
}

async fn send(addr: SocketAddr, method: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (read, mut write) = stream.into_split();
    let mut head = format!("{method} /mcp HTTP/1.1\r\nconnection: close\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("host: {addr}\r\n"));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
    write.write_all(head.as_bytes()).await.expect("write");
    write.write_all(body.as_bytes()).await.expect("write");
    let mut reader = BufReader::new(read);
    let mut status_line = String::new();
    tokio::time::timeout(WAIT, reader.read_line(&mut status_line))
        .await
        .expect("no response in time")
        .expect("read");
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).await.expect("read");
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((n, v)) = line.split_once(':') {
            headers.push((n.trim().to_owned(), v.trim().to_owned()));
        }
    }
    let chunked = headers
        .iter()
        .any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let length = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok());
    Reply {
        status,
        headers,
        reader,
        _writer: write,
        chunked,
        length,
        pending: String::new(),
        done: false,
    }
}

const ACCEPT: (&str, &str) = ("accept", "application/json, text/event-stream");
const JSON: (&str, &str) = ("content-type", "application/json");

async fn post(addr: SocketAddr, session: Option<&str>, body: &str) -> Reply {
    let mut headers = vec![ACCEPT, JSON];
    if let Some(session) = session {
        headers.push(("mcp-session-id", session));
    }
    send(addr, "POST", &headers, body).await
}

/// Initializes a session; returns its id.
async fn initialize(addr: SocketAddr) -> String {
    let mut reply = post(addr, None, INIT).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    let session = reply
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned();
    let (_, answer) = reply.message().await.expect("initialize answer");
    assert_eq!(answer["result"]["serverInfo"]["name"], "scripted-upstream");
    let notified = post(
        addr,
        Some(&session),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    assert_eq!(notified.status, 202);
    session
}

fn request(id: u64, method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

async fn call(addr: SocketAddr, session: &str, id: u64, method: &str, params: Value) -> Vec<Value> {
    let reply = post(addr, Some(session), &request(id, method, params)).await;
    assert_eq!(reply.status, 200);
    reply.messages().await
}

#[tokio::test]
async fn sessions_start_at_initialize_and_every_request_needs_one() {
    let server = serve(options()).await;
    let addr = server.local_addr();
    let session = initialize(addr).await;
    assert_eq!(session.len(), 32, "128 random bits in hex: {session}");
    assert!(session.bytes().all(|b| b.is_ascii_hexdigit()));

    let missing = post(addr, None, &request(2, "tools/list", json!({}))).await;
    assert_eq!(missing.status, 400);
    let error = missing.json().await;
    assert_eq!(error["id"], 2);
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Mcp-Session-Id")
    );

    let unknown = post(addr, Some("0123"), &request(3, "tools/list", json!({}))).await;
    assert_eq!(unknown.status, 404);

    let answers = call(addr, &session, 4, "tools/list", json!({})).await;
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0]["id"], 4);
    assert_eq!(answers[0]["result"]["tools"][0]["name"], "t");
    // Lossless: the upstream's unknown member is still there.
    assert_eq!(answers[0]["x-extra"]["kept"], true);

    let other = initialize(addr).await;
    assert_ne!(
        other, session,
        "every initialize starts a session of its own"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn progress_logs_and_server_requests_travel_on_their_request_stream() {
    let server = serve(options()).await;
    let addr = server.local_addr();
    let session = initialize(addr).await;

    let answers = call(
        addr,
        &session,
        2,
        "progress",
        json!({"_meta": {"progressToken": "p-1"}}),
    )
    .await;
    assert_eq!(answers.len(), 4, "{answers:?}");
    for (step, note) in answers[..3].iter().enumerate() {
        assert_eq!(note["method"], "notifications/progress");
        assert_eq!(
            note["params"]["progressToken"], "p-1",
            "the client's own token"
        );
        assert_eq!(note["params"]["progress"], step as u64 + 1);
    }
    assert_eq!(answers[3]["id"], 2);

    let logged = call(addr, &session, 3, "tools/call", json!({"name": "x"})).await;
    assert_eq!(logged[0]["method"], "notifications/message");
    assert_eq!(logged[1]["result"]["content"][0]["text"], "called x");

    // A server request goes on the stream of the request that caused it; the client's answer
    // is its own POST, and the final answer follows on the first stream.
    let mut asking = post(
        addr,
        Some(&session),
        &request(4, "ask", json!({"q": "name?"})),
    )
    .await;
    let (_, question) = asking.message().await.expect("the server's question");
    assert_eq!(question["method"], "custom/question");
    let answer = json!({"jsonrpc": "2.0", "id": question["id"], "result": {"name": "Ada"}});
    let accepted = post(addr, Some(&session), &answer.to_string()).await;
    assert_eq!(accepted.status, 202);
    let (_, done) = asking.message().await.expect("the final answer");
    assert_eq!(done["id"], 4);
    assert_eq!(done["result"]["answer"]["name"], "Ada");
    assert!(
        asking.message().await.is_none(),
        "the stream ends after its response"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn the_get_stream_carries_other_notifications_and_its_backlog() {
    let server = serve(options()).await;
    let addr = server.local_addr();
    let session = initialize(addr).await;
    // No GET stream yet: the echo waits in the backlog.
    let note = r#"{"jsonrpc":"2.0","method":"notifications/custom","params":{"n":1}}"#;
    assert_eq!(post(addr, Some(&session), note).await.status, 202);
    // A request in between proves the echo has been routed before the GET opens.
    call(addr, &session, 2, "custom/echo", json!({})).await;

    let no_accept = send(addr, "GET", &[("mcp-session-id", &session)], "").await;
    assert_eq!(no_accept.status, 406);
    let sse = [
        ("accept", "text/event-stream"),
        ("mcp-session-id", session.as_str()),
    ];
    let mut stream = send(addr, "GET", &sse, "").await;
    assert_eq!(stream.status, 200);
    let (id, echoed) = stream.message().await.expect("the backlog");
    assert_eq!(echoed["method"], "notifications/custom_echo");
    assert_eq!(echoed["params"]["n"], 1);
    let id = id.expect("an event id");

    // Live, then resumed after a break: the GET stream's events are replayed after the id.
    let note = r#"{"jsonrpc":"2.0","method":"notifications/custom","params":{"n":2}}"#;
    post(addr, Some(&session), note).await;
    let (_, live) = stream.message().await.expect("live");
    assert_eq!(live["params"]["n"], 2);
    drop(stream);
    let resumed = [
        ("accept", "text/event-stream"),
        ("mcp-session-id", session.as_str()),
        ("last-event-id", id.as_str()),
    ];
    let mut again = send(addr, "GET", &resumed, "").await;
    let (_, replayed) = again.message().await.expect("replay");
    assert_eq!(replayed["params"]["n"], 2, "replays what followed {id}");
    server.shutdown().await;
}

#[tokio::test]
async fn a_broken_request_stream_resumes_with_last_event_id() {
    let server = serve(options()).await;
    let addr = server.local_addr();
    let session = initialize(addr).await;
    let mut asking = post(addr, Some(&session), &request(7, "ask", json!({"q": "?"}))).await;
    let (id, question) = asking.message().await.expect("the question");
    let id = id.expect("event id");
    drop(asking); // the connection breaks before the answer
    let answer = json!({"jsonrpc": "2.0", "id": question["id"], "result": {"ok": 1}});
    assert_eq!(
        post(addr, Some(&session), &answer.to_string()).await.status,
        202
    );
    let headers = [
        ("accept", "text/event-stream"),
        ("mcp-session-id", session.as_str()),
        ("last-event-id", id.as_str()),
    ];
    // The answer may still be on its way: resume until it is there.
    let deadline = Instant::now() + WAIT;
    loop {
        let resumed = send(addr, "GET", &headers, "").await;
        assert_eq!(resumed.status, 200);
        let messages = tokio::time::timeout(Duration::from_millis(500), resumed.messages()).await;
        if let Ok(messages) = messages
            && let Some(done) = messages.iter().find(|m| m["id"] == 7)
        {
            assert_eq!(done["result"]["answer"]["ok"], 1);
            break;
        }
        assert!(Instant::now() < deadline, "the response never came");
    }
    let bad = [
        ("accept", "text/event-stream"),
        ("mcp-session-id", session.as_str()),
        ("last-event-id", "99-1"),
    ];
    assert_eq!(send(addr, "GET", &bad, "").await.status, 400);
    server.shutdown().await;
}

#[tokio::test]
async fn bad_input_gets_a_clear_error_and_the_session_goes_on() {
    let server = serve(options().max_body_bytes(1024)).await;
    let addr = server.local_addr();
    let session = initialize(addr).await;
    let sid = ("mcp-session-id", session.as_str());

    // (method, headers, body, status, JSON-RPC code, what the message names)
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, String, u16, i64, &'a str);
    let cases: Vec<Case> = vec![
        (
            "POST",
            vec![ACCEPT, JSON, sid],
            "{not json".into(),
            400,
            -32700,
            "Parse error",
        ),
        (
            "POST",
            vec![ACCEPT, JSON, sid],
            "[{}]".into(),
            400,
            -32600,
            "batch",
        ),
        (
            "POST",
            vec![ACCEPT, JSON, sid],
            r#"{"id":1}"#.into(),
            400,
            -32600,
            "Invalid Request",
        ),
        (
            "POST",
            vec![ACCEPT, ("content-type", "text/plain"), sid],
            "{}".into(),
            415,
            -32600,
            "application/json",
        ),
        (
            "POST",
            vec![("accept", "application/json"), JSON, sid],
            "{}".into(),
            406,
            -32600,
            "text/event-stream",
        ),
        (
            "POST",
            vec![ACCEPT, JSON, sid],
            format!(r#"{{"x":"{}"}}"#, "y".repeat(2000)),
            413,
            -32600,
            "1024",
        ),
        (
            "POST",
            vec![ACCEPT, JSON, sid, ("mcp-protocol-version", "1999-01-01")],
            "{}".into(),
            400,
            -32022,
            "1999-01-01",
        ),
        (
            "PUT",
            vec![ACCEPT, JSON, sid],
            "{}".into(),
            405,
            -32600,
            "POST, GET and DELETE",
        ),
    ];
    for (method, headers, body, status, code, says) in cases {
        let reply = send(addr, method, &headers, &body).await;
        assert_eq!(reply.status, status, "{method} {body:.40}");
        assert_eq!(reply.header("content-type"), Some("application/json"));
        let error = reply.json().await;
        assert_eq!(error["error"]["code"], code, "{error}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message:?} should say {says:?}");
    }
    let not_utf8 = {
        let stream = TcpStream::connect(addr).await.unwrap();
        let (read, mut write) = stream.into_split();
        let head = format!(
            "POST /mcp HTTP/1.1\r\nhost: {addr}\r\naccept: application/json, text/event-stream\r\ncontent-type: application/json\r\nmcp-session-id: {session}\r\ncontent-length: 3\r\nconnection: close\r\n\r\n"
        );
        write.write_all(head.as_bytes()).await.unwrap();
        write.write_all(&[b'{', 0xff, b'}']).await.unwrap();
        let mut out = String::new();
        let _ = BufReader::new(read).read_to_string(&mut out).await;
        out
    };
    assert!(not_utf8.starts_with("HTTP/1.1 400"), "{not_utf8}");
    assert!(not_utf8.contains("not UTF-8"));
    // The session is unharmed.
    let answers = call(addr, &session, 9, "custom/echo", json!({"still": "here"})).await;
    assert_eq!(answers[0]["result"]["echo"]["still"], "here");
    server.shutdown().await;
}

#[tokio::test]
async fn unknown_paths_and_hosts_and_origins_are_refused() {
    let server = serve(
        options()
            .allow_host("mcp.example.com")
            .allow_origin("https://app.example.com"),
    )
    .await;
    let addr = server.local_addr();
    let wrong_path = {
        let stream = TcpStream::connect(addr).await.unwrap();
        let (read, mut write) = stream.into_split();
        let head = format!("GET /other HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n");
        write.write_all(head.as_bytes()).await.unwrap();
        let mut out = String::new();
        let _ = BufReader::new(read).read_to_string(&mut out).await;
        out
    };
    assert!(wrong_path.starts_with("HTTP/1.1 404"), "{wrong_path}");

    for (host, origin, status) in [
        ("evil.example.com", None, 403),
        ("evil.example.com:80", Some("http://evil.example.com"), 403),
        ("localhost", Some("http://evil.example.com"), 403),
        ("localhost", Some("null"), 403),
        ("localhost:1234", Some("http://localhost:3000"), 200),
        ("127.0.0.1", None, 200),
        ("mcp.example.com", Some("https://app.example.com"), 200),
    ] {
        let mut headers = vec![ACCEPT, JSON, ("host", host)];
        if let Some(origin) = origin {
            headers.push(("origin", origin));
        }
        let reply = send(addr, "POST", &headers, INIT).await;
        assert_eq!(reply.status, status, "host {host}, origin {origin:?}");
        if status == 403 {
            let error = reply.json().await;
            let message = error["error"]["message"].as_str().unwrap();
            assert!(message.contains("DNS-rebinding"), "{message}");
            // It says how to allow what was refused, without repeating what the sender sent.
            let option = if message.contains("Host is") {
                "--allow-host HOST"
            } else {
                "--allow-origin ORIGIN"
            };
            assert!(message.contains(option), "{message}");
            assert!(!message.contains("evil"), "{message}");
            assert_eq!(error["id"], Value::Null);
        } else if let Some(origin) = origin {
            assert_eq!(reply.header("access-control-allow-origin"), Some(origin));
        }
    }
    server.shutdown().await;
}

#[tokio::test]
async fn delete_ends_the_session_and_its_upstream() {
    let lifeline = support::Lifeline::new("delete");
    let upstream_exited = lifeline.watch();
    let server = serve_watched(options(), &lifeline).await;
    let addr = server.local_addr();
    let session = initialize(addr).await;
    let state = call(addr, &session, 2, "state", json!({})).await;
    let pid = state[0]["result"]["pid"]
        .as_u64()
        .expect("the upstream's pid");

    assert_eq!(send(addr, "DELETE", &[], "").await.status, 400);
    let deleted = send(addr, "DELETE", &[("mcp-session-id", &session)], "").await;
    assert_eq!(deleted.status, 200);
    let after = post(addr, Some(&session), &request(3, "tools/list", json!({}))).await;
    assert_eq!(after.status, 404);
    assert_eq!(
        send(addr, "DELETE", &[("mcp-session-id", &session)], "")
            .await
            .status,
        404
    );
    let stopped = tokio::time::timeout(WAIT, upstream_exited).await;
    assert!(
        matches!(stopped, Ok(Ok(()))),
        "the upstream {pid} was not stopped"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn the_session_limit_and_the_idle_timeout_hold() {
    let lifeline = support::Lifeline::new("idle");
    let upstream_exited = lifeline.watch();
    let server = serve_watched(
        options()
            .max_sessions(1)
            .idle_timeout(Duration::from_millis(400)),
        &lifeline,
    )
    .await;
    let addr = server.local_addr();
    let session = initialize(addr).await;
    let refused = post(addr, None, INIT).await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.header("retry-after"), Some("5"));
    let error = refused.json().await;
    assert_eq!(error["error"]["code"], -32000);
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("limit of 1 sessions")
    );
    assert_eq!(error["id"], 1);

    // Idle: no request, no stream. The session ends (its upstream stopped with it) and its
    // slot frees up.
    let ended = tokio::time::timeout(WAIT, upstream_exited).await;
    assert!(matches!(ended, Ok(Ok(()))), "the idle session never ended");
    let probe = post(addr, Some(&session), &request(2, "tools/list", json!({}))).await;
    assert_eq!(probe.status, 404, "the idle session is gone");
    let _ = initialize(addr).await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_dying_upstream_fails_its_request_and_the_next_one_restarts_it() {
    let server = serve(options()).await;
    let addr = server.local_addr();
    let session = initialize(addr).await;
    let started = Instant::now();
    let died = call(addr, &session, 2, "die", json!({})).await;
    assert_eq!(died.len(), 1, "{died:?}");
    assert_eq!(died[0]["id"], 2);
    assert_eq!(died[0]["error"]["code"], -32001, "{died:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
    let again = call(addr, &session, 3, "state", json!({})).await;
    assert_eq!(
        again[0]["result"]["initializes"], 1,
        "the restarted upstream got initialize replayed"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn shutdown_answers_requests_in_flight_and_stops_within_its_grace() {
    let server = serve(options().shutdown_grace(Duration::from_millis(300))).await;
    let addr = server.local_addr();
    let session = initialize(addr).await;
    let state = call(addr, &session, 2, "state", json!({})).await;
    let pid = state[0]["result"]["pid"].as_u64().unwrap();
    let mut slow = post(addr, Some(&session), &request(3, "slow", json!({}))).await;
    let started = Instant::now();
    let stopping = tokio::spawn(server.shutdown());
    let (_, answer) = slow
        .message()
        .await
        .expect("an answer before the stream closes");
    assert_eq!(answer["id"], 3);
    assert_eq!(answer["error"]["code"], -32000);
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("shutting down")
    );
    tokio::time::timeout(WAIT, stopping)
        .await
        .expect("shutdown hung")
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "still accepting connections"
    );
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the upstream outlived the proxy"
    );
}

/// 2026-07-28 headers for a stateless request.
fn modern<'a>(method: &'a str, name: Option<&'a str>) -> Vec<(&'a str, &'a str)> {
    let mut headers = vec![
        ACCEPT,
        JSON,
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", method),
    ];
    if let Some(name) = name {
        headers.push(("mcp-name", name));
    }
    headers
}

fn modern_request(id: u64, method: &str, mut params: Value) -> String {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "stateless-test", "version": "1"},
    });
    request(id, method, params)
}

#[tokio::test]
async fn stateless_requests_need_no_session_and_their_headers_must_match() {
    let server = serve(options()).await;
    let addr = server.local_addr();
    let body = modern_request(1, "tools/call", json!({"name": "x"}));
    let reply = send(addr, "POST", &modern("tools/call", Some("x")), &body).await;
    assert_eq!(reply.status, 200);
    assert!(reply.header("mcp-session-id").is_none());
    let content_type = reply.header("content-type").map(str::to_owned);
    let answer = if content_type.as_deref() == Some("application/json") {
        reply.json().await
    } else {
        let messages = reply.messages().await;
        messages.last().cloned().unwrap()
    };
    assert_eq!(answer["id"], 1);
    assert_eq!(answer["result"]["content"][0]["text"], "called x");
    assert_eq!(
        answer["result"]["resultType"], "complete",
        "bridged: completed for 2026-07-28"
    );

    // A lone error comes back as JSON with the status the spec gives it.
    let unknown = modern_request(2, "nope/nothing", json!({}));
    let reply = send(addr, "POST", &modern("nope/nothing", None), &unknown).await;
    assert_eq!(reply.status, 404);
    assert_eq!(reply.json().await["error"]["code"], -32601);

    let mismatched = send(addr, "POST", &modern("tools/call", Some("y")), &body).await;
    assert_eq!(mismatched.status, 400);
    assert_eq!(mismatched.json().await["error"]["code"], -32020);
    let wrong_method = send(addr, "POST", &modern("tools/list", None), &body).await;
    assert_eq!(wrong_method.json().await["error"]["code"], -32020);
    let encoded = send(
        addr,
        "POST",
        &modern("tools/call", Some("=?base64?eA==?=")),
        &body,
    )
    .await;
    assert_eq!(encoded.status, 200, "a base64 Mcp-Name is decoded");

    let get = send(
        addr,
        "GET",
        &[
            ("accept", "text/event-stream"),
            ("mcp-protocol-version", "2026-07-28"),
        ],
        "",
    )
    .await;
    assert_eq!(get.status, 405);
    server.shutdown().await;
}

#[tokio::test]
async fn closing_a_stateless_stream_cancels_its_request() {
    let server = serve(options()).await;
    let addr = server.local_addr();
    let hang = modern_request(1, "tools/call", json!({"name": "hang"}));
    let reply = send(addr, "POST", &modern("tools/call", Some("hang")), &hang).await;
    // Past the JSON window the answer turns into a stream; closing it cancels the call.
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    drop(reply);
    let deadline = Instant::now() + WAIT;
    loop {
        let state = modern_request(2, "state", json!({}));
        let reply = send(addr, "POST", &modern("state", None), &state).await;
        let seen = reply.json().await;
        if !seen["result"]["cancelled"].as_array().unwrap().is_empty() {
            break;
        }
        // Each probe is a round trip through the proxy to the upstream: no timer needed.
        assert!(
            Instant::now() < deadline,
            "the upstream was never told: {seen}"
        );
    }
    server.shutdown().await;
}
