//! Cut-through over HTTP: `mcpctl serve` forwards an unhooked large answer
//! on its request's SSE stream while the upstream is still writing it. The real binary, a raw
//! HTTP/1.1 client (`mcp-middleware/tests/support/http_client.rs`, which reads the body as it
//! arrives) and the scripted upstream (`tests/fixtures/scripted_upstream.py`), whose
//! `big_paused` writes half of a multi-MB answer line and then waits, mid-line, until the test
//! opens and closes a FIFO.
//!
//! Without cut-through the proxy holds the half answer until its end, so the client sees none
//! of it and the test fails at its bound; with it the client reads the first megabyte of the
//! event while the upstream is still paused. Each wait is for an event, with a bound.

#[path = "../../mcp-middleware/tests/support/http_client.rs"]
mod http_client;
#[path = "support/process.rs"]
mod process;
#[path = "support/scratch.rs"]
mod scratch;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use http_client::{Conn, WAIT, call, open_event, request, start_session};
use scratch::{Scratch, open_gate};
use serde_json::{Value, json};

/// The size of the answer's text: 4 MB, written in two halves.
const SIZE: usize = 4_000_000;

/// `mcpctl serve ARGS -- python3 scripted_upstream.py`; the proxy and its upstreams (one
/// process group) are killed when dropped.
struct Served {
    child: Child,
    addr: SocketAddr,
}

impl Served {
    fn start(args: &[&str]) -> Self {
        use std::os::unix::process::CommandExt as _;
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/scripted_upstream.py");
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcpctl"))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .args(["--", "python3", "-u"])
            .arg(script)
            .env_remove("MCPCTL_LOG")
            // Its own process group, which the upstreams join: `Drop` stops all at once (an
            // upstream may be paused on its gate).
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("mcpctl serve starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let rx = process::listening_address(stderr);
        let mut served = Self {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        };
        let addr = rx.recv_timeout(WAIT).expect("mcpctl serve listens");
        served.addr = addr.parse().expect("a socket address");
        served
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        process::kill_group(self.child.id());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_answer_reaches_the_http_client_while_the_upstream_is_still_writing_it() {
    let scratch = Scratch::new("mcpctl-cut-through-http");
    let gate = scratch.fifo("gate");
    let served = Served::start(&[]);
    let mut conn = Conn::connect(served.addr).await;
    let session = start_session(&mut conn, "cut-through-http").await;
    let big = request(
        "big-1",
        "big_paused",
        json!({"size": SIZE, "gate": gate.to_str().expect("a UTF-8 path")}),
    );
    {
        let mut reply = conn.post(Some(&session), &big).await.expect("POST");
        assert_eq!(reply.status, 200);
        // The upstream has written half of the line and waits on the gate: a megabyte of its
        // event is already here, without its end.
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
            open.starts_with("id: ")
                && data.starts_with(
                    r#"{"jsonrpc" : "2.0", "id" : "big-1", "result" : {"text" : "xxx"#
                ),
            "the event's head goes out with the client's id and the upstream's bytes: {:.120}",
            open
        );
        open_gate(&gate);
        let answer = reply.message().await.expect("the answer");
        assert_eq!(answer["id"], "big-1");
        assert_eq!(answer["result"]["text"].as_str().map(str::len), Some(SIZE));
        assert_eq!(answer["x-extra"]["kept"], true, "nothing is normalised");
        assert!(reply.message().await.is_none(), "the stream ends after it");
    }
    // The session goes on; a small answer and a large unpaused one come whole.
    still_answers(&mut conn, &session, 2).await;
    let big = call(&mut conn, &session, 3, "big", json!({"size": SIZE})).await;
    let text = big
        .last()
        .and_then(|m| m["result"]["text"].as_str())
        .map(str::len);
    assert_eq!(text, Some(SIZE));
}

/// A client whose connection broke while a large answer was being cut through to it resumes
/// its stream with `Last-Event-ID` and gets the answer whole: the proxy kept a copy of what it
/// streamed, since the event store keeps answers that long (`--event-store-bytes`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_through_answer_whose_connection_broke_is_replayed_whole_on_resumption() {
    let answer = resumed_after_a_break(&["--event-store-bytes", "8388608"]).await;
    assert_eq!(answer["result"]["text"].as_str().map(str::len), Some(SIZE));
    assert_eq!(answer["x-extra"]["kept"], true, "replayed byte for byte");
}

/// The same with an event store of 1 MiB (the default): the 4 MB answer is not copied for
/// it, and the resuming client is told so, under its request's id, instead of waiting for an
/// answer that will not come.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_through_answer_too_long_to_keep_whose_connection_broke_is_an_error_on_resumption() {
    let answer = resumed_after_a_break(&[]).await;
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("longer than the proxy keeps for resuming a stream (1048576 bytes"),
        "{message}"
    );
}

/// Has `mcpctl serve ARGS` cut a 4 MB answer through, breaks the connection half-way, resumes
/// the stream with `Last-Event-ID`, and returns what the resumed stream gives for the request.
async fn resumed_after_a_break(args: &[&str]) -> Value {
    let scratch = Scratch::new("mcpctl-cut-through-http");
    let gate = scratch.fifo("gate");
    let served = Served::start(args);
    let mut conn = Conn::connect(served.addr).await;
    let session = start_session(&mut conn, "cut-through-resume").await;
    let big = request(
        "big-1",
        "big_paused",
        json!({"size": SIZE, "gate": gate.to_str().expect("a UTF-8 path")}),
    );
    let priming = {
        let mut reply = conn.post(Some(&session), &big).await.expect("POST");
        assert_eq!(reply.status, 200);
        let held = reply
            .read_until("the first megabyte of the answer", |held| {
                open_event(held, 1 << 20).is_some()
            })
            .await;
        // The stream's first event is its priming event (`retry:`, then its id): resuming
        // after it replays the rest.
        held.lines()
            .find_map(|line| line.strip_prefix("id: "))
            .expect("a priming event id")
            .to_owned()
    };
    // The connection breaks mid-answer; then the upstream writes the rest.
    drop(conn);
    open_gate(&gate);
    let headers = [
        ("accept", "text/event-stream"),
        ("mcp-session-id", session.as_str()),
        ("last-event-id", priming.as_str()),
    ];
    // The answer may still be on its way to the proxy: resume until it is there.
    let deadline = std::time::Instant::now() + WAIT;
    let answer = loop {
        let mut conn = Conn::connect(served.addr).await;
        let resumed = conn.send("GET", &headers, b"").await.expect("GET");
        assert_eq!(resumed.status, 200);
        let messages =
            tokio::time::timeout(std::time::Duration::from_millis(500), resumed.messages()).await;
        if let Ok(messages) = messages
            && let Some(answer) = messages.into_iter().find(|m| m["id"] == "big-1")
        {
            break answer;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the answer was never replayed"
        );
    };
    let mut conn = Conn::connect(served.addr).await;
    still_answers(&mut conn, &session, 2).await;
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_cut_through_over_http_past_the_limit_is_ended_and_its_request_fails() {
    let scratch = Scratch::new("mcpctl-cut-through-http");
    let gate = scratch.fifo("gate");
    let served = Served::start(&["--max-message-bytes", "1048576"]);
    let mut conn = Conn::connect(served.addr).await;
    let session = start_session(&mut conn, "cut-through-http").await;
    let big = request(
        "big-2",
        "big_paused",
        json!({"size": SIZE, "gate": gate.to_str().expect("a UTF-8 path")}),
    );
    {
        let mut reply = conn.post(Some(&session), &big).await.expect("POST");
        assert_eq!(reply.status, 200);
        reply
            .read_until("the start of the answer", |held| {
                open_event(held, 64 * 1024).is_some()
            })
            .await;
        open_gate(&gate);
        // What went out of it is ended as an event of its own (not JSON: a client drops it),
        // and the request gets the over-limit error under its id; then the stream ends.
        let cut = reply.event().await.expect("the event cut short");
        assert!(
            cut.len() <= (1 << 20) + 16 && serde_json::from_str::<Value>(&cut).is_err(),
            "{} bytes",
            cut.len()
        );
        let refused = reply.message().await.expect("the error");
        assert_eq!(refused["id"], "big-2", "{refused}");
        assert_eq!(refused["error"]["code"], -32603, "{refused}");
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
