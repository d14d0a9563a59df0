//! Configuration shared between replicas (`mcpctl serve PROJECT --store redis://...`): a change
//! applied through one replica reaches every other replica of the project, which reloads it
//! as any live change (routes first, then servers: [`super`]).
//!
//! How: the project's documents (its `projects/NAME.yaml`, the `servers/*.yaml` and
//! `prompts/*.yaml` it names, each file's text as it is) are kept in the shared store as a
//! numbered generation ([`SharedConfig`]).
//! - After every reload of this replica that took effect or found nothing changed (so the
//!   documents validated and built here first: `POST /api/apply`, `mcpctl apply` into this
//!   replica's store, an edit of its files), the documents are published; documents equal to
//!   the current generation publish nothing, so a reload of what came from the store is not
//!   sent back. A refused reload publishes nothing.
//! - When another replica publishes, this one writes the new generation's documents into its
//!   own store (only files that differ, atomically) and reloads. A document this replica
//!   cannot build (a command or a file it does not have) is refused here with the store's
//!   error naming the file and field, logged, and the running configuration stays; the files
//!   keep the shared generation, so the next change or restart tries again.
//! - At start, and whenever the subscription is made again after the store went away, the
//!   newest generation is taken the same way, so a replica that starts or reconnects runs
//!   what the others run; a store without a generation gets this replica's documents.
//!
//! A shared store directory (one volume mounted by every replica) works too: its file watch
//! reloads every replica, and their publications find the generation current.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use mcp_middleware::shared_store::{ConfigNews, SharedConfig, StoreError, StoreTrust};
use mcpctl::store::{Kind, ProjectSpec, Store};
use tokio::sync::{mpsc, watch};

use super::Reloader;

/// The project's documents as its store holds them: file name (relative to the store) ->
/// text. Files the project names but the store lacks are left out (the reload that follows
/// names them).
pub(crate) fn documents(store: &Store, project: &str) -> anyhow::Result<BTreeMap<String, String>> {
    let mut documents = BTreeMap::new();
    let mut read = |kind: Kind, name: &str| -> anyhow::Result<()> {
        let path = store.path_of(kind, name);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                documents.insert(format!("{}/{name}.yaml", kind.plural()), text);
                Ok(())
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(err) => Err(err).with_context(|| format!("cannot read {}", path.display())),
        }
    };
    read(Kind::Project, project)?;
    let spec = store.get::<ProjectSpec>(project)?.spec;
    for server in &spec.servers {
        read(Kind::Server, server)?;
    }
    for prompt in &spec.prompts {
        read(Kind::Prompt, prompt)?;
    }
    Ok(documents)
}

/// Writes `documents` into `store`, each file only when its text differs; whether any did.
/// A name that is not `projects|servers|prompts/NAME.yaml` is refused whole, before anything
/// is written (what the store holds is not trusted to name a path).
fn write_documents(store: &Store, documents: &BTreeMap<String, String>) -> anyhow::Result<bool> {
    for name in documents.keys() {
        if !is_document_name(name) {
            anyhow::bail!(
                "the shared configuration names `{name}`, which is not a store document (`projects/`, `servers/` or `prompts/` and `NAME.yaml`); nothing was written"
            );
        }
    }
    let mut changed = false;
    for (name, text) in documents {
        let path = store.root().join(name);
        if std::fs::read_to_string(&path).is_ok_and(|now| now == *text) {
            continue;
        }
        write_atomically(&path, text)?;
        changed = true;
    }
    Ok(changed)
}

/// Whether `name` is `projects/X.yaml`, `servers/X.yaml` or `prompts/X.yaml` with a plain `X`.
fn is_document_name(name: &str) -> bool {
    let Some((dir, file)) = name.split_once('/') else {
        return false;
    };
    let Some(stem) = file.strip_suffix(".yaml") else {
        return false;
    };
    ["projects", "servers", "prompts"].contains(&dir)
        && !stem.is_empty()
        && !stem.starts_with('.')
        && stem
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Writes through a temporary file (its name starts with a dot, which the store's watch
/// ignores) renamed over `path`, so no reader sees half a document.
fn write_atomically(path: &Path, text: &str) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .with_context(|| format!("{} has no directory", path.display()))?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let file = path.file_name().and_then(|f| f.to_str()).unwrap_or("doc");
    let temporary = dir.join(format!(".{file}.shared-{}", std::process::id()));
    std::fs::write(&temporary, text)
        .with_context(|| format!("cannot write {}", temporary.display()))?;
    std::fs::rename(&temporary, path).with_context(|| format!("cannot replace {}", path.display()))
}

/// At start, before the project's proxy is built: connects to the shared configuration of
/// `project` and writes its newest generation into `store` when it differs, so this replica
/// starts with what the others run.
pub(crate) async fn take_newest_at_start(
    url: &str,
    project: &str,
    store: &Store,
    trust: &StoreTrust,
) -> anyhow::Result<SharedConfig> {
    let config = SharedConfig::redis(url, project, trust)
        .await
        .context("--store: the shared configuration")?;
    let newest = match config.current().await {
        Ok(newest) => newest,
        // Logged by `current`, naming the key and why: this replica starts with its own
        // documents, which it then publishes over the refused generation.
        Err(StoreError::Corrupt { .. }) => None,
        Err(err) => return Err(err).context("--store"),
    };
    if let Some(newest) = newest {
        let written = write_documents(store, &newest.documents).with_context(|| {
            format!(
                "generation {} of the shared configuration",
                newest.generation
            )
        })?;
        if written {
            tracing::info!(
                generation = newest.generation,
                "took the shared configuration's newest generation into the store"
            );
        }
    }
    Ok(config)
}

/// Keeps this replica's configuration and the shared one in step from now on (see the
/// module docs), in a task of its own; and makes the reloader's
/// [`in_force_on_replicas`](Reloader::in_force_on_replicas) wait for the other replicas.
pub(crate) fn start(config: SharedConfig, reloader: Arc<Reloader>) {
    let reloads = reloader.tell_reloads();
    let (shared, published) = watch::channel(Shared::default());
    reloader.share(Fence {
        config: config.clone(),
        published,
    });
    tokio::spawn(
        Sharing {
            config,
            reloader,
            last: None,
            replica: replica_name(),
            in_force: 0,
            refused: None,
            shared,
        }
        .run(reloads),
    );
}

/// A name for this replica unique among the project's, for its acknowledgements.
fn replica_name() -> String {
    let mut bytes = [0u8; 8];
    let random = getrandom::fill(&mut bytes).map_or_else(
        |_| format!("{:x}", std::process::id()),
        |()| bytes.iter().map(|b| format!("{b:02x}")).collect(),
    );
    let host = std::env::var("HOSTNAME").unwrap_or_default();
    if host.is_empty() {
        random
    } else {
        format!("{host}-{random}")
    }
}

/// What the sharing task last made of a reload of this replica.
#[derive(Debug, Clone, Copy, Default)]
struct Shared {
    /// The reload's number ([`Reloader::tell_reloads`]).
    reload: u64,
    /// The generation its documents are in the shared store; `None` when they could not be
    /// published.
    generation: Option<u64>,
}

/// What [`Reloader::in_force_on_replicas`] waits on.
pub(crate) struct Fence {
    config: SharedConfig,
    published: watch::Receiver<Shared>,
}

impl Fence {
    /// Waits, at most `limit`, until reload `reload` of this replica is published and every
    /// other live replica runs it; what did not happen, one sentence each.
    pub(crate) async fn wait(&self, reload: u64, limit: Duration) -> Vec<String> {
        let deadline = tokio::time::Instant::now() + limit;
        let mut published = self.published.clone();
        let seen = tokio::time::timeout_at(deadline, published.wait_for(|s| s.reload >= reload))
            .await
            .ok()
            .and_then(Result::ok)
            .map(|shared| *shared);
        let Some(Shared {
            generation: Some(generation),
            ..
        }) = seen
        else {
            return vec![
                "the change was not shared with the other replicas (see the log); they run the configuration before it".to_owned(),
            ];
        };
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match self.config.await_in_force(generation, left).await {
            Ok(lagging) => lagging
                .iter()
                .map(|l| format!("generation {generation}: {l}"))
                .collect(),
            Err(err) => vec![format!(
                "whether the other replicas run generation {generation} is unknown: {err}"
            )],
        }
    }
}

struct Sharing {
    config: SharedConfig,
    reloader: Arc<Reloader>,
    /// The documents last published here or taken from the store.
    last: Option<BTreeMap<String, String>>,
    /// This replica's name in its acknowledgements.
    replica: String,
    /// The generation this replica runs.
    in_force: u64,
    /// A later generation it could not take, and why.
    refused: Option<(u64, String)>,
    /// Told after each of this replica's reloads is published.
    shared: watch::Sender<Shared>,
}

impl Sharing {
    async fn run(mut self, mut reloads: mpsc::UnboundedReceiver<u64>) {
        let mut news = self.config.watch();
        // What this replica started with, unless the store has it already.
        self.publish(0).await;
        let mut heartbeat = tokio::time::interval(SharedConfig::ACK_EVERY);
        loop {
            tokio::select! {
                heard = news.recv() => match heard {
                    Some(ConfigNews::Generation(_) | ConfigNews::Subscribed) => self.take_newest().await,
                    Some(_) => {}
                    None => return,
                },
                reloaded = reloads.recv() => match reloaded {
                    Some(reload) => self.publish(reload).await,
                    None => return,
                },
                _ = heartbeat.tick() => self.acknowledge().await,
            }
        }
    }

    fn project(&self) -> &str {
        &self.reloader.project
    }

    /// Tells the other replicas which generation this one runs (and keeps it counted live).
    async fn acknowledge(&self) {
        let refused = self
            .refused
            .as_ref()
            .map(|(generation, why)| (*generation, why.as_str()));
        if let Err(err) = self
            .config
            .acknowledge(&self.replica, self.in_force, refused)
            .await
        {
            tracing::warn!(
                "{err}; the other replicas do not know which configuration this one runs"
            );
        }
    }

    /// Publishes this replica's documents (after its reload `reload`) if they are not what it
    /// last published or took.
    async fn publish(&mut self, reload: u64) {
        let documents = match documents(self.reloader.store(), self.project()) {
            Ok(documents) => documents,
            Err(err) => {
                tracing::warn!("{err:#}; this replica's configuration was not shared");
                self.shared.send_replace(Shared {
                    reload,
                    generation: None,
                });
                return;
            }
        };
        if self.last.as_ref() == Some(&documents) {
            self.shared.send_replace(Shared {
                reload,
                generation: Some(self.in_force),
            });
            return;
        }
        let generation = match self.config.publish(&documents).await {
            Ok(published) => {
                if published.changed {
                    tracing::info!(
                        generation = published.generation,
                        "published this replica's configuration to the other replicas"
                    );
                }
                self.last = Some(documents);
                self.in_force = published.generation;
                self.refused = None;
                self.acknowledge().await;
                Some(published.generation)
            }
            Err(err) => {
                tracing::warn!(
                    "{err}; this replica's configuration was not shared (the next change tries again)"
                );
                None
            }
        };
        self.shared.send_replace(Shared { reload, generation });
    }

    /// Takes the newest generation: written into this replica's store and reloaded when it
    /// differs from what the store holds.
    async fn take_newest(&mut self) {
        let newest = match self.config.current().await {
            Ok(Some(newest)) => newest,
            // A store that lost it (restarted without persistence): this replica's is the one.
            Ok(None) => {
                self.last = None;
                let reload = self.shared.borrow().reload;
                return self.publish(reload).await;
            }
            // Logged by `current` (naming the key and why); the running configuration stays.
            Err(StoreError::Corrupt { .. }) => return,
            Err(err) => {
                tracing::warn!("{err}; the shared configuration is read again when it returns");
                return;
            }
        };
        let generation = newest.generation;
        if self.last.as_ref() == Some(&newest.documents) {
            if self.in_force != generation {
                self.in_force = generation;
                self.acknowledge().await;
            }
            return;
        }
        self.last = Some(newest.documents.clone());
        let reloader = self.reloader.clone();
        let cause = format!("generation {generation} of the shared configuration");
        let taken = tokio::task::spawn_blocking(move || {
            let store = reloader.store().clone();
            reloader.write_then_reload(&cause, || write_documents(&store, &newest.documents))
        })
        .await;
        match taken {
            // The reload logged its outcome (a refusal names the file and field).
            Ok(Ok((_, Ok(_)))) => {
                self.in_force = generation;
                self.refused = None;
            }
            Ok(Ok((_, Err(err)))) => self.refused = Some((generation, format!("{err:#}"))),
            Ok(Err(err)) => {
                tracing::error!(
                    "{err:#}; the shared configuration's generation {generation} was not taken, the running configuration stays"
                );
                self.refused = Some((generation, format!("{err:#}")));
            }
            Err(err) => {
                tracing::error!(%err, "taking the shared configuration failed");
                self.refused = Some((generation, err.to_string()));
            }
        }
        self.acknowledge().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_store_documents_are_written() {
        assert!(is_document_name("projects/shared.yaml"));
        assert!(is_document_name("servers/every-thing_2.yaml"));
        assert!(!is_document_name("../etc/passwd.yaml"));
        assert!(!is_document_name("servers/../../x.yaml"));
        assert!(!is_document_name("servers/.hidden.yaml"));
        assert!(!is_document_name("status/shared.yaml"));
        assert!(!is_document_name("servers/a/b.yaml"));
        assert!(!is_document_name("servers/a.json"));
        let dir = std::env::temp_dir().join(format!("mcpctl-shared-{}", std::process::id()));
        let store = Store::new(&dir);
        let bad = BTreeMap::from([
            ("servers/a.yaml".to_owned(), "x".to_owned()),
            ("../b.yaml".to_owned(), "y".to_owned()),
        ]);
        assert!(write_documents(&store, &bad).is_err());
        assert!(!dir.join("servers/a.yaml").exists(), "nothing is written");
        let good = BTreeMap::from([("servers/a.yaml".to_owned(), "x".to_owned())]);
        assert!(write_documents(&store, &good).expect("written"));
        assert!(
            !write_documents(&store, &good).expect("unchanged"),
            "equal text is not written again"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
