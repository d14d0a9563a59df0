//! The store's files: atomic replacement and the lock that serialises writers.
//!
//! A write goes to a temporary file in the same directory (`.NAME.yaml.tmp-PID-N`), is flushed
//! to disk, then renamed over the target, and the directory is synced: a reader sees the old
//! file or the new one, never part of one. Writers hold an exclusive advisory lock on
//! `$MCPCTL_HOME/.lock` for the whole read-check-write of a command, so two `apply`s or
//! `edit`s at once run one after the other and neither loses the other's change. A temporary
//! file left by a writer that was killed is removed by the next writer, under the lock.

use std::fs::{self, File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::error::StoreError;

/// The marker in temporary files' names.
const TEMP_MARK: &str = ".tmp-";

/// An exclusive hold on the store; released when dropped.
#[derive(Debug)]
pub(crate) struct WriteLock {
    _file: File,
}

/// Takes the store's write lock, waiting for other writers, creating `root` if needed.
pub(crate) fn lock(root: &Path) -> Result<WriteLock, StoreError> {
    fs::create_dir_all(root).map_err(|e| StoreError::io("create the directory", root, e))?;
    let path = root.join(".lock");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| StoreError::io("open the lock file", &path, e))?;
    file.lock().map_err(|e| StoreError::io("lock", &path, e))?;
    Ok(WriteLock { _file: file })
}

/// Replaces `path` with `contents` atomically (see the module docs). Call with the lock held
/// for a file of the store.
/// The replaced file's permissions carry over (a client's configuration, which `mcpctl install`
/// rewrites the same way, may hold secrets).
pub(crate) fn write_atomic(path: &Path, contents: &str) -> Result<(), StoreError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    fs::create_dir_all(dir).map_err(|e| StoreError::io("create the directory", dir, e))?;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(
        ".{file_name}{TEMP_MARK}{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let permissions = fs::metadata(path).ok().map(|m| m.permissions());
    let written = (|| {
        let mut file = File::create(&temp)?;
        file.write_all(contents.as_bytes())?;
        file.sync_all()?;
        match permissions {
            Some(permissions) => fs::set_permissions(&temp, permissions),
            None => Ok(()),
        }
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&temp);
        return Err(StoreError::io("write", temp, e));
    }
    if let Err(e) = fs::rename(&temp, path) {
        let _ = fs::remove_file(&temp);
        return Err(StoreError::io("replace", path, e));
    }
    sync_dir(dir);
    Ok(())
}

/// Removes `path` (absent is fine). Call with the lock held.
pub(crate) fn remove(path: &Path) -> Result<(), StoreError> {
    match fs::remove_file(path) {
        Ok(()) => {
            if let Some(dir) = path.parent() {
                sync_dir(dir);
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io("remove", path, e)),
    }
}

/// Removes temporary files a killed writer left in `dir`. Call with the lock held.
pub(crate) fn sweep_temporaries(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') && name.contains(TEMP_MARK) {
            tracing::debug!(file = %entry.path().display(), "removing a stale temporary file");
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// The `*.yaml` files in `dir` (not hidden ones), sorted; none when `dir` does not exist.
pub(crate) fn yaml_files(dir: &Path) -> Result<Vec<PathBuf>, StoreError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StoreError::io("list", dir, e)),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io("list", dir, e))?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !name.starts_with('.') && name.ends_with(".yaml") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Makes a rename or removal in `dir` durable; best effort (not every file system allows it).
fn sync_dir(dir: &Path) {
    if let Ok(handle) = File::open(dir) {
        let _ = handle.sync_all();
    }
}
