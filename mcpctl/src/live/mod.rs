//! Live changes for `mcpctl serve PROJECT` and `mcpctl proxy PROJECT`: the running proxy picks
//! up its project's new servers, routes, model and prompts without a restart, whether they come
//! from `POST /api/apply`, `mcpctl apply`, `mcpctl edit` or an edit of the store's files.
//!
//! - [`Reloader`] rebuilds the proxy from the store exactly as at start (`crate::proxy::build`:
//!   the same checks, so a configuration that does not validate is refused with the store's
//!   error naming the file and field) and hands it to the library's
//!   [`Live`](mcp_middleware::live::Live) handle, which validates it whole, swaps the routes
//!   for every session at once, and then moves open sessions to the new servers (they get
//!   `list_changed`). A refused configuration is logged and the running one stays.
//! - [`watch`] watches the store's `servers/`, `prompts/` and `projects/` (the `notify` crate,
//!   debounced) and reloads on every change, which covers `mcpctl apply` and `mcpctl edit` run
//!   from another process as well as an editor.
//!
//! Every reload logs one line (target `mcpctl::live`): `live reload (CAUSE): ...` at info when
//! it took effect or changed nothing, `live reload (CAUSE) refused ...` at error otherwise.

#[cfg(feature = "redis")]
pub(crate) mod shared;
pub(crate) mod watch;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use mcp_middleware::Proxy;
use mcp_middleware::live::{Live, Reloaded};
use mcp_middleware::request_tap::RequestTap;
use mcpctl::store::project::DEFAULT_NAMESPACE_SEPARATOR;
use mcpctl::store::running::Following;
use mcpctl::store::{ProjectSpec, ServerSpec, Store};

use crate::proxy::{ProxyArgs, build_following};

/// What a reload did, for its log line and `POST /api/apply`'s answer.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    /// What the library changed.
    pub(crate) reloaded: Reloaded,
    /// Servers of the project that were not in it before.
    pub(crate) added: Vec<String>,
    /// Servers no longer in the project: stopped.
    pub(crate) removed: Vec<String>,
    /// Servers whose definition (command, arguments, env, URL, headers) changed: restarted.
    pub(crate) changed: Vec<String>,
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.reloaded)?;
        for (what, names) in [
            ("added", &self.added),
            ("removed", &self.removed),
            ("changed", &self.changed),
        ] {
            if !names.is_empty() {
                let names: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
                write!(f, "; servers {what}: {}", names.join(", "))?;
            }
        }
        Ok(())
    }
}

/// A server's state as the admin API reports it, beside what the status file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lifecycle {
    /// Changed by the last reload: its sessions restart it.
    Restarting,
    /// Removed from the project by a reload: stopped.
    Stopped,
}

/// What the reloader knows of the running configuration.
#[derive(Debug, Default)]
struct Known {
    /// The project's servers, in order, with their definitions.
    servers: Vec<(String, ServerSpec)>,
    separator: String,
    /// Servers a reload removed or changed, until a later one brings them back or the admin
    /// session has seen them run.
    lifecycle: BTreeMap<String, Lifecycle>,
}

/// Rebuilds the proxy of a stored project on demand and installs it (see the module docs).
pub(crate) struct Reloader {
    args: Arc<ProxyArgs>,
    tap: Option<Arc<dyn RequestTap>>,
    live: Live,
    store: Store,
    project: String,
    known: Mutex<Known>,
    /// Held for a whole reload (and the write before it, for `POST /api/apply`), so the store
    /// watch's reload of the same change waits and then finds nothing changed.
    reloading: Mutex<()>,
    /// Told the number of every reload that was not refused (`shared`: the replicas'
    /// configuration).
    reloads: std::sync::OnceLock<tokio::sync::mpsc::UnboundedSender<u64>>,
    /// How many reloads were not refused: the last one's number.
    reloaded: std::sync::atomic::AtomicU64,
    /// With a shared store: what waits for the other replicas to run a reload of this one.
    #[cfg(feature = "redis")]
    fence: std::sync::OnceLock<shared::Fence>,
    /// The store's revision the running configuration was built from.
    revision: std::sync::atomic::AtomicU64,
    /// This proxy's entry among the store's running proxies, once the store is watched: every
    /// reload records there which revision is in force, for the commands that wait for it.
    following: std::sync::OnceLock<Following>,
}

impl std::fmt::Debug for Reloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloader")
            .field("project", &self.project)
            .field("live", &self.live)
            .finish_non_exhaustive()
    }
}

impl Reloader {
    /// The reloader for `args`' project (`None` for an ad-hoc proxy, which has nothing to
    /// reload from) and the proxy it starts with, installed as the first generation.
    pub(crate) fn start(
        args: Arc<ProxyArgs>,
        tap: Option<Arc<dyn RequestTap>>,
    ) -> anyhow::Result<(Proxy, Option<Arc<Reloader>>)> {
        let Some(project) = args.project.clone() else {
            return Ok((build_following(&args, tap, None)?, None));
        };
        let reloader = Arc::new(Reloader {
            args,
            tap,
            live: Live::new(),
            store: Store::from_env()?,
            project,
            known: Mutex::new(Known::default()),
            reloading: Mutex::new(()),
            reloads: std::sync::OnceLock::new(),
            reloaded: Default::default(),
            #[cfg(feature = "redis")]
            fence: std::sync::OnceLock::new(),
            revision: Default::default(),
            following: std::sync::OnceLock::new(),
        });
        // Read before the files: what they hold is that revision's, or a later one's.
        let revision = reloader.store.revision();
        let proxy = reloader.build()?;
        reloader
            .live
            .reload(&proxy)
            .with_context(|| format!("project `{}`", reloader.project))?;
        reloader.remember()?;
        reloader.revision.store(revision, Ordering::Relaxed);
        Ok((proxy, Some(reloader)))
    }

    /// Enters this proxy among the store's running proxies, with the revision it runs: from
    /// now on `apply`, `edit` and `delete` wait for it to reload their change. Called once the
    /// store is watched (a proxy that does not watch would only make them wait in vain).
    pub(crate) fn follow(&self) -> anyhow::Result<()> {
        let following = Following::register(&self.store, &self.project)?;
        let _one = self.lock();
        following.record(self.revision.load(Ordering::Relaxed), Ok(()))?;
        let _ = self.following.set(following);
        Ok(())
    }

    /// The handle the project's proxies follow.
    pub(crate) fn live(&self) -> &Live {
        &self.live
    }

    /// From now on, the number of every reload that was not refused (it took effect, or
    /// found nothing changed) is told on the returned channel. Only the first caller is told.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn tell_reloads(&self) -> tokio::sync::mpsc::UnboundedReceiver<u64> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let _ = self.reloads.set(tx);
        rx
    }

    /// With a shared store: what [`Reloader::in_force_on_replicas`] waits on.
    #[cfg(feature = "redis")]
    pub(crate) fn share(&self, fence: shared::Fence) {
        let _ = self.fence.set(fence);
    }

    /// Waits, at most `limit`, until every other live replica of the shared store runs what
    /// this replica's last reload installed (a generation fence: from then on no replica
    /// routes a request by the configuration before it); what did not happen, one sentence
    /// each. Nothing to wait for without a shared store.
    pub(crate) async fn in_force_on_replicas(&self, limit: std::time::Duration) -> Vec<String> {
        #[cfg(feature = "redis")]
        if let Some(fence) = self.fence.get() {
            return fence
                .wait(self.reloaded.load(Ordering::Acquire), limit)
                .await;
        }
        let _ = limit;
        Vec::new()
    }

    /// The store the project lives in.
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// The proxy the project's store describes now, following the live handle.
    pub(crate) fn build(&self) -> anyhow::Result<Proxy> {
        build_following(&self.args, self.tap.clone(), Some(self.live.clone()))
    }

    /// Reloads from the store; `cause` names what asked (a file change, `POST /api/apply`).
    /// Logs the outcome either way.
    pub(crate) fn reload(&self, cause: &str) -> anyhow::Result<Outcome> {
        let _one = self.lock();
        self.reload_locked(cause)
    }

    /// Runs `write` (a change to the store), then reloads, with no other reload in between.
    pub(crate) fn write_then_reload<T, E>(
        &self,
        cause: &str,
        write: impl FnOnce() -> Result<T, E>,
    ) -> Result<(T, anyhow::Result<Outcome>), E> {
        let _one = self.lock();
        let written = write()?;
        Ok((written, self.reload_locked(cause)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.reloading
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn reload_locked(&self, cause: &str) -> anyhow::Result<Outcome> {
        // Read before the files: what they hold is that revision's, or a later one's.
        let revision = self.store.revision();
        let reloaded = self
            .build()
            .and_then(|proxy| Ok(self.live.reload(&proxy)?))
            .with_context(|| format!("project `{}`", self.project));
        let reloaded = match reloaded {
            Ok(reloaded) => reloaded,
            Err(err) => {
                tracing::error!(
                    "live reload ({cause}) refused, the running configuration stays: {err:#}"
                );
                self.record(revision, Err(&format!("{err:#}")));
                return Err(err);
            }
        };
        self.revision.store(revision, Ordering::Relaxed);
        self.record(revision, Ok(()));
        let (before, _) = self.servers();
        self.remember()?;
        let (after, _) = self.servers();
        let outcome = diff(reloaded, &before, &after);
        if let Ok(mut known) = self.known.lock() {
            for name in &outcome.added {
                known.lifecycle.remove(name);
            }
            for name in &outcome.changed {
                known.lifecycle.insert(name.clone(), Lifecycle::Restarting);
            }
            for name in &outcome.removed {
                known.lifecycle.insert(name.clone(), Lifecycle::Stopped);
            }
        }
        tracing::info!("live reload ({cause}): {outcome}");
        let number = self.reloaded.fetch_add(1, Ordering::AcqRel) + 1;
        if let Some(reloads) = self.reloads.get() {
            let _ = reloads.send(number);
        }
        Ok(outcome)
    }

    /// Tells the commands waiting for `revision` how its reload went.
    fn record(&self, revision: u64, outcome: Result<(), &str>) {
        if let Some(following) = self.following.get()
            && let Err(err) = following.record(revision, outcome)
        {
            tracing::warn!("{err}: commands that change the store will not see this reload");
        }
    }

    /// Reads the project's servers as they are stored now.
    fn remember(&self) -> anyhow::Result<()> {
        let project = self.store.get::<ProjectSpec>(&self.project)?;
        let mut servers = Vec::new();
        for name in &project.spec.servers {
            servers.push((name.clone(), self.store.get::<ServerSpec>(name)?.spec));
        }
        if let Ok(mut known) = self.known.lock() {
            known.servers = servers;
            known.separator = project
                .spec
                .namespace_separator
                .clone()
                .unwrap_or_else(|| DEFAULT_NAMESPACE_SEPARATOR.to_owned());
        }
        Ok(())
    }

    /// The running servers with their definitions, and the separator.
    fn servers(&self) -> (Vec<(String, ServerSpec)>, String) {
        self.known
            .lock()
            .map(|k| (k.servers.clone(), k.separator.clone()))
            .unwrap_or_default()
    }

    /// The running servers' names, in order, and the separator.
    pub(crate) fn server_names(&self) -> (Vec<String>, String) {
        let (servers, separator) = self.servers();
        (
            servers.into_iter().map(|(name, _)| name).collect(),
            separator,
        )
    }

    /// What a reload says of `server` beyond the status file: restarting, or stopped.
    pub(crate) fn lifecycle(&self) -> BTreeMap<String, Lifecycle> {
        self.known
            .lock()
            .map(|k| k.lifecycle.clone())
            .unwrap_or_default()
    }

    /// The admin session has seen `server` run in the current configuration: it is no longer
    /// restarting.
    pub(crate) fn seen_running(&self, server: &str) {
        if let Ok(mut known) = self.known.lock()
            && known.lifecycle.get(server) == Some(&Lifecycle::Restarting)
        {
            known.lifecycle.remove(server);
        }
    }
}

/// Which servers a reload added, removed and changed.
fn diff(
    reloaded: Reloaded,
    before: &[(String, ServerSpec)],
    after: &[(String, ServerSpec)],
) -> Outcome {
    let find = |list: &[(String, ServerSpec)], name: &str| {
        list.iter()
            .find(|(n, _)| n == name)
            .map(|(_, spec)| spec.clone())
    };
    let mut outcome = Outcome {
        reloaded,
        added: Vec::new(),
        removed: Vec::new(),
        changed: Vec::new(),
    };
    for (name, spec) in after {
        match find(before, name) {
            None => outcome.added.push(name.clone()),
            Some(old) if old != *spec => outcome.changed.push(name.clone()),
            Some(_) => {}
        }
    }
    for (name, _) in before {
        if find(after, name).is_none() {
            outcome.removed.push(name.clone());
        }
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpctl::store::StdioSpec;

    fn stdio(command: &str) -> ServerSpec {
        ServerSpec::Stdio(StdioSpec {
            command: command.into(),
            args: vec![],
            env: Default::default(),
            inherit_env: vec![],
            cwd: None,
        })
    }

    #[test]
    fn the_diff_names_added_removed_and_changed_servers() {
        let live = Live::new();
        let proxy = Proxy::new(mcp_middleware::upstream::StdioServer::new("x"));
        let reloaded = live.reload(&proxy).expect("first");
        let before = vec![("a".into(), stdio("a")), ("b".into(), stdio("b"))];
        let after = vec![("b".into(), stdio("b2")), ("c".into(), stdio("c"))];
        let outcome = diff(reloaded, &before, &after);
        assert_eq!(outcome.added, ["c"]);
        assert_eq!(outcome.removed, ["a"]);
        assert_eq!(outcome.changed, ["b"]);
        assert!(
            outcome
                .to_string()
                .ends_with("; servers added: `c`; servers removed: `a`; servers changed: `b`"),
            "{outcome}"
        );
    }
}
