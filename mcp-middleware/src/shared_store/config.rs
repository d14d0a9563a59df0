//! Configuration shared between replicas: the documents a project is built from, kept in the
//! shared store under a generation number, and an announcement when they change.
//!
//! The store keeps one *generation* per namespace (project): a number and the documents (file
//! name -> text) that make it. [`SharedConfig::publish`] makes documents the next generation,
//! unless they are exactly the current one (then nothing changes and nothing is announced), and
//! announces the new number to every replica; [`SharedConfig::watch`] tells a replica of every
//! announced generation, and once more each time its subscription is made again after the store
//! went away, so a replica that missed announcements while disconnected reads the newest one
//! ([`SharedConfig::current`]). What the documents mean (how a replica validates, builds and
//! installs them) is the embedding program's business: `mcpctl serve --store` writes them into
//! its own project store and reloads (its README, "Sharing configuration between replicas").
//!
//! With Redis: the hash `mcpm:{namespace}:config` (`generation`, `documents` as a JSON object)
//! and the pub/sub channel `mcpm:{namespace}:config-changed`. Publishing is one Lua script
//! (compare, bump, write, announce), so two replicas publishing at once get two generations in
//! some order, never a torn one. The generation is not given a TTL: the configuration outlives
//! every session.

use std::collections::BTreeMap;
use std::time::Duration;

use redis::aio::ConnectionManager;
use tokio::sync::mpsc;

use super::StoreError;

/// How long one store operation may take.
const OP_TIMEOUT: Duration = Duration::from_secs(2);

/// Makes ARGV[1] (the documents' JSON) the next generation unless it is the current one;
/// returns {1, generation} when it published, {0, generation} when nothing changed.
const PUBLISH: &str = r"
local current = redis.call('HGET', KEYS[1], 'documents')
if current == ARGV[1] then
  return {0, tonumber(redis.call('HGET', KEYS[1], 'generation') or '0')}
end
local generation = redis.call('HINCRBY', KEYS[1], 'generation', 1)
redis.call('HSET', KEYS[1], 'documents', ARGV[1])
redis.call('PUBLISH', KEYS[2], generation)
return {1, generation}
";

/// One generation of the shared configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigGeneration {
    /// Its number: 1 for the first documents published, one more for each change.
    pub generation: u64,
    /// The documents, by file name (for `mcpctl`: `projects/NAME.yaml`, `servers/NAME.yaml`,
    /// `prompts/NAME.yaml`), each as its text.
    pub documents: BTreeMap<String, String>,
}

/// What [`SharedConfig::publish`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Published {
    /// The generation the documents are now.
    pub generation: u64,
    /// Whether they were new (a generation was made and announced) or already the current one.
    pub changed: bool,
}

/// What a replica hears through [`SharedConfig::watch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigNews {
    /// A replica published generation `0`.
    Generation(u64),
    /// The subscription was made (at the start, or again after the store went away):
    /// announcements may have been missed, so read [`SharedConfig::current`].
    Subscribed,
}

/// The shared configuration of one project in Redis (or Valkey). Cheap to clone.
///
/// ```no_run
/// use std::collections::BTreeMap;
/// use mcp_middleware::shared_store::{ConfigNews, SharedConfig};
///
/// # async fn run() -> Result<(), mcp_middleware::shared_store::StoreError> {
/// let config = SharedConfig::redis("redis://127.0.0.1:6379/0", "my-project").await?;
/// let documents = BTreeMap::from([("projects/my-project.yaml".to_owned(), "kind: Project\n".to_owned())]);
/// let published = config.publish(&documents).await?;
/// println!("generation {} (changed: {})", published.generation, published.changed);
/// let mut news = config.watch();
/// while let Some(heard) = news.recv().await {
///     // A generation announced, or announcements possibly missed: read the newest.
///     if let ConfigNews::Generation(_) | ConfigNews::Subscribed = heard {
///         let newest = config.current().await?;
///         println!("{:?}", newest.map(|g| g.generation));
///     }
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct SharedConfig {
    describe: String,
    key: String,
    channel: String,
    client: redis::Client,
    connection: ConnectionManager,
    publish: redis::Script,
}

impl std::fmt::Debug for SharedConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SharedConfig").field(&self.describe).finish()
    }
}

impl SharedConfig {
    /// The shared configuration of `namespace` in the Redis at `url` (`redis://HOST:PORT[/DB]`).
    /// Fails when the URL is malformed or the store does not answer now.
    pub async fn redis(url: &str, namespace: &str) -> Result<Self, StoreError> {
        let super::connection::Opened {
            describe,
            client,
            connection,
        } = super::connection::open(url, namespace, OP_TIMEOUT)?;
        let config = Self {
            key: format!("{}config", super::connection::key_prefix(namespace)),
            channel: format!("{}config-changed", super::connection::key_prefix(namespace)),
            describe,
            client,
            connection,
            publish: redis::Script::new(PUBLISH),
        };
        config.current().await?;
        Ok(config)
    }

    /// The newest generation, or `None` when no replica has published one yet.
    pub async fn current(&self) -> Result<Option<ConfigGeneration>, StoreError> {
        let mut connection = self.connection.clone();
        let mut read = redis::cmd("HMGET");
        read.arg(&self.key).arg("generation").arg("documents");
        let (generation, documents): (Option<u64>, Option<String>) =
            self.bounded(read.query_async(&mut connection)).await?;
        let (Some(generation), Some(documents)) = (generation, documents) else {
            return Ok(None);
        };
        let documents = serde_json::from_str(&documents).map_err(|err| StoreError::Corrupt {
            store: self.describe.clone(),
            reason: format!("the shared configuration `{}`: {err}", self.key),
        })?;
        Ok(Some(ConfigGeneration {
            generation,
            documents,
        }))
    }

    /// Makes `documents` the next generation and announces it, unless they are the current
    /// generation already. Publish only what was validated: every replica installs it.
    pub async fn publish(
        &self,
        documents: &BTreeMap<String, String>,
    ) -> Result<Published, StoreError> {
        let json = serde_json::to_string(documents).map_err(|err| StoreError::Corrupt {
            store: self.describe.clone(),
            reason: err.to_string(),
        })?;
        let mut connection = self.connection.clone();
        let mut invocation = self.publish.key(&self.key);
        invocation.key(&self.channel).arg(json);
        let (changed, generation): (i64, u64) = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        Ok(Published {
            generation,
            changed: changed == 1,
        })
    }

    /// Every announcement from now on (see [`ConfigNews`]), until the receiver is dropped. The
    /// subscription is made again whenever the store went away.
    pub fn watch(&self) -> mpsc::UnboundedReceiver<ConfigNews> {
        let (tx, rx) = mpsc::unbounded_channel();
        let client = self.client.clone();
        let channel = self.channel.clone();
        let describe = self.describe.clone();
        tokio::spawn(async move {
            use futures_util::StreamExt;
            while !tx.is_closed() {
                match client.get_async_pubsub().await {
                    Ok(mut pubsub) => match pubsub.subscribe(&channel).await {
                        Ok(()) => {
                            if tx.send(ConfigNews::Subscribed).is_err() {
                                return;
                            }
                            let mut messages = pubsub.on_message();
                            loop {
                                let message = tokio::select! {
                                    message = messages.next() => message,
                                    () = tx.closed() => return,
                                };
                                let Some(message) = message else { break };
                                let Ok(generation) = message.get_payload::<u64>() else {
                                    continue;
                                };
                                if tx.send(ConfigNews::Generation(generation)).is_err() {
                                    return;
                                }
                            }
                            tracing::warn!(store = %describe, "lost the shared configuration's announcements; subscribing again");
                        }
                        Err(err) => {
                            tracing::debug!(store = %describe, %err, "cannot subscribe to the shared configuration")
                        }
                    },
                    Err(err) => {
                        tracing::debug!(store = %describe, %err, "cannot listen to the shared configuration")
                    }
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
        rx
    }

    async fn bounded<T>(
        &self,
        op: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(OP_TIMEOUT, op).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(err)) => Err(StoreError::Unavailable {
                store: self.describe.clone(),
                reason: err.to_string(),
            }),
            Err(_) => Err(StoreError::Unavailable {
                store: self.describe.clone(),
                reason: format!("no answer within {} ms", OP_TIMEOUT.as_millis()),
            }),
        }
    }
}
