//! The proxies that follow the store (`mcpctl serve PROJECT`, `mcpctl proxy PROJECT`), and the
//! revision (`$MCPCTL_HOME/revision`) each has in force, so that a command which changed the store
//! (`apply`, `edit`, `delete`) returns only once every running proxy has reloaded the change,
//! or says which has not:
//!
//! ```text
//! $MCPCTL_HOME/running/ID.json   {"project": "demo", "pid": 4242, "inForce": 7, "seen": 7, "refused": null}
//! $MCPCTL_HOME/running/ID.lock   locked (an advisory lock) by that proxy while it runs
//! ```
//!
//! A proxy's entry counts while its lock is held, so one that was killed is never waited for
//! (the lock goes with the process) and its files are removed by the next command that looks.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::error::StoreError;
use super::{Store, files};

/// The directory, in the store's.
const DIR: &str = "running";

/// How often a waiting command looks again.
const POLL: Duration = Duration::from_millis(20);

/// What a running proxy says of itself.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    project: String,
    pid: u32,
    /// The store's revision its running configuration was built from.
    in_force: u64,
    /// The latest revision it tried to reload.
    seen: u64,
    /// Why it refused `seen` (it runs `in_force`), if it did.
    refused: Option<String>,
}

/// A proxy's entry, held while it runs: dropping it removes the entry.
#[derive(Debug)]
pub struct Following {
    /// Locked while the proxy runs.
    _lock: File,
    lock_path: PathBuf,
    json: PathBuf,
    entry: std::sync::Mutex<Entry>,
}

impl Following {
    /// Enters this process as a proxy of `project` following `store`.
    pub fn register(store: &Store, project: &str) -> Result<Self, StoreError> {
        let dir = store.root().join(DIR);
        fs::create_dir_all(&dir).map_err(|e| StoreError::io("create the directory", &dir, e))?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let id = format!("{}-{nanos}", std::process::id());
        let lock_path = dir.join(format!("{id}.lock"));
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| StoreError::io("create", &lock_path, e))?;
        lock.lock()
            .map_err(|e| StoreError::io("lock", &lock_path, e))?;
        Ok(Self {
            _lock: lock,
            lock_path,
            json: dir.join(format!("{id}.json")),
            entry: std::sync::Mutex::new(Entry {
                project: project.to_owned(),
                pid: std::process::id(),
                ..Entry::default()
            }),
        })
    }

    /// Says that this proxy tried to reload the store's `revision`: it runs it now (`Ok`), or
    /// refused it for the reason given and runs what it ran before.
    pub fn record(&self, revision: u64, outcome: Result<(), &str>) -> Result<(), StoreError> {
        let mut entry = self
            .entry
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        entry.seen = revision;
        match outcome {
            Ok(()) => {
                entry.in_force = revision;
                entry.refused = None;
            }
            Err(why) => entry.refused = Some(why.to_owned()),
        }
        let text = serde_json::to_string(&*entry).unwrap_or_default();
        files::write_atomic(&self.json, &text)
    }
}

impl Drop for Following {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.json);
        let _ = fs::remove_file(&self.lock_path);
    }
}

/// A running proxy that does not have a revision in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotInForce {
    /// The project it serves.
    pub project: String,
    /// Its process id.
    pub pid: u32,
    /// Why it refused the revision; `None`: it had not reloaded it yet when the wait ended.
    pub refused: Option<String>,
}

impl std::fmt::Display for NotInForce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self {
            project,
            pid,
            refused,
        } = self;
        match refused {
            Some(why) => write!(
                f,
                "the proxy of project `{project}` (pid {pid}) refused the change and runs the \
                 configuration before it: {why}"
            ),
            None => write!(
                f,
                "the proxy of project `{project}` (pid {pid}) has not reloaded the change yet"
            ),
        }
    }
}

/// Waits, at most `limit`, until every running proxy of `store` has `revision` (or a later one)
/// in force; returns those that refused it or had not reloaded it when the time was up.
pub fn wait_until_in_force(store: &Store, revision: u64, limit: Duration) -> Vec<NotInForce> {
    let deadline = Instant::now() + limit;
    loop {
        let behind = behind(store.root(), revision);
        let waiting = behind.iter().any(|b| b.refused.is_none());
        if !waiting || Instant::now() >= deadline {
            return behind;
        }
        std::thread::sleep(POLL);
    }
}

/// The running proxies of the store in `root` without `revision` in force.
fn behind(root: &Path, revision: u64) -> Vec<NotInForce> {
    let dir = root.join(DIR);
    let Ok(listing) = fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut behind = Vec::new();
    for path in listing.flatten().map(|e| e.path()) {
        if path.extension().is_none_or(|e| e != "lock") || !held(&path) {
            continue;
        }
        let json = path.with_extension("json");
        // A proxy that has just started may not have written its entry yet: it runs what
        // it read at start, which was read after its lock was taken.
        let Some(entry) = fs::read_to_string(&json)
            .ok()
            .and_then(|text| serde_json::from_str::<Entry>(&text).ok())
        else {
            continue;
        };
        if entry.in_force < revision {
            behind.push(NotInForce {
                project: entry.project,
                pid: entry.pid,
                // Final only once it tried this revision (or a later one) and refused.
                refused: entry.refused.filter(|_| entry.seen >= revision),
            });
        }
    }
    behind.sort_by(|a, b| (&a.project, a.pid).cmp(&(&b.project, b.pid)));
    behind
}

/// Whether the lock file at `path` is held by a running proxy; one that is not (its proxy
/// died) is removed with its entry.
fn held(path: &Path) -> bool {
    let Ok(file) = OpenOptions::new().write(true).open(path) else {
        return false;
    };
    match file.try_lock() {
        Err(TryLockError::WouldBlock) => true,
        Ok(()) => {
            let _ = fs::remove_file(path.with_extension("json"));
            let _ = fs::remove_file(path);
            false
        }
        Err(TryLockError::Error(_)) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(name: &str) -> Store {
        let root =
            std::env::temp_dir().join(format!("mcpctl-running-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        Store::new(root)
    }

    #[test]
    fn a_proxy_is_waited_for_until_it_records_the_revision_or_refuses_it() {
        let store = store("wait");
        let proxy = Following::register(&store, "demo").unwrap();
        proxy.record(3, Ok(())).unwrap();
        assert!(wait_until_in_force(&store, 3, Duration::ZERO).is_empty());
        let late = wait_until_in_force(&store, 4, Duration::from_millis(50));
        assert_eq!(late.len(), 1);
        assert_eq!(late[0].refused, None);
        assert!(
            late[0]
                .to_string()
                .contains("has not reloaded the change yet")
        );
        proxy.record(4, Err("bad config")).unwrap();
        let refused = wait_until_in_force(&store, 4, Duration::from_secs(5));
        assert_eq!(refused[0].refused.as_deref(), Some("bad config"));
        // A later revision that was taken clears the refusal.
        proxy.record(5, Ok(())).unwrap();
        assert!(wait_until_in_force(&store, 4, Duration::ZERO).is_empty());
        drop(proxy);
        assert!(wait_until_in_force(&store, 9, Duration::ZERO).is_empty());
        let _ = fs::remove_dir_all(store.root());
    }

    #[test]
    fn an_entry_whose_lock_is_not_held_is_stale_and_removed() {
        let store = store("stale");
        let dir = store.root().join(DIR);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("1-1.lock"), "").unwrap();
        fs::write(
            dir.join("1-1.json"),
            r#"{"project":"gone","pid":1,"inForce":0,"seen":0,"refused":null}"#,
        )
        .unwrap();
        assert!(wait_until_in_force(&store, 1, Duration::ZERO).is_empty());
        assert!(!dir.join("1-1.json").exists());
        let _ = fs::remove_dir_all(store.root());
    }
}
