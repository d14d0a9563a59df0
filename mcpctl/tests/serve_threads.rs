//! `mcpctl serve --threads N`: the real binary in front of the scripted upstream (a
//! child process per session) runs its sessions on N worker threads. Each proxy serves a session
//! and a tool call over HTTP; then the processes' thread counts (`/proc/PID/task`) differ by
//! exactly the difference in N, the only thing that differs between them. `--threads 0` is
//! refused with an error naming the flag.

#[path = "../../mcp-middleware/tests/support/http_client.rs"]
mod http_client;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

#[path = "support/process.rs"]
mod process;

use http_client::{Conn, WAIT, call, start_session};
use serde_json::json;

/// `mcpctl serve --threads N` in front of the scripted upstream, killed when dropped.
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

fn serve(threads: u16) -> Served {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/scripted_upstream.py");
    let child = Command::new(env!("CARGO_BIN_EXE_mcpctl"))
        .args(["serve", "--listen", "127.0.0.1:0", "--model", "passthrough"])
        .args(["--threads", &threads.to_string(), "--", "python3", "-u"])
        .arg(script)
        .env_remove("MCPCTL_LOG")
        .env_remove("TOKIO_WORKER_THREADS")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mcpctl serve starts");
    // Owned before the wait, so a proxy that never listens is still killed.
    let mut served = Served {
        child,
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    let stderr = served.child.stderr.take().expect("stderr is piped");
    let authority = process::listening_address(stderr)
        .recv_timeout(WAIT)
        .expect("mcpctl serve listens");
    served.addr = authority.parse().expect("a socket address");
    served
}

/// Opens a session on `served` and makes one tool call through it to the upstream.
async fn one_call(served: &Served) {
    let mut conn = Conn::connect(served.addr).await;
    let session = start_session(&mut conn, "threads").await;
    let messages = call(
        &mut conn,
        &session,
        2,
        "tools/call",
        json!({"name": "echo_args", "arguments": {"token": "t-1"}}),
    )
    .await;
    let answer = messages.last().expect("an answer");
    assert_eq!(answer["id"], 2, "{answer}");
    assert!(answer.to_string().contains("t-1"), "{answer}");
}

fn threads_of(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("the proxy's threads are listed")
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_runs_its_sessions_on_the_threads_it_is_given() {
    let one = serve(1);
    let four = serve(4);
    one_call(&one).await;
    one_call(&four).await;
    let (pid_one, pid_four) = (one.child.id(), four.child.id());
    assert_eq!(
        threads_of(pid_four),
        threads_of(pid_one) + 3,
        "--threads 4 runs three worker threads more than --threads 1"
    );
}

#[test]
fn zero_threads_is_one_clear_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_mcpctl"))
        .args(["serve", "--listen", "127.0.0.1:0", "--threads", "0"])
        .args(["--", "true"])
        .output()
        .expect("mcpctl runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--threads") && err.contains('0'), "{err}");
}
