//! The Redis (or Valkey) implementation of the shared event log ([`EventLog`]).
//!
//! A request stream's events are a list, `mcpm:{namespace}:events:{session}:{stream}`, of JSON
//! [`LoggedEvent`]s, trimmed to the newest `bound` and expiring after the idle timeout; each
//! append is also published on the channel of the same name for the replicas following that
//! stream. Answers to server requests travel on `mcpm:{namespace}:replica:{tag}`, the channel
//! replica `tag` listens on while it runs: `PUBSUB NUMSUB` of that channel says whether it is
//! alive, and `PUBLISH`'s count of receivers whether an answer reached it.

use std::collections::BTreeSet;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use serde::{Deserialize, Serialize};

use super::events::{Appended, EventLog, LoggedEvent};
use super::relay::ReplicaTag;
use super::{StoreError, redact};

/// How long one store operation may take before it fails.
const OP_TIMEOUT: Duration = Duration::from_secs(1);

/// An answer relayed to another replica.
#[derive(Debug, Serialize, Deserialize)]
struct Relayed {
    session: String,
    line: String,
}

pub(super) struct RedisEvents {
    describe: String,
    /// `mcpm:{namespace}:`
    prefix: String,
    tag: ReplicaTag,
    client: redis::Client,
    connection: ConnectionManager,
}

impl RedisEvents {
    pub(super) fn connect(url: &str, namespace: &str, tag: ReplicaTag) -> Result<Self, StoreError> {
        let describe = redact(url);
        let config_error = |reason: String| StoreError::Config {
            store: describe.clone(),
            reason,
        };
        let client = redis::Client::open(url).map_err(|err| config_error(err.to_string()))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(OP_TIMEOUT))
            .set_response_timeout(Some(OP_TIMEOUT))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(500));
        let connection = ConnectionManager::new_lazy_with_config(client.clone(), config)
            .map_err(|err| config_error(err.to_string()))?;
        Ok(Self {
            describe,
            prefix: format!("mcpm:{namespace}:"),
            tag,
            client,
            connection,
        })
    }

    fn stream_key(&self, session: &str, stream: u64) -> String {
        format!("{}events:{session}:{stream}", self.prefix)
    }

    fn replica_channel(&self, tag: ReplicaTag) -> String {
        format!("{}replica:{tag}", self.prefix)
    }

    fn unavailable(&self, reason: impl Into<String>) -> StoreError {
        StoreError::Unavailable {
            store: self.describe.clone(),
            reason: reason.into(),
        }
    }

    /// Runs `op` within [`OP_TIMEOUT`]; a connection found broken is made again once.
    async fn bounded<T, F>(
        &self,
        mut op: impl FnMut(ConnectionManager) -> F,
    ) -> Result<T, StoreError>
    where
        F: Future<Output = redis::RedisResult<T>>,
    {
        let mut retried = false;
        loop {
            match tokio::time::timeout(OP_TIMEOUT, op(self.connection.clone())).await {
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(err)) if !retried && (err.is_connection_dropped() || err.is_io_error()) => {
                    retried = true;
                }
                Ok(Err(err)) => return Err(self.unavailable(err.to_string())),
                Err(_) => {
                    return Err(
                        self.unavailable(format!("no answer within {} ms", OP_TIMEOUT.as_millis()))
                    );
                }
            }
        }
    }

    /// A pub/sub connection subscribed to `channel`, within [`OP_TIMEOUT`].
    async fn subscribed(&self, channel: &str) -> Result<redis::aio::PubSub, StoreError> {
        let subscribe = async {
            let mut pubsub = self.client.get_async_pubsub().await?;
            pubsub.subscribe(channel).await?;
            Ok::<_, redis::RedisError>(pubsub)
        };
        match tokio::time::timeout(OP_TIMEOUT, subscribe).await {
            Ok(Ok(pubsub)) => Ok(pubsub),
            Ok(Err(err)) => Err(self.unavailable(err.to_string())),
            Err(_) => {
                Err(self.unavailable(format!("no answer within {} ms", OP_TIMEOUT.as_millis())))
            }
        }
    }
}

fn millis(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX).max(1)
}

impl EventLog for RedisEvents {
    fn replica(&self) -> ReplicaTag {
        self.tag
    }

    fn append<'a>(
        &'a self,
        session: &'a str,
        events: &'a [Appended],
        bound: usize,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            if events.is_empty() || bound == 0 {
                return Ok(());
            }
            let mut pipe = redis::pipe();
            pipe.atomic();
            let mut keys = BTreeSet::new();
            for (stream, event) in events {
                let key = self.stream_key(session, *stream);
                let json = serde_json::to_string(event).map_err(|err| StoreError::Corrupt {
                    store: self.describe.clone(),
                    reason: err.to_string(),
                })?;
                pipe.rpush(&key, &json).ignore();
                pipe.publish(&key, &json).ignore();
                keys.insert(key);
            }
            let keep = -i64::try_from(bound).unwrap_or(i64::MAX);
            for key in &keys {
                pipe.ltrim(key, keep as isize, -1).ignore();
                pipe.pexpire(key, millis(ttl)).ignore();
            }
            let pipe = &pipe;
            self.bounded(
                |mut connection| async move { pipe.query_async::<()>(&mut connection).await },
            )
            .await
        })
    }

    fn read<'a>(
        &'a self,
        session: &'a str,
        stream: u64,
    ) -> BoxFuture<'a, Result<Vec<LoggedEvent>, StoreError>> {
        Box::pin(async move {
            let key = self.stream_key(session, stream);
            let key = &key;
            let entries: Vec<String> = self
                .bounded(|mut connection| async move {
                    redis::cmd("LRANGE")
                        .arg(key)
                        .arg(0)
                        .arg(-1)
                        .query_async(&mut connection)
                        .await
                })
                .await?;
            entries
                .iter()
                .map(|entry| {
                    serde_json::from_str(entry).map_err(|err| StoreError::Corrupt {
                        store: self.describe.clone(),
                        reason: format!("an event of stream {stream}: {err}"),
                    })
                })
                .collect()
        })
    }

    fn follow<'a>(
        &'a self,
        session: &'a str,
        stream: u64,
    ) -> BoxFuture<'a, Result<BoxStream<'static, LoggedEvent>, StoreError>> {
        Box::pin(async move {
            let pubsub = self.subscribed(&self.stream_key(session, stream)).await?;
            let events = pubsub.into_on_message().filter_map(|message| async move {
                let payload = message.get_payload::<String>().ok()?;
                serde_json::from_str::<LoggedEvent>(&payload).ok()
            });
            Ok(events.boxed())
        })
    }

    fn alive(&self, replica: ReplicaTag) -> BoxFuture<'_, Result<bool, StoreError>> {
        Box::pin(async move {
            if replica == self.tag {
                return Ok(true);
            }
            let channel = self.replica_channel(replica);
            let channel = &channel;
            let (_, listeners): (String, i64) = self
                .bounded(|mut connection| async move {
                    redis::cmd("PUBSUB")
                        .arg("NUMSUB")
                        .arg(channel)
                        .query_async(&mut connection)
                        .await
                })
                .await?;
            Ok(listeners > 0)
        })
    }

    fn relay<'a>(
        &'a self,
        replica: ReplicaTag,
        session: &'a str,
        line: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let channel = self.replica_channel(replica);
            let payload = serde_json::to_string(&Relayed {
                session: session.to_owned(),
                line: line.to_owned(),
            })
            .map_err(|err| self.unavailable(err.to_string()))?;
            let (channel, payload) = (&channel, &payload);
            let receivers: i64 = self
                .bounded(|mut connection| async move {
                    redis::cmd("PUBLISH")
                        .arg(channel)
                        .arg(payload)
                        .query_async(&mut connection)
                        .await
                })
                .await?;
            Ok(receivers > 0)
        })
    }

    fn listen(&self, on_answer: Box<dyn Fn(String, String) -> bool + Send + Sync>) {
        let channel = self.replica_channel(self.tag);
        let events = Self {
            describe: self.describe.clone(),
            prefix: self.prefix.clone(),
            tag: self.tag,
            client: self.client.clone(),
            connection: self.connection.clone(),
        };
        tokio::spawn(async move {
            // Reconnects after the store went away; ends when the listener says it is done.
            loop {
                match events.subscribed(&channel).await {
                    Ok(pubsub) => {
                        let mut messages = pubsub.into_on_message();
                        while let Some(message) = messages.next().await {
                            let Some(relayed) = message
                                .get_payload::<String>()
                                .ok()
                                .and_then(|p| serde_json::from_str::<Relayed>(&p).ok())
                            else {
                                continue;
                            };
                            if !on_answer(relayed.session, relayed.line) {
                                return;
                            }
                        }
                    }
                    Err(err) => {
                        tracing::debug!(store = %events.describe, %err, "cannot listen for relayed answers")
                    }
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
    }
}
