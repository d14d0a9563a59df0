//! Cut-through on stdio: `mcpctl proxy` forwards an unhooked large answer
//! while it arrives. The real binary, a client on pipes that reads raw bytes, and the scripted
//! upstream (`tests/fixtures/scripted_upstream.py`), whose `big_paused` writes half of a
//! multi-MB answer line and then waits, mid-line, until the test opens and closes a FIFO.
//!
//! Without cut-through the proxy holds the half line until its end, so the client sees none of
//! it and the test fails at its bound; with it the client reads the first megabyte while the
//! upstream is still paused. Nothing waits by sleeping: each wait is for an event, with a bound.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use serde_json::{Value, json};

#[path = "support/process.rs"]
mod process;
#[path = "support/scratch.rs"]
mod scratch;
use scratch::{Scratch, open_gate};

/// How long any one expected event may take before a test fails.
const WAIT: Duration = Duration::from_secs(20);

/// The size of the answer's text: 4 MB, written in two halves.
const SIZE: usize = 4_000_000;

/// `mcpctl proxy ARGS -- python3 scripted_upstream.py`, its stdout read as raw bytes by a
/// thread (so the test sees a line before its end).
struct Proxy {
    child: Child,
    stdin: Option<ChildStdin>,
    bytes: Receiver<Vec<u8>>,
    /// Bytes received and not yet taken.
    held: Vec<u8>,
    stderr: Arc<Mutex<String>>,
}

impl Proxy {
    fn start(args: &[&str]) -> Self {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/scripted_upstream.py");
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcpctl"))
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
            .stderr(Stdio::piped())
            .spawn()
            .expect("mcpctl starts");
        let mut stdout = child.stdout.take().expect("stdout is piped");
        let (tx, bytes) = channel();
        thread::spawn(move || {
            let mut chunk = vec![0; 64 * 1024];
            while let Ok(n) = stdout.read(&mut chunk) {
                if n == 0 || tx.send(chunk[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        let stderr_pipe = child.stderr.take().expect("stderr is piped");
        let (stderr, _) = process::collect_lines(stderr_pipe);
        Self {
            stdin: child.stdin.take(),
            child,
            bytes,
            held: Vec::new(),
            stderr,
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .expect("write to mcpctl");
        stdin.flush().expect("flush to mcpctl");
    }

    /// Waits (at most `WAIT` for each read) until `enough` says the bytes held are enough.
    fn read_until(&mut self, what: &str, enough: impl Fn(&[u8]) -> bool) {
        while !enough(&self.held) {
            match self.bytes.recv_timeout(WAIT) {
                Ok(chunk) => self.held.extend_from_slice(&chunk),
                Err(_) => panic!(
                    "{what}: nothing more from mcpctl within {WAIT:?} ({} bytes held, no line \
                     end among them: {}); stderr:\n{}",
                    self.held.len(),
                    !self.held.contains(&b'\n'),
                    self.stderr()
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

    fn recv(&mut self) -> Value {
        let line = self.line();
        serde_json::from_str(&line).unwrap_or_else(|err| panic!("not JSON ({err}): {line:.200}"))
    }

    fn request(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let message = self.recv();
            if message.get("method").is_none() && message["id"] == id {
                return message;
            }
        }
    }

    fn initialize(&mut self) {
        let answer = self.request(
            json!(0),
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "cut-through", "version": "1"}}),
        );
        assert!(answer.get("result").is_some(), "{answer}");
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }
}

impl Drop for Proxy {
    /// SIGKILL to the whole process group (the upstream may be paused on its gate).
    fn drop(&mut self) {
        process::kill_group(self.child.id());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `held` has at least `n` bytes and no line end: a line still arriving.
fn mid_line(held: &[u8], n: usize) -> bool {
    held.len() >= n && !held.contains(&b'\n')
}

#[test]
fn a_large_answer_reaches_the_client_while_the_upstream_is_still_writing_it() {
    let scratch = Scratch::new("mcpctl-cut-through");
    let gate = scratch.fifo("gate");
    let mut proxy = Proxy::start(&[]);
    proxy.initialize();
    proxy.send(
        &json!({"jsonrpc": "2.0", "id": "big-1", "method": "big_paused",
                       "params": {"size": SIZE, "gate": gate}}),
    );
    // The upstream has written half of the line and waits on the gate: a megabyte of it is
    // already here, without its end.
    proxy.read_until("the first megabyte of the answer", |held| {
        mid_line(held, 1 << 20)
    });
    let head = String::from_utf8_lossy(&proxy.held[..64]).into_owned();
    assert!(
        head.starts_with(r#"{"jsonrpc" : "2.0", "id" : "big-1", "result" : {"text" : "xxx"#),
        "the head goes out with the client's id and the upstream's bytes: {head}"
    );
    open_gate(&gate);
    let answer = proxy.recv();
    assert_eq!(answer["id"], "big-1");
    assert_eq!(answer["result"]["text"].as_str().map(str::len), Some(SIZE));
    assert_eq!(answer["x-extra"]["kept"], true, "nothing is normalised");
    // The session goes on; a small answer and a large unpaused one come whole.
    let echo = proxy.request(json!(2), "custom/echo", json!({"still": "here"}));
    assert_eq!(echo["result"]["echo"]["still"], "here");
    let big = proxy.request(json!(3), "big", json!({"size": SIZE}));
    assert_eq!(big["result"]["text"].as_str().map(str::len), Some(SIZE));
}

#[test]
fn an_answer_cut_through_that_goes_past_the_limit_is_ended_and_its_request_fails() {
    let scratch = Scratch::new("mcpctl-cut-through");
    let gate = scratch.fifo("gate");
    let mut proxy = Proxy::start(&["--max-message-bytes", "1048576"]);
    proxy.initialize();
    proxy.send(
        &json!({"jsonrpc": "2.0", "id": "big-2", "method": "big_paused",
                       "params": {"size": SIZE, "gate": gate}}),
    );
    proxy.read_until("the start of the answer", |held| mid_line(held, 64 * 1024));
    open_gate(&gate);
    // What went out of it is ended as a line of its own (not JSON: the client drops it), and
    // the request gets the over-limit error under its id. The limit counts the upstream's
    // bytes; the client's id is a few bytes longer than the proxy's.
    let cut = proxy.line();
    assert!(
        cut.len() <= (1 << 20) + 16 && serde_json::from_str::<Value>(&cut).is_err(),
        "{} bytes",
        cut.len()
    );
    let refused = proxy.recv();
    assert_eq!(refused["id"], "big-2", "{refused}");
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("over the proxy's limit of 1048576 bytes"),
        "{message}"
    );
    let echo = proxy.request(json!(2), "custom/echo", json!({"still": "here"}));
    assert_eq!(echo["result"]["echo"]["still"], "here");
}
