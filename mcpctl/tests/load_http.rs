//! Load through `mcpctl serve`: 100 concurrent HTTP sessions, each with its own
//! upstream (the scripted upstream, a real child process per session), 200 tool calls each
//! over two keep-alive connections. Every reply must carry its request's id and the session's
//! and call's own token (nothing lost, nothing misrouted), each session's upstream must have
//! seen exactly its own 200 calls (no state across sessions), and once the sessions are
//! deleted and their upstreams have exited, the proxy's resident memory must be back at its
//! idle level: three waves of 100 sessions, the memory after the third no higher than before
//! it (the allocator keeps freed pages for the next burst, so "idle" is the warm proxy's
//! figure; the cold one is printed too). Prints the figures.
//!
//! Its own test binary, so nothing else runs beside it while it measures.

#[path = "../../mcp-middleware/tests/support/http_client.rs"]
mod http_client;

use std::io::Read;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

#[path = "support/process.rs"]
mod process;
use process::proc_kib;

use http_client::{Conn, WAIT, request, start_session};
use serde_json::{Value, json};

const SESSIONS: usize = 100;
const CALLS: usize = 200;
/// Connections each session's calls are spread over (calls on one go one after another).
const CONNECTIONS: usize = 2;

/// `mcpctl serve` in front of the scripted upstream, killed when dropped.
struct Served {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(lifeline: &std::path::Path) -> Served {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/scripted_upstream.py");
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcpctl"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--max-sessions",
            "256",
            // A hundred anonymous sessions from one address: past the default quota of 32.
            "--max-sessions-per-principal",
            "256",
            // And two connections each: past the default of 64 connections per address.
            "--max-connections-per-address",
            "1024",
            "--",
            "python3",
            "-u",
        ])
        .arg(script)
        .env_remove("MCPCTL_LOG")
        .env("SCRIPTED_LIFELINE", lifeline)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mcpctl serve starts");
    let stderr = child.stderr.take().expect("stderr is piped");
    let rx = process::listening_address(stderr);
    let authority = rx.recv_timeout(WAIT).expect("mcpctl serve listens");
    let addr = authority.parse().expect("a socket address");
    Served { child, addr }
}

/// Opens session `s` (initialize, which starts its upstream): its id.
async fn open_session(addr: SocketAddr, s: usize) -> String {
    let mut conn = Conn::connect(addr).await;
    start_session(&mut conn, &format!("load-{s}")).await
}

/// One session's run: its calls, checked one by one; then its upstream's record of them.
async fn run_session(addr: SocketAddr, s: usize, session: String) -> Value {
    let mut lanes = Vec::new();
    for lane in 0..CONNECTIONS {
        let session = session.clone();
        lanes.push(tokio::spawn(async move {
            let mut conn = Conn::connect(addr).await;
            for call in (lane..CALLS).step_by(CONNECTIONS) {
                let id = (s * CALLS + call) as u64 + 1;
                let arguments =
                    json!({"session": s, "call": call, "token": format!("{s}:{call}:{id}")});
                let body = request(
                    id,
                    "tools/call",
                    json!({"name": "echo_args", "arguments": arguments}),
                );
                let reply = conn.post(Some(&session), &body).await.expect("POST");
                assert_eq!(reply.status, 200, "session {s} call {call}");
                let messages = reply.messages().await;
                let answer = messages.last().expect("an answer");
                assert_eq!(answer["id"], id, "misrouted: {answer}");
                let text = answer["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap_or_else(|| panic!("no text: {answer}"));
                let echoed: Value = serde_json::from_str(text).expect("the echo is JSON");
                assert_eq!(
                    echoed, arguments,
                    "session {s} call {call} got another's reply"
                );
            }
        }));
    }
    for lane in lanes {
        lane.await.expect("a lane of calls");
    }
    // A new connection: one kept open since the initialize could sit idle past the front's
    // 30 s wait for the next request on a kept-alive connection, on a loaded machine.
    let mut conn = Conn::connect(addr).await;
    let state = conn
        .post(Some(&session), &request(0, "state", json!({})))
        .await
        .expect("POST")
        .messages()
        .await;
    let state = state.last().expect("state")["result"].clone();
    let deleted = conn
        .send("DELETE", &[("mcp-session-id", &session)], b"")
        .await
        .expect("DELETE");
    assert_eq!(deleted.status, 200);
    drop(deleted.body().await);
    state
}

/// A reader of the lifeline FIFO, waiting before a wave starts: it gets end-of-file once every
/// upstream that opened the FIFO meanwhile has exited.
fn lifeline_reader(fifo: &std::path::Path) -> std::sync::mpsc::Receiver<()> {
    let (exited_tx, exited) = channel();
    let fifo = fifo.to_owned();
    std::thread::spawn(move || {
        if let Ok(mut file) = std::fs::File::open(&fifo) {
            let _ = file.read_to_end(&mut Vec::new());
            let _ = exited_tx.send(());
        }
    });
    exited
}

/// One wave: every session opened at once, then every session's calls at once, each checked;
/// then every upstream gone. Returns how long the sessions took.
///
/// Opening comes first, for all sessions: a hundred upstreams starting while other sessions'
/// calls already fill both CPUs made the last initialize wait past `WAIT` on a loaded machine
/// (CI), and what this test proves is about the calls (nothing lost, nothing misrouted).
async fn wave(addr: SocketAddr, lifeline: &std::path::Path) -> Duration {
    let exited = lifeline_reader(lifeline);
    let started = Instant::now();
    let opening: Vec<_> = (0..SESSIONS)
        .map(|s| tokio::spawn(open_session(addr, s)))
        .collect();
    let mut sessions = Vec::new();
    for open in opening {
        sessions.push(open.await.expect("a session opens"));
    }
    let runs: Vec<_> = sessions
        .into_iter()
        .enumerate()
        .map(|(s, session)| tokio::spawn(run_session(addr, s, session)))
        .collect();
    let mut states = Vec::new();
    for run in runs {
        states.push(run.await.expect("a session"));
    }
    let elapsed = started.elapsed();
    let mut pids = std::collections::HashSet::new();
    for (s, state) in states.iter().enumerate() {
        assert!(
            pids.insert(state["pid"].clone()),
            "two sessions shared an upstream"
        );
        let echoed = state["echoed"].as_array().expect("echoed calls");
        assert_eq!(
            echoed.len(),
            CALLS,
            "session {s}'s upstream saw other calls"
        );
        let mut calls: Vec<u64> = echoed
            .iter()
            .map(|args| {
                assert_eq!(args["session"], s, "session {s}'s upstream saw {args}");
                args["call"].as_u64().expect("a call number")
            })
            .collect();
        calls.sort_unstable();
        assert_eq!(calls, (0..CALLS as u64).collect::<Vec<_>>());
        assert_eq!(state["initializes"], 1);
    }
    // Every session was deleted: its upstream stops.
    let gone = tokio::task::spawn_blocking(move || exited.recv_timeout(WAIT).is_ok())
        .await
        .expect("the lifeline reader");
    assert!(gone, "upstreams outlived their sessions");
    elapsed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_sessions_of_two_hundred_calls_lose_nothing_and_share_nothing() {
    let dir = std::env::temp_dir().join(format!("mcpctl-load-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let lifeline = dir.join("lifeline");
    assert!(
        Command::new("mkfifo")
            .arg(&lifeline)
            .status()
            .expect("mkfifo")
            .success()
    );
    let served = serve(&lifeline);
    let pid = served.child.id();
    let addr = served.addr;
    let cold = proc_kib(pid, "VmRSS");

    // The first waves warm the proxy up: its heap grows to what a hundred sessions need, and
    // the allocator keeps those pages for reuse once they are freed (glibc does not hand
    // freed pages back to the system), settling after a couple of bursts.
    let first = wave(addr, &lifeline).await;
    let after_first = proc_kib(pid, "VmRSS");
    wave(addr, &lifeline).await;
    let warm = proc_kib(pid, "VmRSS");
    // The measured wave: its peak, and what is left once its sessions are gone.
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").expect("reset the peak RSS");
    let last = wave(addr, &lifeline).await;
    let peak = proc_kib(pid, "VmHWM");
    let after = proc_kib(pid, "VmRSS");
    let calls = SESSIONS * CALLS;
    let mib = |kib: u64| kib as f64 / 1024.0;
    eprintln!(
        "load: {SESSIONS} sessions x {CALLS} calls = {calls} calls a wave, in {:.1} s the first \
         time and {:.1} s the third ({:.0} calls/s); proxy RSS cold {:.1} MiB, after one wave \
         {:.1} MiB, after two {:.1} MiB, peak in the third {:.1} MiB, after it {:.1} MiB",
        first.as_secs_f64(),
        last.as_secs_f64(),
        calls as f64 / last.as_secs_f64(),
        mib(cold),
        mib(after_first),
        mib(warm),
        mib(peak),
        mib(after)
    );
    // Nothing of a hundred sessions stays behind (a leak of even 80 KiB a session would show).
    assert!(
        after < warm + 8 * 1024,
        "the proxy kept {:.1} MiB more after the third wave than before it",
        mib(after.saturating_sub(warm))
    );
    drop(served);
    let _ = std::fs::remove_dir_all(&dir);
}
