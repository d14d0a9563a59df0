//! A throwaway `$MCPCTL_HOME` and a way to run `mcpctl` against it.

#![allow(dead_code, unreachable_pub)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

/// A fresh store directory, removed when dropped.
pub struct Home {
    pub path: PathBuf,
}

impl Home {
    /// A new empty home under the system's temporary directory.
    pub fn new() -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "mcpctl-test-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create the test home");
        Self { path }
    }

    /// `mcpctl ARGS` with this home.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_mcpctl"));
        command
            .args(args)
            .env("MCPCTL_HOME", &self.path)
            .env_remove("MCPCTL_LOG")
            .stdin(Stdio::null());
        command
    }

    /// Runs `mcpctl ARGS`.
    pub fn run(&self, args: &[&str]) -> Run {
        Run::from(self.command(args).output().expect("mcpctl runs"))
    }

    /// Runs `mcpctl ARGS` with `input` on stdin.
    pub fn run_with_stdin(&self, args: &[&str], input: &str) -> Run {
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("mcpctl starts");
        child
            .stdin
            .take()
            .expect("stdin is piped")
            .write_all(input.as_bytes())
            .expect("write stdin");
        Run::from(child.wait_with_output().expect("mcpctl runs"))
    }

    /// `mcpctl apply -f -` with `yaml`, which must succeed.
    pub fn apply(&self, yaml: &str) -> String {
        self.run_with_stdin(&["apply", "-f", "-"], yaml).ok()
    }

    /// A file in the home, written now.
    pub fn write(&self, relative: &str, text: &str) -> PathBuf {
        let path = self.path.join(relative);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("create dir");
        }
        std::fs::write(&path, text).expect("write file");
        path
    }

    /// Every file under the home, relative.
    pub fn files(&self) -> Vec<String> {
        fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, root, out);
                } else if let Ok(relative) = path.strip_prefix(root) {
                    out.push(relative.display().to_string());
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.path, &self.path, &mut out);
        out.sort();
        out
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// What one run of `mcpctl` did.
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(output: Output) -> Self {
        Self {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

impl Run {
    /// Stdout, after checking the run succeeded.
    pub fn ok(self) -> String {
        assert_eq!(
            self.code,
            Some(0),
            "mcpctl failed:\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self.stdout
    }

    /// Stderr, after checking the run failed with `code` and printed nothing on stdout.
    pub fn fails(self, code: i32) -> String {
        assert_eq!(
            self.code,
            Some(code),
            "expected exit {code}:\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self.stderr
    }

    /// Stdout parsed as JSON.
    pub fn json(self) -> serde_json::Value {
        let stdout = self.ok();
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}):\n{stdout}"))
    }
}
