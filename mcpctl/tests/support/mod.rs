//! A test client that drives the real `mcpctl` binary over its stdin and stdout.

#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub mod process;
pub mod scratch;

/// How long any single expected message may take before a test fails.
pub const WAIT: Duration = Duration::from_secs(20);

/// The scripted upstream server used by the focused tests.
pub fn scripted_upstream() -> Vec<String> {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/scripted_upstream.py");
    vec![
        "python3".to_owned(),
        "-u".to_owned(),
        script.display().to_string(),
    ]
}

/// An MCP client speaking to `mcpctl proxy` over pipes.
pub struct Client {
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
    stderr_reader: Option<thread::JoinHandle<()>>,
    /// Notifications and requests received while waiting for responses.
    pub inbox: Vec<Value>,
}

impl Client {
    /// Starts `mcpctl proxy ARGS -- UPSTREAM...` with extra environment variables.
    pub fn start(args: &[&str], upstream: &[String], env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_mcpctl"));
        command
            .arg("proxy")
            .args(args)
            .arg("--")
            .args(upstream)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("mcpctl should start");
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr_pipe = child.stderr.take().expect("stderr is piped");
        let (tx, lines) = channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let (stderr, stderr_reader) = process::collect_lines(stderr_pipe);
        Self {
            stdin: child.stdin.take(),
            child: Some(child),
            lines,
            stderr,
            stderr_reader: Some(stderr_reader),
            inbox: Vec::new(),
        }
    }

    /// Starts the proxy in front of the scripted upstream.
    pub fn scripted(args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::start(args, &scripted_upstream(), env)
    }

    /// Writes one raw line.
    pub fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{line}").expect("write to mcpctl");
        stdin.flush().expect("flush to mcpctl");
    }

    /// Writes one message.
    pub fn send(&mut self, message: &Value) {
        self.send_line(&message.to_string());
    }

    /// The next raw line from the proxy.
    pub fn recv_line(&mut self) -> String {
        match self.lines.recv_timeout(WAIT) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => panic!(
                "no message from mcpctl within {WAIT:?}; stderr:\n{}",
                self.stderr()
            ),
            Err(RecvTimeoutError::Disconnected) => {
                panic!("mcpctl closed stdout; stderr:\n{}", self.stderr())
            }
        }
    }

    /// The next line, if one arrives within `wait`.
    pub fn try_recv_line(&mut self, wait: Duration) -> Option<String> {
        self.lines.recv_timeout(wait).ok()
    }

    /// The next message, parsed. Every line on stdout must be a JSON-RPC message.
    pub fn recv(&mut self) -> Value {
        let line = self.recv_line();
        let value: Value = serde_json::from_str(&line)
            .unwrap_or_else(|err| panic!("stdout carried a line that is not JSON ({err}): {line}"));
        assert_eq!(value["jsonrpc"], "2.0", "not JSON-RPC: {line}");
        value
    }

    /// Waits for the response with `id`, keeping everything else in `inbox`. Returns the raw line.
    pub fn response_line(&mut self, id: &Value) -> String {
        if let Some(at) = self
            .inbox
            .iter()
            .position(|m| m.get("method").is_none() && m.get("id") == Some(id))
        {
            return self.inbox.remove(at).to_string();
        }
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            let line = self.recv_line();
            let value: Value = serde_json::from_str(&line).expect("JSON line");
            if value.get("method").is_none() && value.get("id") == Some(id) {
                return line;
            }
            self.inbox.push(value);
        }
        panic!("no response to id {id}");
    }

    /// Sends a request and waits for its response.
    pub fn request(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let line = self.response_line(&id);
        serde_json::from_str(&line).expect("JSON line")
    }

    /// Sends a notification.
    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// The handshake-era handshake: initialize, then notifications/initialized.
    pub fn initialize(&mut self) -> Value {
        let result = self.request(
            json!(0),
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {"roots": {}}, "clientInfo": {"name": "test", "version": "1"}}),
        );
        self.notify("notifications/initialized", json!({}));
        result
    }

    /// Everything the proxy wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Waits for the response with `id` to a request sent earlier.
    pub fn request_response(&mut self, id: Value) -> Value {
        let line = self.response_line(&id);
        serde_json::from_str(&line).expect("JSON line")
    }

    /// Closes stdin, waits for the proxy to exit, and returns its status and all its stderr.
    pub fn close_with_stderr(mut self) -> (ExitStatus, String) {
        let reader = self.stderr_reader.take();
        let stderr = self.stderr.clone();
        let status = self.close();
        if let Some(reader) = reader {
            let _ = reader.join();
        }
        let text = stderr.lock().map(|s| s.clone()).unwrap_or_default();
        (status, text)
    }

    /// Closes stdin and waits for the proxy to exit.
    pub fn close(mut self) -> ExitStatus {
        drop(self.stdin.take());
        let mut child = self.child.take().expect("mcpctl is running");
        let (tx, exited) = channel();
        thread::spawn(move || {
            let status = child.wait();
            let _ = tx.send(status);
            child
        });
        match exited.recv_timeout(WAIT) {
            Ok(status) => status.expect("wait for mcpctl"),
            Err(_) => panic!("mcpctl did not exit within {WAIT:?} after stdin closed"),
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
