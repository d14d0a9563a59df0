//! A `redis-server` for the tests that need a real one: started on a free loopback port,
//! without persistence, waited for until it is ready, and killed when dropped (also when the
//! test fails).

#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

/// A `redis-server` child, killed when dropped (also when the test fails).
pub struct Redis {
    child: std::process::Child,
    /// `redis://127.0.0.1:PORT/0`.
    pub url: String,
}

impl Redis {
    /// Starts one and waits (at most 30 s) until it accepts connections.
    pub async fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let mut child = std::process::Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("redis-server starts (is it installed?)");
        // Ready once it logs so (its log is its stdout); the read ends at EOF if it exits.
        let log = child.stdout.take().expect("redis-server's stdout is piped");
        let redis = Self {
            child,
            url: format!("redis://127.0.0.1:{port}/0"),
        };
        let ready = tokio::task::spawn_blocking(move || {
            use std::io::BufRead;
            std::io::BufReader::new(log)
                .lines()
                .map_while(Result::ok)
                .any(|line| line.contains("Ready to accept connections"))
        });
        let ready = tokio::time::timeout(Duration::from_secs(30), ready)
            .await
            .expect("redis-server never said it was ready");
        assert!(ready.expect("the log reader"), "redis-server exited early");
        redis
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
