//! A real `redis-server` for the shared store's unit tests, on a free loopback port
//! (scripts/setup-interop installs it).

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` child, killed when dropped (also when the test fails).
pub(crate) struct Server {
    child: Child,
    port: u16,
    /// `redis://127.0.0.1:PORT/0`.
    pub(crate) url: String,
}

impl Server {
    /// Starts one; panics (failing the test) when it cannot or does not listen in time.
    pub(crate) async fn start() -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or(0);
        assert_ne!(port, 0, "no free port");
        let server = Self {
            child: spawn(port),
            port,
            url: format!("redis://127.0.0.1:{port}/0"),
        };
        listening(port).await;
        server
    }

    /// Kills it now (a store that went away).
    pub(crate) fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts a fresh one (no persistence: empty) on the same port.
    pub(crate) async fn restart(&mut self) {
        self.stop();
        self.child = spawn(self.port);
        listening(self.port).await;
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn spawn(port: u16) -> Child {
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    match child {
        Ok(child) => child,
        Err(err) => panic!("redis-server could not start (is it installed?): {err}"),
    }
}

/// Waits until it accepts connections (bounded: a server that never does fails the test).
async fn listening(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "redis-server did not listen");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
