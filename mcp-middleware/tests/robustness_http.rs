//! Robustness of the streamable HTTP front: `Proxy::serve_http` in front of
//! the scripted upstream (`tests/fixtures/scripted_upstream.py`, a real child process per
//! session), driven by a raw HTTP client that can stop reading or drop a connection mid-stream.
//!
//! Nothing here sleeps to wait: a test waits for the event itself (a message, a process exit
//! seen as end-of-file on a FIFO the upstream holds open) with a bound.

#[path = "support/http_client.rs"]
mod http_client;
mod support;

use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use http_client::{Conn, WAIT, call, request, start_session};
use mcp_middleware::http::{HttpOptions, HttpServer};
use mcp_middleware::upstream::StdioServer;
use mcp_middleware::{Proxy, SessionOptions};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A scratch directory for FIFOs and logs, removed when dropped.
struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    fn new() -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mcp-robustness-http-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the scratch directory");
        Self { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn fifo(&self, name: &str) -> PathBuf {
        let path = self.path(name);
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .expect("mkfifo runs");
        assert!(made.success());
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Everything written to a FIFO until its last writer closes it, read in a thread that is
/// already waiting when this returns (so an upstream opening it without blocking finds it).
fn read_fifo(path: &Path) -> Receiver<String> {
    let (tx, rx) = channel();
    let path = path.to_owned();
    std::thread::spawn(move || {
        let Ok(mut fifo) = std::fs::File::open(&path) else {
            return;
        };
        let mut text = String::new();
        let _ = fifo.read_to_string(&mut text);
        let _ = tx.send(text);
    });
    rx
}

fn options() -> HttpOptions {
    HttpOptions::default().listen("127.0.0.1:0".parse().expect("an address"))
}

async fn serve(upstream: StdioServer, session: SessionOptions, http: HttpOptions) -> HttpServer {
    Proxy::new(upstream)
        .options(session)
        .serve_http(http)
        .await
        .expect("serve_http")
}

fn code(message: &Value) -> i64 {
    message["error"]["code"].as_i64().unwrap_or_default()
}

async fn state(addr: SocketAddr, session: &str, id: u64) -> Value {
    let mut conn = Conn::connect(addr).await;
    let answers = call(&mut conn, session, id, "state", json!({})).await;
    answers
        .last()
        .map(|a| a["result"].clone())
        .expect("an answer")
}

/// The head of a raw streamable-HTTP POST to `session`, its body framed by `framing` (a
/// `content-length` or `transfer-encoding` header).
fn post_head(addr: SocketAddr, session: &str, framing: &str) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\naccept: application/json, text/event-stream\r\n\
         content-type: application/json\r\nmcp-session-id: {session}\r\n{framing}\r\n\r\n"
    )
}

/// Checks that `session` still answers an echo (request `id`) on a new connection.
async fn still_answers(addr: SocketAddr, session: &str, id: u64) {
    let mut conn = Conn::connect(addr).await;
    let answers = call(
        &mut conn,
        session,
        id,
        "custom/echo",
        json!({"still": "here"}),
    )
    .await;
    assert_eq!(
        answers.last().expect("an answer")["result"]["echo"]["still"],
        "here"
    );
}

#[tokio::test]
async fn an_upstream_killed_mid_call_fails_its_stream_within_a_second_and_other_sessions_go_on() {
    let server = serve(
        support::scripted_upstream(),
        SessionOptions::default(),
        options(),
    )
    .await;
    let addr = server.local_addr();
    let mut a = Conn::connect(addr).await;
    let session_a = start_session(&mut a, "a").await;
    let mut b = Conn::connect(addr).await;
    let session_b = start_session(&mut b, "b").await;
    let pid_b = state(addr, &session_b, 1).await["pid"].clone();

    let mut slow = a
        .post(Some(&session_a), &request(2, "slow", json!({})))
        .await
        .expect("POST");
    assert_eq!(slow.status, 200);
    // In the session's hands before this answer, so in the upstream's before `state`'s.
    let pid_a = state(addr, &session_a, 3).await["pid"]
        .as_u64()
        .expect("a pid");

    let killed = Instant::now();
    let kill = std::process::Command::new("kill")
        .args(["-KILL", &pid_a.to_string()])
        .status()
        .expect("kill runs");
    assert!(kill.success());
    let failed = slow.message().await.expect("an answer on the stream");
    let latency = killed.elapsed();
    eprintln!("HTTP: upstream killed mid-call, the client had its error after {latency:?}");
    assert_eq!(
        (failed["id"].clone(), code(&failed)),
        (json!(2), -32001),
        "{failed}"
    );
    assert!(
        latency < Duration::from_secs(1),
        "the error took {latency:?}"
    );
    assert!(slow.message().await.is_none(), "the stream ends");

    // The other session never noticed; this one starts a new upstream.
    let b_after = state(addr, &session_b, 4).await;
    assert_eq!(b_after["pid"], pid_b, "session b kept its upstream");
    let a_after = state(addr, &session_a, 5).await;
    assert_ne!(a_after["pid"], json!(pid_a));
    assert_eq!(a_after["initializes"], 1, "initialize replayed: {a_after}");
    server.shutdown().await;
}

#[tokio::test]
async fn a_hanging_upstream_times_out_with_an_error_and_a_cancellation() {
    let mut session_options = SessionOptions::default();
    // 3 s, not 1: the timeout covers `initialize` too, which a loaded machine's Python
    // upstream can take longer than a second to answer.
    session_options.request_timeout = Some(Duration::from_secs(3));
    let server = serve(support::scripted_upstream(), session_options, options()).await;
    let addr = server.local_addr();
    let mut conn = Conn::connect(addr).await;
    let session = start_session(&mut conn, "hang").await;
    let started = Instant::now();
    let answers = call(&mut conn, &session, 1, "slow", json!({})).await;
    let timed_out = answers.last().expect("an answer");
    assert_eq!(code(timed_out), -32002, "{timed_out}");
    assert!(
        timed_out["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("did not answer `slow` within 3 s"),
        "{timed_out}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    let seen = state(addr, &session, 2).await;
    assert_eq!(
        seen["cancelled"].as_array().map(Vec::len),
        Some(1),
        "{seen}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_flooding_upstream_is_held_back_until_the_client_reads_and_other_sessions_go_on() {
    let scratch = Scratch::new();
    let mut session_options = SessionOptions::default();
    session_options.client_queue_bytes = 1 << 20;
    let server = serve(support::scripted_upstream(), session_options, options()).await;
    let addr = server.local_addr();
    let mut conn = Conn::connect(addr).await;
    let session = start_session(&mut conn, "flooded").await;
    let mut other = Conn::connect(addr).await;
    let other_session = start_session(&mut other, "other").await;

    // 40,000 log messages of about 1 KiB (43 MB) on the request's stream, which the client
    // does not read yet.
    let report = scratch.fifo("report");
    let reported = read_fifo(&report);
    let count = 40_000;
    let params = json!({"count": count, "size": 1000, "report": report});
    let mut flood = conn
        .post(Some(&session), &request(1, "flood", params))
        .await
        .expect("POST");
    assert_eq!(flood.status, 200);
    let line = tokio::task::spawn_blocking(move || reported.recv_timeout(WAIT))
        .await
        .expect("the reader")
        .expect("the upstream reports blocking or finishing");
    let written: u64 = line
        .trim()
        .strip_prefix("blocked ")
        .unwrap_or_else(|| panic!("the upstream was never held back: {line}"))
        .parse()
        .expect("a byte count");
    eprintln!(
        "HTTP flood: the upstream blocked after {} MiB (1 MiB queue, plus the sockets' buffers)",
        written >> 20
    );
    assert!(
        written < 20 << 20,
        "{written} bytes before it was held back"
    );

    // Meanwhile another session is served as usual.
    let answers = call(
        &mut other,
        &other_session,
        1,
        "custom/echo",
        json!({"x": 1}),
    )
    .await;
    assert_eq!(answers.last().expect("an answer")["result"]["echo"]["x"], 1);

    // The client reads: every message arrives, in order, then the answer.
    for n in 0..count {
        let message = flood.message().await.expect("a message");
        assert_eq!(message["params"]["data"]["n"], n, "lost or reordered");
    }
    let answer = flood.message().await.expect("the answer");
    assert_eq!(answer["result"]["sent"], count, "{answer}");
    drop(flood);
    server.shutdown().await;
}

/// The scripted upstream with a lifeline and a log of what it received.
fn watched_upstream(lifeline: &Path, log: &Path) -> StdioServer {
    support::scripted_upstream()
        .env("SCRIPTED_LIFELINE", lifeline)
        .env("SCRIPTED_LOG", log)
}

/// The upstream ids of `slow` requests, and the request ids the upstream saw cancelled.
fn slow_and_cancelled(log: &Path) -> (Vec<Value>, Vec<Value>) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let seen: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let slow = seen
        .iter()
        .filter(|m| m["method"] == "slow")
        .map(|m| m["id"].clone())
        .collect();
    let cancelled = seen
        .iter()
        .filter(|m| m["method"] == "notifications/cancelled")
        .map(|m| m["requestId"].clone())
        .collect();
    (slow, cancelled)
}

#[tokio::test]
async fn a_dropped_request_stream_is_not_a_cancel_and_delete_cancels_and_frees_the_session() {
    let scratch = Scratch::new();
    let lifeline_path = scratch.fifo("lifeline");
    let lifeline = read_fifo(&lifeline_path);
    let log = scratch.path("upstream.log");
    let server = serve(
        watched_upstream(&lifeline_path, &log),
        SessionOptions::default(),
        options(),
    )
    .await;
    let addr = server.local_addr();
    let mut conn = Conn::connect(addr).await;
    let session = start_session(&mut conn, "leaver").await;
    {
        let mut dropped = Conn::connect(addr).await;
        let reply = dropped
            .post(Some(&session), &request(1, "slow", json!({})))
            .await
            .expect("POST");
        assert_eq!(reply.status, 200);
        // The connection goes away with the stream open.
    }
    // The client may come back for the answer (Last-Event-ID): the request goes on.
    let seen = state(addr, &session, 2).await;
    assert_eq!(seen["cancelled"], json!([]), "{seen}");

    let deleted = conn
        .send("DELETE", &[("mcp-session-id", &session)], b"")
        .await
        .expect("DELETE");
    assert_eq!(deleted.status, 200);
    drop(deleted.body().await);
    let exited = tokio::task::spawn_blocking(move || lifeline.recv_timeout(WAIT).is_ok())
        .await
        .expect("the reader");
    assert!(exited, "the session's upstream outlived DELETE");
    let (slow, cancelled) = slow_and_cancelled(&log);
    assert_eq!(slow.len(), 1);
    assert_eq!(cancelled, slow, "DELETE cancels what was pending upstream");
    let gone = conn
        .post(Some(&session), &request(3, "state", json!({})))
        .await
        .expect("POST");
    assert_eq!(gone.status, 404);
    server.shutdown().await;
}

#[tokio::test]
async fn an_idle_session_whose_client_left_ends_once_its_request_is_done() {
    let scratch = Scratch::new();
    let lifeline_path = scratch.fifo("lifeline");
    let lifeline = read_fifo(&lifeline_path);
    let log = scratch.path("upstream.log");
    let mut session_options = SessionOptions::default();
    // The timeout covers `initialize` too, which waits for the Python upstream to start: 1 s
    // was too short for that on a loaded machine (load above ~13), 5 s is not.
    session_options.request_timeout = Some(Duration::from_secs(5));
    let server = serve(
        watched_upstream(&lifeline_path, &log),
        session_options,
        options().idle_timeout(Duration::from_millis(300)),
    )
    .await;
    let addr = server.local_addr();
    let session = {
        let mut conn = Conn::connect(addr).await;
        let session = start_session(&mut conn, "vanished").await;
        let reply = conn
            .post(Some(&session), &request(1, "slow", json!({})))
            .await
            .expect("POST");
        assert_eq!(reply.status, 200);
        session
        // The client vanishes mid-call.
    };
    // The request times out (5 s), then the session is idle (0.3 s) and ends, upstream and all.
    let started = Instant::now();
    let exited = tokio::task::spawn_blocking(move || lifeline.recv_timeout(WAIT).is_ok())
        .await
        .expect("the reader");
    assert!(exited, "the abandoned session's upstream was never stopped");
    eprintln!(
        "HTTP: an abandoned session ended {:?} after its client left",
        started.elapsed()
    );
    let (slow, cancelled) = slow_and_cancelled(&log);
    assert_eq!(
        cancelled, slow,
        "the timeout cancelled the request upstream"
    );
    let mut conn = Conn::connect(addr).await;
    let gone = conn
        .post(Some(&session), &request(2, "state", json!({})))
        .await
        .expect("POST");
    assert_eq!(gone.status, 404);
    server.shutdown().await;
}

#[tokio::test]
async fn bad_input_over_http_gets_the_documented_error_and_the_server_goes_on() {
    let server = serve(
        support::scripted_upstream(),
        SessionOptions::default(),
        options().max_body_bytes(1 << 20),
    )
    .await;
    let addr = server.local_addr();
    let mut conn = Conn::connect(addr).await;

    // Before initialize there is no session to send to.
    let early = conn
        .post(None, &request(1, "tools/list", json!({})))
        .await
        .expect("POST");
    assert_eq!(early.status, 400);
    let early = early.json().await;
    assert_eq!((code(&early), early["id"].clone()), (-32600, json!(1)));

    let session = start_session(&mut conn, "bad-input").await;
    // Unknown methods reach the upstream; its error is relayed.
    let unknown = call(&mut conn, &session, 2, "no/such/method", json!({})).await;
    assert_eq!(code(unknown.last().expect("an answer")), -32601);
    // A method that is not a string: refused under the request's id.
    let wrong = conn
        .post(Some(&session), r#"{"jsonrpc":"2.0","id":3,"method":7}"#)
        .await
        .expect("POST");
    assert_eq!(wrong.status, 400);
    let wrong = wrong.json().await;
    assert_eq!(
        (code(&wrong), wrong["id"].clone()),
        (-32600, json!(3)),
        "{wrong}"
    );

    // The same id twice in flight: the second is refused, the first goes on.
    let mut first_conn = Conn::connect(addr).await;
    let first = first_conn
        .post(Some(&session), &request(4, "slow", json!({})))
        .await
        .expect("POST");
    assert_eq!(first.status, 200);
    let second = conn
        .post(Some(&session), &request(4, "custom/echo", json!({})))
        .await
        .expect("POST");
    assert_eq!(second.status, 409);
    let second = second.json().await;
    assert_eq!((code(&second), second["id"].clone()), (-32600, json!(4)));
    drop(first);

    // A declared body over the limit (100 GiB) is refused before any of it is read.
    let mut raw = Conn::connect(addr).await;
    let head = post_head(addr, &session, "content-length: 107374182400");
    raw.write_raw(head.as_bytes()).await.expect("write");
    let declared = raw.head().await.expect("an answer");
    assert_eq!(declared.status, 413);
    let declared = declared.json().await;
    assert_eq!(code(&declared), -32600, "{declared}");

    // A chunked body that never ends: refused once it passes the limit, not read to the end.
    let huge_status = chunked_flood(addr, &session, 64 << 20).await;
    assert_eq!(huge_status, 413);

    // The server and the session are unharmed.
    still_answers(addr, &session, 5).await;
    server.shutdown().await;
}

/// A request body is read on a task of its own (`http/handler.rs`, `read_body`): one that
/// comes in several chunks, written one at a time, is read whole, and a client that leaves in
/// the middle of its body leaves the session as it was.
#[tokio::test]
async fn a_body_that_comes_in_pieces_is_read_whole_and_one_left_unfinished_harms_nothing() {
    let server = serve(
        support::scripted_upstream(),
        SessionOptions::default(),
        options(),
    )
    .await;
    let addr = server.local_addr();
    let mut conn = Conn::connect(addr).await;
    let session = start_session(&mut conn, "body-pieces").await;
    let head = |framing: &str| post_head(addr, &session, framing);

    let body = request(2, "custom/echo", json!({"came": "in pieces"}));
    let mut pieced = Conn::connect(addr).await;
    pieced
        .write_raw(head("transfer-encoding: chunked").as_bytes())
        .await
        .expect("write the head");
    let (first, rest) = body.split_at(body.len() / 3);
    let (second, third) = rest.split_at(rest.len() / 2);
    for piece in [first, second, third] {
        let chunk = format!("{:x}\r\n{piece}\r\n", piece.len());
        pieced
            .write_raw(chunk.as_bytes())
            .await
            .expect("write a chunk");
        tokio::task::yield_now().await;
    }
    pieced.write_raw(b"0\r\n\r\n").await.expect("end the body");
    let reply = pieced.head().await.expect("an answer");
    assert_eq!(reply.status, 200);
    let answers = reply.messages().await;
    assert_eq!(
        answers.last().expect("an answer")["result"]["echo"]["came"],
        "in pieces"
    );

    // Half a declared body, then the client goes.
    let mut left = Conn::connect(addr).await;
    let body = request(3, "custom/echo", json!({"never": "finished"}));
    let declared = head(&format!("content-length: {}", body.len()));
    left.write_raw(declared.as_bytes())
        .await
        .expect("write the head");
    left.write_raw(&body.as_bytes()[..body.len() / 2])
        .await
        .expect("write half the body");
    drop(left);

    still_answers(addr, &session, 4).await;
    let log = state(addr, &session, 5).await;
    let echoes = log["methods"]
        .as_array()
        .expect("the methods the upstream saw")
        .iter()
        .filter(|m| *m == "custom/echo")
        .count();
    assert_eq!(
        echoes, 2,
        "only the finished requests reach the upstream: {log}"
    );
    server.shutdown().await;
}

/// POSTs a chunked body of up to `total` bytes that the server should refuse early; returns
/// the status it answered with.
async fn chunked_flood(addr: SocketAddr, session: &str, total: usize) -> u16 {
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (mut read, mut write) = stream.into_split();
    let head = post_head(addr, session, "transfer-encoding: chunked");
    let writer = tokio::spawn(async move {
        if write.write_all(head.as_bytes()).await.is_err() {
            return 0;
        }
        let chunk = format!("{:x}\r\n{}\r\n", 1 << 16, "y".repeat(1 << 16));
        let mut sent = 0;
        while sent < total {
            if write.write_all(chunk.as_bytes()).await.is_err() {
                break; // refused: the server closed the connection
            }
            sent += 1 << 16;
        }
        sent
    });
    let mut response = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(WAIT, read.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => {
                response.extend_from_slice(&buf[..n]);
                if response.windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            Err(_) => panic!("no answer to an endless body"),
        }
    }
    drop(read);
    let sent = writer.await.expect("the writer");
    eprintln!(
        "HTTP: an endless chunked body was refused after the client sent {} MiB",
        sent >> 20
    );
    assert!(sent < total, "the whole body was read");
    let text = String::from_utf8_lossy(&response);
    text.split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}
