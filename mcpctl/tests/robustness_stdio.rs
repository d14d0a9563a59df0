//! Robustness of `mcpctl proxy` on stdio: the real binary, a client over pipes
//! that reads only when the test says so (so it can also stop reading), and the scripted
//! upstream (`tests/fixtures/scripted_upstream.py`) made to die, hang, flood and write garbage.
//!
//! Nothing here sleeps to wait: a test waits for the event itself (a line, a process exit seen
//! as end-of-file on a FIFO the upstream holds open) with a bound.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[path = "support/process.rs"]
mod process;
#[path = "support/scratch.rs"]
mod scratch;
use process::{kill_group, proc_kib};
use scratch::Scratch;

/// How long any one expected event may take before a test fails.
const WAIT: Duration = Duration::from_secs(20);

/// Everything written to a FIFO until its last writer closes it, read in a thread that is
/// already waiting when this returns.
fn read_fifo(path: &Path) -> Receiver<String> {
    let (tx, rx) = channel();
    let path = path.to_owned();
    thread::spawn(move || {
        // Blocks until a writer opens it; a writer that opens it without blocking (the
        // upstream's lifeline) finds this reader waiting.
        let Ok(mut fifo) = std::fs::File::open(&path) else {
            return;
        };
        let mut text = String::new();
        let _ = fifo.read_to_string(&mut text);
        let _ = tx.send(text);
    });
    rx
}

/// A FIFO every upstream started with `SCRIPTED_LIFELINE` holds open: end-of-file on it means
/// each of them has exited.
struct Lifeline {
    path: PathBuf,
    ended: Receiver<String>,
}

impl Lifeline {
    fn new(scratch: &Scratch) -> Self {
        let path = scratch.fifo("lifeline");
        let ended = read_fifo(&path);
        Self { path, ended }
    }

    /// Whether every upstream holding it exited within `bound`.
    fn wait(&self, bound: Duration) -> bool {
        self.ended.recv_timeout(bound).is_ok()
    }
}

/// `mcpctl proxy ARGS -- python3 scripted_upstream.py`. Its stdout is read only as the test
/// takes messages (a few lines ahead at most): a test that takes none is a client that does not
/// read.
struct Proxy {
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    lines: Option<Receiver<String>>,
    stderr: Arc<Mutex<String>>,
    /// Messages received while waiting for something else.
    inbox: Vec<Value>,
}

impl Proxy {
    fn start(args: &[&str], env: &[(&str, &Path)]) -> Self {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/scripted_upstream.py");
        let mut command = Command::new(env!("CARGO_BIN_EXE_mcpctl"));
        command
            .arg("proxy")
            .args(args)
            .arg("--")
            .args(["python3", "-u"])
            .arg(script)
            .env_remove("MCPCTL_LOG")
            // Its own process group, which the upstream joins: `Drop` stops both at once.
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("mcpctl starts");
        let stderr_pipe = child.stderr.take().expect("stderr is piped");
        let (stderr, _) = process::collect_lines(stderr_pipe);
        Self {
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            child: Some(child),
            lines: None,
            stderr,
            inbox: Vec::new(),
        }
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// The proxy's stdout, line by line, read only as lines are taken.
    fn read(&mut self) -> &Receiver<String> {
        if self.lines.is_none() {
            let stdout = self.stdout.take().expect("stdout is piped");
            let (tx, rx) = sync_channel(16);
            thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
            self.lines = Some(rx);
        }
        self.lines.as_ref().expect("reading")
    }

    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes)?;
        stdin.flush()
    }

    fn send(&mut self, message: &Value) {
        let line = format!("{message}\n");
        self.write(line.as_bytes()).expect("write to mcpctl");
    }

    fn recv(&mut self) -> Value {
        let line = match self.read().recv_timeout(WAIT) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => {
                panic!(
                    "nothing from mcpctl within {WAIT:?}; stderr:\n{}",
                    self.stderr()
                )
            }
            Err(RecvTimeoutError::Disconnected) => {
                panic!("mcpctl closed stdout; stderr:\n{}", self.stderr())
            }
        };
        serde_json::from_str(&line).unwrap_or_else(|err| panic!("not JSON ({err}): {line}"))
    }

    /// The response to `id`; anything else that comes first is kept in `inbox`.
    fn response(&mut self, id: &Value) -> Value {
        if let Some(at) = self
            .inbox
            .iter()
            .position(|m| m.get("method").is_none() && m.get("id") == Some(id))
        {
            return self.inbox.remove(at);
        }
        loop {
            let message = self.recv();
            if message.get("method").is_none() && message.get("id") == Some(id) {
                return message;
            }
            self.inbox.push(message);
        }
    }

    fn request(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.response(&id)
    }

    fn initialize(&mut self) {
        let answer = self.request(
            json!(0),
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "robustness", "version": "1"}}),
        );
        assert!(answer.get("result").is_some(), "{answer}");
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }

    fn stderr(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Waits (at most `WAIT`) for the proxy to exit.
    fn wait_exit(mut self) -> (ExitStatus, String) {
        drop(self.stdin.take());
        let (tx, exited) = channel();
        let mut child = self.child.take().expect("mcpctl is running");
        let stderr = self.stderr.clone();
        thread::spawn(move || {
            let _ = tx.send(child.wait());
        });
        match exited.recv_timeout(WAIT) {
            Ok(status) => (
                status.expect("wait for mcpctl"),
                stderr.lock().map(|s| s.clone()).unwrap_or_default(),
            ),
            Err(_) => panic!("mcpctl did not exit within {WAIT:?}"),
        }
    }
}

impl Drop for Proxy {
    /// Stops the proxy and whatever it started: SIGKILL to the whole process group, so an
    /// upstream told to `stall` does not sleep on with no parent (the proxy's own
    /// parent-death signal covers it too; this does not rely on it).
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            kill_group(child.id());
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn code(message: &Value) -> i64 {
    message["error"]["code"].as_i64().unwrap_or_default()
}

fn error_message(message: &Value) -> &str {
    message["error"]["message"].as_str().unwrap_or_default()
}

#[test]
fn an_upstream_killed_mid_call_fails_the_call_within_a_second_and_the_next_request_restarts_it() {
    let mut proxy = Proxy::start(&[], &[]);
    proxy.initialize();
    proxy.send(&json!({"jsonrpc": "2.0", "id": "pending", "method": "slow", "params": {}}));
    // The upstream answers in order: once `state` is answered, `slow` is in its hands.
    let before = proxy.request(json!(1), "state", json!({}))["result"].clone();
    let pid = before["pid"].as_u64().expect("the upstream's pid");

    let killed = Instant::now();
    let kill = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(kill.success());
    let failed = proxy.response(&json!("pending"));
    let latency = killed.elapsed();
    eprintln!("upstream killed mid-call: the client had its error after {latency:?}");
    assert_eq!(code(&failed), -32001, "{failed}");
    assert!(
        error_message(&failed).contains("was killed by signal 9"),
        "{failed}"
    );
    assert!(
        latency < Duration::from_secs(1),
        "the error took {latency:?}"
    );

    let after = proxy.request(json!(2), "state", json!({}))["result"].clone();
    assert_ne!(after["pid"], before["pid"], "a new upstream process");
    assert_eq!(after["initializes"], 1, "initialize replayed: {after}");
    let echo = proxy.request(json!(3), "custom/echo", json!({"still": "here"}));
    assert_eq!(echo["result"]["echo"]["still"], "here");
}

#[test]
fn a_flooding_upstream_is_held_back_until_the_client_reads_and_nothing_is_lost() {
    let scratch = Scratch::new("mcpctl-robustness");
    let mut proxy = Proxy::start(&[], &[]);
    proxy.initialize();
    let idle = proxy_kib(&proxy);
    // 100,000 log messages of about 1 KiB (107 MB) while the client reads nothing: the proxy
    // holds at most its client queue (16 MiB by default), then stops reading the upstream,
    // whose writes then block.
    let report = scratch.fifo("report");
    let reported = read_fifo(&report);
    let count = 100_000;
    proxy.send(&json!({"jsonrpc": "2.0", "id": "flood", "method": "flood",
        "params": {"count": count, "size": 1000, "report": report}}));
    let line = reported
        .recv_timeout(WAIT)
        .expect("the upstream reports blocking or finishing");
    let written: u64 = line
        .trim()
        .strip_prefix("blocked ")
        .unwrap_or_else(|| panic!("the upstream was never held back: {line}"))
        .parse()
        .expect("a byte count");
    let held = proc_kib(proxy.pid(), "VmHWM");
    eprintln!(
        "flood: the upstream blocked after {} MiB; proxy RSS idle {} MiB, peak {} MiB",
        written >> 20,
        idle >> 10,
        held >> 10
    );
    assert!(
        written < 18 << 20,
        "the upstream wrote {written} bytes before the proxy held it back"
    );

    // Now the client reads: every message arrives, in order, then the answer.
    for n in 0..count {
        let message = proxy.recv();
        assert_eq!(message["method"], "notifications/message", "{message}");
        assert_eq!(message["params"]["data"]["n"], n, "lost or reordered");
    }
    let answer = proxy.response(&json!("flood"));
    assert_eq!(answer["result"]["sent"], count);
    let peak = proc_kib(proxy.pid(), "VmHWM");
    eprintln!(
        "flood: proxy peak RSS over the whole flood {} MiB",
        peak >> 10
    );
    assert!(
        peak < idle + (48 << 10),
        "the proxy held {} MiB for a 107 MB flood",
        (peak - idle) >> 10
    );
    let echo = proxy.request(json!(2), "custom/echo", json!({"after": "flood"}));
    assert_eq!(echo["result"]["echo"]["after"], "flood");
}

/// The proxy's resident memory in KiB.
fn proxy_kib(proxy: &Proxy) -> u64 {
    proc_kib(proxy.pid(), "VmRSS")
}

#[test]
fn a_garbage_flood_is_dropped_with_few_warnings_and_the_session_goes_on() {
    let mut proxy = Proxy::start(&[], &[]);
    proxy.initialize();
    let answer = proxy.request(
        json!(1),
        "flood",
        json!({"count": 100_000, "size": 50, "kind": "garbage"}),
    );
    assert_eq!(answer["result"]["sent"], 100_000, "{answer}");
    assert!(proxy.inbox.is_empty(), "garbage reached the client");
    let echo = proxy.request(json!(2), "custom/echo", json!({"still": "here"}));
    assert_eq!(echo["result"]["echo"]["still"], "here");
    let (status, stderr) = proxy.wait_exit();
    assert!(status.success(), "{status:?}");
    let warnings = stderr
        .matches("dropped a malformed message from the upstream")
        .count();
    assert!(
        (1..=30).contains(&warnings),
        "{warnings} warnings for 100,000 lines"
    );
}

#[test]
fn an_answer_over_the_size_limit_fails_its_request_at_once() {
    let mut proxy = Proxy::start(&["--max-message-bytes", "65536"], &[]);
    proxy.initialize();
    let started = Instant::now();
    let answer = proxy.request(json!("big"), "big", json!({"size": 1_000_000}));
    assert_eq!(code(&answer), -32603, "{answer}");
    assert!(error_message(&answer).contains("over the proxy's limit of 65536 bytes"));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "not the timeout"
    );
    let fits = proxy.request(json!(2), "big", json!({"size": 1000}));
    assert_eq!(fits["result"]["text"].as_str().map(str::len), Some(1000));
}

#[test]
fn an_upstream_that_stops_reading_gets_no_more_than_its_queue_and_requests_are_refused() {
    let mut proxy = Proxy::start(&[], &[]);
    proxy.initialize();
    proxy.send(&json!({"jsonrpc": "2.0", "id": "stall", "method": "stall", "params": {}}));
    // 1 MiB requests the upstream never reads: 16 MiB wait for it (besides what its pipe
    // holds), then the proxy refuses the rest instead of queueing them.
    let pad = "z".repeat(1 << 20);
    for id in 1..=24 {
        proxy.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "custom/echo", "params": {"pad": pad}}),
        );
    }
    let refused = proxy.recv();
    assert_eq!(code(&refused), -32003, "{refused}");
    let first = refused["id"].as_u64().expect("a numeric id");
    assert!(
        (16..=18).contains(&first),
        "refused from request {first} on"
    );
    assert!(
        error_message(&refused).contains("is not reading its input"),
        "{refused}"
    );
    for id in first + 1..=24 {
        let next = proxy.recv();
        assert_eq!(
            (next["id"].as_u64(), code(&next)),
            (Some(id), -32003),
            "{next}"
        );
    }
}

#[test]
fn a_proxy_killed_with_sigkill_takes_its_upstream_with_it() {
    let scratch = Scratch::new("mcpctl-robustness");
    let lifeline = Lifeline::new(&scratch);
    let log = scratch.path("upstream.log");
    let mut proxy = Proxy::start(
        &[],
        &[
            ("SCRIPTED_LIFELINE", &lifeline.path),
            ("SCRIPTED_LOG", &log),
        ],
    );
    proxy.initialize();
    // An upstream busy for an hour, not reading its input (so not seeing it close): only the
    // kernel's parent-death signal can stop it, since SIGKILL gives the proxy no chance to.
    proxy.send(&json!({"jsonrpc": "2.0", "id": "stall", "method": "stall", "params": {}}));
    let deadline = Instant::now() + WAIT;
    while !std::fs::read_to_string(&log).is_ok_and(|seen| seen.contains("\"stall\"")) {
        assert!(Instant::now() < deadline, "the upstream never got `stall`");
        thread::sleep(Duration::from_millis(10));
    }
    let kill = Command::new("kill")
        .args(["-KILL", &proxy.pid().to_string()])
        .status()
        .expect("kill runs");
    assert!(kill.success());
    assert!(
        lifeline.wait(WAIT),
        "the upstream outlived a proxy killed with SIGKILL"
    );
}

#[test]
fn a_client_leaving_mid_call_cancels_it_upstream_and_stops_the_upstream() {
    let scratch = Scratch::new("mcpctl-robustness");
    let lifeline = Lifeline::new(&scratch);
    let log = scratch.path("upstream.log");
    let mut proxy = Proxy::start(
        &[],
        &[
            ("SCRIPTED_LIFELINE", &lifeline.path),
            ("SCRIPTED_LOG", &log),
        ],
    );
    proxy.initialize();
    proxy.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "slow", "params": {}}));
    proxy.request(json!(8), "state", json!({}));

    let (status, _) = proxy.wait_exit();
    assert!(status.success(), "{status:?}");
    assert!(lifeline.wait(WAIT), "the upstream outlived the session");
    let log = std::fs::read_to_string(&log).expect("the upstream's log");
    let seen: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    let slow_id = seen
        .iter()
        .find(|m| m["method"] == "slow")
        .map(|m| m["id"].clone())
        .expect("the upstream got `slow`");
    assert!(
        seen.iter()
            .any(|m| m["method"] == "notifications/cancelled" && m["requestId"] == slow_id),
        "no cancellation of `slow` (upstream id {slow_id}): {log}"
    );
}

#[test]
fn a_client_that_never_reads_ends_its_session_with_an_error() {
    // The proxy answers these lines itself; a client that sends them and never reads lets the
    // answers pile up. Past its client queue plus the largest message (1 MiB each here) the
    // session ends.
    let mut proxy = Proxy::start(
        &[
            "--max-message-bytes",
            "1048576",
            "--client-queue-bytes",
            "1048576",
        ],
        &[],
    );
    let batch = "x\n".repeat(10_000);
    let started = Instant::now();
    for _ in 0..100 {
        if proxy.write(batch.as_bytes()).is_err() {
            break; // the proxy has gone
        }
    }
    let (status, stderr) = proxy.wait_exit();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("client stopped reading") && stderr.contains("the session ended"),
        "{stderr}"
    );
    assert!(started.elapsed() < WAIT);
}

#[test]
fn bad_input_gets_the_documented_error_and_the_session_goes_on() {
    let mut proxy = Proxy::start(&[], &[]);
    // Before initialize the proxy is transparent: the upstream answers (this one does).
    let early = proxy.request(json!("early"), "tools/list", json!({}));
    assert_eq!(early["result"]["tools"][0]["name"], "t", "{early}");
    proxy.initialize();

    // Not UTF-8.
    proxy
        .write(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\xff\"}\n")
        .unwrap();
    let not_utf8 = proxy.recv();
    assert_eq!(
        (code(&not_utf8), not_utf8["id"].clone()),
        (-32700, Value::Null)
    );
    assert!(error_message(&not_utf8).contains("not UTF-8"), "{not_utf8}");

    // Wrong types in the envelope: refused by the proxy under the id when it can read it.
    for (line, id) in [
        (r#"{"jsonrpc":"1.0","id":2,"method":"x"}"#, json!(2)),
        (r#"{"jsonrpc":"2.0","id":true,"method":"x"}"#, Value::Null),
        (r#"{"jsonrpc":"2.0","id":3,"method":["x"]}"#, json!(3)),
        (r#""just a string""#, Value::Null),
        (r#"[{"jsonrpc":"2.0","id":4,"method":"x"}]"#, Value::Null),
    ] {
        proxy.write(format!("{line}\n").as_bytes()).unwrap();
        let refused = proxy.recv();
        assert_eq!(code(&refused), -32600, "{line}: {refused}");
        assert_eq!(refused["id"], id, "{line}: {refused}");
    }
    // Payload types are the server's business: passed through as they are.
    let odd = proxy.request(json!(5), "custom/echo", json!(5));
    assert_eq!(odd["result"]["echo"], 5, "{odd}");
    // Unknown methods reach the upstream, whose answer is relayed.
    let unknown = proxy.request(json!(6), "no/such/method", json!({}));
    assert_eq!(code(&unknown), -32601, "{unknown}");
    assert_eq!(unknown["error"]["data"]["why"], "scripted");

    // Two requests with one id in flight: the second is refused, the first is unharmed.
    proxy.send(&json!({"jsonrpc": "2.0", "id": "dup", "method": "slow", "params": {}}));
    let second = proxy.request(json!("dup"), "custom/echo", json!({}));
    assert_eq!(code(&second), -32600, "{second}");
    assert!(
        error_message(&second).contains("already in use"),
        "{second}"
    );
    // Once the first is done (cancelled here), the id is free again.
    proxy.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "dup"}}));
    let reused = proxy.request(json!("dup"), "custom/echo", json!({"again": true}));
    assert_eq!(reused["result"]["echo"]["again"], true, "{reused}");

    let echo = proxy.request(json!(9), "custom/echo", json!({"still": "here"}));
    assert_eq!(echo["result"]["echo"]["still"], "here");
}

#[test]
fn duplicate_ids_of_hooked_requests_are_refused_too() {
    // paginate hooks tools/call: the call runs in the model chain while it waits.
    let mut proxy = Proxy::start(&["--model", "paginate"], &[]);
    proxy.initialize();
    proxy.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "hang"}}),
    );
    let second = proxy.request(json!(1), "tools/call", json!({"name": "t"}));
    assert_eq!(code(&second), -32600, "{second}");
    assert!(
        error_message(&second).contains("already in use"),
        "{second}"
    );
    let other = proxy.request(json!(2), "tools/call", json!({"name": "t"}));
    assert_eq!(other["result"]["content"][0]["text"], "called t", "{other}");
}

#[test]
fn a_huge_message_is_refused_under_its_id_without_being_held() {
    let mut proxy = Proxy::start(&["--max-message-bytes", "1048576"], &[]);
    proxy.initialize();
    let before = proc_kib(proxy.pid(), "VmHWM");
    // 64 MB in one line, written while the proxy reads it.
    let head = br#"{"jsonrpc":"2.0","id":"huge","method":"custom/echo","params":{"pad":""#;
    proxy.write(head).unwrap();
    let chunk = vec![b'y'; 1 << 20];
    for _ in 0..64 {
        proxy.write(&chunk).unwrap();
    }
    proxy.write(b"\"}}\n").unwrap();
    let refused = proxy.response(&json!("huge"));
    assert_eq!(code(&refused), -32600, "{refused}");
    assert!(
        error_message(&refused).contains("over the proxy's limit of 1048576 bytes"),
        "{refused}"
    );
    let after = proc_kib(proxy.pid(), "VmHWM");
    eprintln!(
        "a 64 MiB line against a 1 MiB limit: proxy peak RSS {} -> {} MiB",
        before >> 10,
        after >> 10
    );
    assert!(
        after < before + (8 << 10),
        "the proxy grew by {} MiB reading a line it refused",
        (after - before) >> 10
    );
    let echo = proxy.request(json!(2), "custom/echo", json!({"still": "here"}));
    assert_eq!(echo["result"]["echo"]["still"], "here");
}
