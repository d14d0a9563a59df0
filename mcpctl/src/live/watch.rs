//! Watching the store's files: any change to a server, prompt or project file (an editor,
//! `mcpctl apply`, `mcpctl edit`, from any process) reloads the running proxy. Events are
//! debounced (a burst of writes, such as one `apply` of several documents, is one reload), and
//! only `*.yaml` files of `servers/`, `prompts/` and `projects/` count: the store's temporary
//! files, its lock and the servers' status files do not. Nor does reading a file: inotify
//! reports every open, and the reload itself reads the files, so a file counts as changed only
//! when its modification time, size or existence differs from what the last look saw (a
//! `stat`, which reports nothing).
//!
//! The store's `revision` file counts too: a command that changed the store raises it after
//! its files, so a reload that read the revision before that is followed by one that reads
//! it after, and the proxy records the revision in force for the command that waits for it
//! (`mcpctl::store::running`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use notify_debouncer_mini::notify::{RecommendedWatcher, RecursiveMode};
use notify_debouncer_mini::{DebounceEventResult, Debouncer, new_debouncer};

use super::Reloader;
use mcpctl::store::revision;

/// How long the store must be quiet before a burst of changes is reloaded as one.
const QUIET: Duration = Duration::from_millis(200);

/// The store's directories that hold resources.
const WATCHED: [&str; 3] = ["servers", "prompts", "projects"];

/// A running watch; dropping it stops watching.
pub(crate) struct Watch {
    _debouncer: Debouncer<RecommendedWatcher>,
}

/// Watches `reloader`'s store and reloads on every change (see the module docs). When the
/// store cannot be watched (no inotify watches left, say) the proxy runs on without it, with
/// a warning: `POST /api/apply` still reloads.
pub(crate) fn start(reloader: Arc<Reloader>) -> Option<Watch> {
    match watch(reloader) {
        Ok(watch) => Some(watch),
        Err(err) => {
            tracing::warn!(
                "{err:#}: changes to the store's files are not picked up until a restart (POST /api/apply still reloads)"
            );
            None
        }
    }
}

/// What a file looked like: its modification time and size, `None` when it does not exist.
type Look = Option<(std::time::SystemTime, u64)>;

fn look(path: &Path) -> Look {
    let metadata = std::fs::metadata(path).ok()?;
    Some((metadata.modified().ok()?, metadata.len()))
}

/// Every resource file of the store, and its revision file, as they look now.
fn look_all(root: &Path) -> BTreeMap<PathBuf, Look> {
    let mut seen = BTreeMap::new();
    let revision = root.join(revision::FILE);
    seen.insert(revision.clone(), look(&revision));
    for dir in WATCHED {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for path in entries.flatten().map(|entry| entry.path()) {
            if is_resource_file(&path) {
                seen.insert(path.clone(), look(&path));
            }
        }
    }
    seen
}

fn watch(reloader: Arc<Reloader>) -> anyhow::Result<Watch> {
    let root = reloader.store().root().to_owned();
    let seen = Mutex::new(look_all(&root));
    let revision_file = root.join(revision::FILE);
    let on_change = {
        let reloader = reloader.clone();
        move |result: DebounceEventResult| match result {
            Ok(events) => {
                let mut files: Vec<PathBuf> = events
                    .into_iter()
                    .map(|event| event.path)
                    .filter(|path| is_resource_file(path) || *path == revision_file)
                    .collect();
                files.sort();
                files.dedup();
                // Only files that changed since the last look (not those merely read).
                if let Ok(mut seen) = seen.lock() {
                    files.retain(|path| {
                        let now = look(path);
                        let changed = seen.get(path) != Some(&now);
                        seen.insert(path.clone(), now);
                        changed
                    });
                }
                if files.is_empty() {
                    return;
                }
                let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
                let cause = format!("changed: {}", names.join(", "));
                // The outcome is logged by `reload`, refusals included.
                let _ = reloader.reload(&cause);
            }
            Err(err) => tracing::warn!(%err, "watching the store for changes failed"),
        }
    };
    let mut debouncer =
        new_debouncer(QUIET, on_change).context("cannot watch the store for changes")?;
    for dir in WATCHED {
        let path = root.join(dir);
        // A directory that does not exist yet cannot be watched: made now (the store would
        // make it on its first write anyway).
        std::fs::create_dir_all(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        debouncer
            .watcher()
            .watch(&path, RecursiveMode::NonRecursive)
            .with_context(|| format!("cannot watch {} for changes", path.display()))?;
    }
    // The revision file itself, beside the store's lock and running proxies' entries.
    debouncer
        .watcher()
        .watch(&root, RecursiveMode::NonRecursive)
        .with_context(|| format!("cannot watch {} for changes", root.display()))?;
    tracing::info!(store = %root.display(), "watching the store for changes");
    if let Err(err) = reloader.follow() {
        tracing::warn!(
            "{err:#}: `mcpctl apply`, `edit` and `delete` will not wait for this proxy to reload"
        );
    }
    Ok(Watch {
        _debouncer: debouncer,
    })
}

/// Whether `path` is a resource file (not a temporary file of an atomic write, whose name
/// starts with a dot).
fn is_resource_file(path: &Path) -> bool {
    let named = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|name| !name.starts_with('.'));
    let yaml = path.extension().is_some_and(|e| e == "yaml");
    let dir = path
        .parent()
        .and_then(Path::file_name)
        .and_then(|d| d.to_str())
        .is_some_and(|d| WATCHED.contains(&d));
    named && yaml && dir
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_resource_files_count() {
        assert!(is_resource_file(Path::new("/h/servers/a.yaml")));
        assert!(is_resource_file(Path::new("/h/projects/p.yaml")));
        assert!(!is_resource_file(Path::new("/h/servers/.a.yaml.tmp-1-0")));
        assert!(!is_resource_file(Path::new("/h/status/p.json")));
        assert!(!is_resource_file(Path::new("/h/.lock")));
        assert!(!is_resource_file(Path::new("/h/other/a.yaml")));
    }
}
