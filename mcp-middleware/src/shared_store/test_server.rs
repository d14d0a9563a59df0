//! A real `redis-server` for the shared store's unit tests, on a free loopback port
//! (scripts/setup-interop installs it).

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` child, killed when dropped (also when the test fails).
pub(crate) struct Server {
    child: Child,
    port: u16,
    /// A cluster node's directory (its `nodes.conf`), removed when dropped.
    cluster_dir: Option<std::path::PathBuf>,
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
        let mut server = Self {
            child: spawn(port, &[]),
            port,
            cluster_dir: None,
            url: format!("redis://127.0.0.1:{port}/0"),
        };
        listening(&mut server.child).await;
        server
    }

    /// Starts a one-node Redis Cluster (every slot its own): a script or `MULTI` whose keys
    /// are not all in one slot, or that touches a key it did not declare in another slot,
    /// fails there as on any cluster.
    pub(crate) async fn start_cluster() -> Self {
        let mut server = Self::start().await;
        server.stop();
        let dir = std::env::temp_dir().join(format!(
            "mcpm-cluster-{}-{}",
            std::process::id(),
            server.port
        ));
        let _ = std::fs::create_dir_all(&dir);
        let dir_arg = dir.to_string_lossy().into_owned();
        server.child = spawn(
            server.port,
            &["--cluster-enabled", "yes", "--dir", &dir_arg],
        );
        server.cluster_dir = Some(dir);
        listening(&mut server.child).await;
        let cli = |args: &[&str]| {
            Command::new("redis-cli")
                .args(["-p", &server.port.to_string()])
                .args(args)
                .output()
                .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
                .unwrap_or_default()
        };
        cli(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok") {
            assert!(
                Instant::now() < deadline,
                "the one-node cluster never became ready"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
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
        self.child = spawn(self.port, &[]);
        listening(&mut self.child).await;
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        if let Some(dir) = &self.cluster_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn spawn(port: u16, extra: &[&str]) -> Child {
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .args(extra)
        // Its log, read until it is ready (`listening`).
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    match child {
        Ok(child) => child,
        Err(err) => panic!("redis-server could not start (is it installed?): {err}"),
    }
}

/// Waits until it logs that it accepts connections (bounded: a server that never does fails
/// the test). The log is dropped then: Redis ignores the broken pipe, so it is never blocked
/// by a log nobody reads.
pub(super) async fn listening(child: &mut Child) {
    let Some(log) = child.stdout.take() else {
        panic!("redis-server's log is not piped");
    };
    let ready = tokio::task::spawn_blocking(move || {
        use std::io::BufRead;
        std::io::BufReader::new(log)
            .lines()
            .map_while(Result::ok)
            .any(|line| line.contains("Ready to accept connections"))
    });
    match tokio::time::timeout(Duration::from_secs(20), ready).await {
        Ok(Ok(true)) => {}
        Ok(_) => panic!("redis-server exited before it accepted connections"),
        Err(_) => panic!("redis-server did not accept connections within 20 s"),
    }
}

/// The trust every unit test's replicas share: one fixed key, no TLS settings.
pub(crate) fn trust() -> super::StoreTrust {
    match super::StoreKey::from_secret(&[7u8; 32]) {
        Ok(key) => super::StoreTrust::new(key),
        Err(err) => panic!("a 32-byte secret is a key: {err}"),
    }
}
