//! A scratch directory for a test's FIFOs and logs, removed when dropped.

#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

/// A fresh directory under the system's temp dir, unique per process and per call.
pub struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    /// `{temp}/{prefix}-{pid}-{n}`, emptied if it was left over.
    pub fn new(prefix: &str) -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "{prefix}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the scratch directory");
        Self { dir }
    }

    /// A path inside the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// A new FIFO inside the directory.
    pub fn fifo(&self, name: &str) -> PathBuf {
        let path = self.path(name);
        let made = Command::new("mkfifo")
            .arg(&path)
            .status()
            .expect("mkfifo runs");
        assert!(made.success(), "mkfifo {}", path.display());
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Opens the FIFO `gate` for writing and closes it again: an upstream paused until its gate
/// opens (`scripted_upstream.py`'s `big_paused`) goes on.
pub fn open_gate(gate: &std::path::Path) {
    drop(
        std::fs::OpenOptions::new()
            .write(true)
            .open(gate)
            .expect("open the gate"),
    );
}
