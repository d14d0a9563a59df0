//! What tests need from the processes they start: their stderr collected, their process group
//! stopped, their memory read.

#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;

/// Collects everything `pipe` carries, line by line, in a thread; returns the text so far (shared
/// with the thread) and the thread, which ends at end-of-file.
pub fn collect_lines(
    pipe: impl Read + Send + 'static,
) -> (Arc<Mutex<String>>, thread::JoinHandle<()>) {
    let text = Arc::new(Mutex::new(String::new()));
    let sink = text.clone();
    let reader = thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            if let Ok(mut all) = sink.lock() {
                all.push_str(&line);
                all.push('\n');
            }
        }
    });
    (text, reader)
}

/// SIGKILL to every process in the group `pgid`.
pub fn kill_group(pgid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .stderr(Stdio::null())
        .status();
}

/// A `/proc/PID/status` figure in KiB (VmRSS, VmHWM).
pub fn proc_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} for process {pid}"))
}

/// Reads the stderr of `mcpctl serve` in a thread: the address of its `listening on http://`
/// line (`127.0.0.1:PORT`) is sent on the returned channel, every other line echoed to the
/// test's stderr.
pub fn listening_address(stderr: impl Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if let Some(url) = line.strip_prefix("listening on http://") {
                let _ = tx.send(url.trim_end_matches("/mcp").to_owned());
            } else {
                eprintln!("mcpctl: {line}");
            }
        }
    });
    rx
}
