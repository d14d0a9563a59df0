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
//! With Redis: the hash `mcpm:{namespace}:config` (`generation`, and `documents`: a JSON
//! object as a record authenticated with the replicas' key and bound to the hash and the
//! generation's number, `trust`) and the pub/sub channel `mcpm:{namespace}:config-changed`.
//! Publishing is one Lua script (check the generation is still the one read, write the next,
//! announce), so two replicas publishing at once get two generations in some order, never a
//! torn one. The generation is not given a TTL: the configuration outlives every session.
//!
//! Each replica also says which generation it runs ([`SharedConfig::acknowledge`], `acks`), so
//! the replica where a change was applied can wait until every live replica runs it
//! ([`SharedConfig::await_in_force`]): a generation fence.
//!
//! A generation whose record does not verify (written by anyone without the key: a command
//! replaced, a route removed) is never returned: [`SharedConfig::current`] logs an error naming
//! the key and why and answers [`StoreError::Corrupt`], and the replica keeps what it runs.

use std::collections::BTreeMap;
use std::time::Duration;

use redis::aio::ConnectionManager;
use tokio::sync::mpsc;

use super::{StoreError, StoreKey, StoreTrust};

mod acks;
pub use acks::Lagging;

/// How long one store operation may take.
const OP_TIMEOUT: Duration = Duration::from_secs(2);

/// How often a publication is tried again when another replica published between its read
/// and its write.
const PUBLISH_TRIES: usize = 8;

/// Makes ARGV[2] (the documents' record, sealed for generation ARGV[1] + 1) the next
/// generation if the current one is still ARGV[1]; returns {1, generation} when it
/// published, {0, current} when another replica published first.
const PUBLISH: &str = r"
local current = tonumber(redis.call('HGET', KEYS[1], 'generation') or '0') or 0
if current ~= tonumber(ARGV[1]) then return {0, current} end
redis.call('HSET', KEYS[1], 'generation', current + 1, 'documents', ARGV[2])
redis.call('PUBLISH', KEYS[2], current + 1)
return {1, current + 1}
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
/// use mcp_middleware::shared_store::{ConfigNews, SharedConfig, StoreKey, StoreTrust};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// // The secret every replica of the project shares (`mcpctl serve --state-key-file`).
/// let trust = StoreTrust::new(StoreKey::from_file("/run/secrets/mcpm-key".as_ref())?);
/// let config = SharedConfig::redis("redis://127.0.0.1:6379/0", "my-project", &trust).await?;
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
    /// Authenticates the generations.
    trust: StoreKey,
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
    /// The shared configuration of `namespace` in the Redis at `url` (`redis://HOST:PORT[/DB]`
    /// or `rediss://`), its generations authenticated with `trust`'s key. Fails when the URL
    /// is malformed or the store does not answer now; a newest generation that does not verify
    /// is logged, not an error here.
    pub async fn redis(url: &str, namespace: &str, trust: &StoreTrust) -> Result<Self, StoreError> {
        let super::connection::Opened {
            describe,
            client,
            connection,
        } = super::connection::open(url, namespace, OP_TIMEOUT, trust)?;
        let config = Self {
            trust: trust.key.clone(),
            key: format!("{}config", super::connection::key_prefix(namespace)),
            channel: format!("{}config-changed", super::connection::key_prefix(namespace)),
            describe,
            client,
            connection,
            publish: redis::Script::new(PUBLISH),
        };
        // Answers now, or fails here; a forged generation is the caller's to log and skip.
        match config.current().await {
            Ok(_) | Err(StoreError::Corrupt { .. }) => Ok(config),
            Err(err) => Err(err),
        }
    }

    /// The newest generation, or `None` when no replica has published one yet. A generation
    /// whose record does not verify with this replica's key is [`StoreError::Corrupt`] (and
    /// logged, naming the key and why): never use what it says.
    pub async fn current(&self) -> Result<Option<ConfigGeneration>, StoreError> {
        Ok(self.read().await?.1)
    }

    /// The stored generation's number (0 when none) and, when its record verifies, the
    /// generation.
    async fn read(&self) -> Result<(u64, Option<ConfigGeneration>), StoreError> {
        let mut connection = self.connection.clone();
        let mut read = redis::cmd("HMGET");
        read.arg(&self.key).arg("generation").arg("documents");
        let (generation, record): (Option<String>, Option<String>) =
            self.bounded(read.query_async(&mut connection)).await?;
        let Some(generation) = generation else {
            return Ok((0, None));
        };
        let generation = generation
            .parse::<u64>()
            .map_err(|err| self.refused(&format!("`generation`: {err}")))?;
        let Some(record) = record else {
            return Ok((generation, None));
        };
        let documents = self
            .trust
            .open(&self.key, &documents_field(generation), &record)
            .map_err(|err| self.refused(&format!("generation {generation}: {err}")))
            .and_then(|json| {
                serde_json::from_str(json)
                    .map_err(|err| self.refused(&format!("generation {generation}: {err}")))
            })?;
        Ok((
            generation,
            Some(ConfigGeneration {
                generation,
                documents,
            }),
        ))
    }

    /// Logs that the stored configuration was refused, and why; the error to return.
    fn refused(&self, reason: &str) -> StoreError {
        tracing::error!(
            store = %self.describe,
            key = %self.key,
            "the shared configuration was refused, this replica keeps its own: {reason}"
        );
        StoreError::Corrupt {
            store: self.describe.clone(),
            reason: format!("the shared configuration `{}`: {reason}", self.key),
        }
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
        for _ in 0..PUBLISH_TRIES {
            // A current generation that does not verify is replaced, never compared with.
            let current = match self.read().await {
                Ok((number, generation)) => {
                    if let Some(generation) = generation
                        && generation.documents == *documents
                    {
                        return Ok(Published {
                            generation: generation.generation,
                            changed: false,
                        });
                    }
                    number
                }
                Err(StoreError::Corrupt { .. }) => self.stored_number().await?,
                Err(err) => return Err(err),
            };
            let next = current.saturating_add(1);
            let record = self.trust.seal(&self.key, &documents_field(next), &json);
            let mut connection = self.connection.clone();
            let mut invocation = self.publish.key(&self.key);
            invocation.key(&self.channel).arg(current).arg(record);
            let (published, generation): (i64, u64) = self
                .bounded(invocation.invoke_async(&mut connection))
                .await?;
            if published == 1 {
                return Ok(Published {
                    generation,
                    changed: true,
                });
            }
        }
        Err(StoreError::Unavailable {
            store: self.describe.clone(),
            reason: format!(
                "other replicas kept publishing the shared configuration ({PUBLISH_TRIES} tries)"
            ),
        })
    }

    /// The stored generation's number, whatever its record (0 when there is none or it is not
    /// a number): the one a publication replaces.
    async fn stored_number(&self) -> Result<u64, StoreError> {
        let mut connection = self.connection.clone();
        let mut read = redis::cmd("HGET");
        read.arg(&self.key).arg("generation");
        let number: Option<String> = self.bounded(read.query_async(&mut connection)).await?;
        Ok(number.and_then(|n| n.parse().ok()).unwrap_or(0))
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

/// The field a generation's documents are authenticated as: `documents:{generation}`, so a
/// record is valid only under the number it was published as.
fn documents_field(generation: u64) -> String {
    format!("documents:{generation}")
}

#[cfg(test)]
mod tests {
    //! Against a real `redis-server` on a free loopback port (scripts/setup-interop installs it).

    use super::*;
    use crate::shared_store::test_server::{Server, trust};

    async fn hset(config: &SharedConfig, field: &str, value: &str) -> Result<(), StoreError> {
        let mut connection = config.connection.clone();
        let mut write = redis::cmd("HSET");
        write.arg(&config.key).arg(field).arg(value);
        config
            .bounded(write.query_async::<i64>(&mut connection))
            .await?;
        Ok(())
    }

    /// A generation written without the key, changed, or moved to another number is refused;
    /// a publication replaces it with a valid one.
    #[tokio::test]
    async fn generations_that_do_not_verify_are_refused() -> Result<(), StoreError> {
        let server = Server::start().await;
        let config = SharedConfig::redis(&server.url, "unit", &trust()).await?;
        let documents = BTreeMap::from([("projects/p.yaml".to_owned(), "hidden: [x]".to_owned())]);
        let first = config.publish(&documents).await?;
        assert_eq!((first.generation, first.changed), (1, true));
        assert!(
            !config.publish(&documents).await?.changed,
            "the same documents"
        );
        let mut connection = config.connection.clone();
        let mut read = redis::cmd("HGET");
        read.arg(&config.key).arg("documents");
        let genuine: String = config.bounded(read.query_async(&mut connection)).await?;
        let forged = [
            r#"{"projects/p.yaml":"hidden: []"}"#.to_owned(),
            genuine.replace("[x]", "[]"),
        ];
        for value in &forged {
            hset(&config, "documents", value).await?;
            assert!(
                matches!(config.current().await, Err(StoreError::Corrupt { .. })),
                "{value}"
            );
        }
        // The genuine record under another generation's number.
        hset(&config, "documents", &genuine).await?;
        hset(&config, "generation", "2").await?;
        assert!(matches!(
            config.current().await,
            Err(StoreError::Corrupt { .. })
        ));
        // Another replica with another key refuses this one's, and this one's publication
        // replaces what it refuses.
        let other_key = StoreTrust::new(StoreKey::from_secret(&[9u8; 32]).map_err(|err| {
            StoreError::Config {
                store: server.url.clone(),
                reason: err.to_string(),
            }
        })?);
        let other = SharedConfig::redis(&server.url, "unit", &other_key).await?;
        let replaced = config.publish(&documents).await?;
        assert_eq!((replaced.generation, replaced.changed), (3, true));
        assert_eq!(
            config.current().await?.map(|g| g.documents),
            Some(documents)
        );
        assert!(matches!(
            other.current().await,
            Err(StoreError::Corrupt { .. })
        ));
        Ok(())
    }
}
