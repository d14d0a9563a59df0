//! The Redis (or Valkey) implementation of the shared event log ([`EventLog`]).
//!
//! A request stream's events are a list, `mcpm:{namespace}:events:{session}:{stream}` (the
//! session named by its keyed digest, `StoreKey::name`), of JSON [`LoggedEvent`]s, each an
//! authenticated record bound to its list (`trust`: one written or moved by anyone else is
//! dropped, logged), trimmed to the newest `bound` and expiring after the idle timeout; each
//! append is also published on the channel of the same name for the replicas following that
//! stream. Answers to server requests travel on `mcpm:{namespace}:replica:{tag}`, the channel
//! replica `tag` listens on while it runs: `PUBSUB NUMSUB` of that channel says whether it is
//! alive, and `PUBLISH`'s count of receivers whether an answer reached it.

use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use redis::aio::ConnectionManager;
use serde::{Deserialize, Serialize};

use super::events::{Appended, EventLog, LoggedEvent};
use super::relay::ReplicaTag;
use super::{StoreError, StoreKey, StoreTrust};

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
    /// `mcpm:{namespace}:`, braces literal (`connection::key_prefix`)
    prefix: String,
    tag: ReplicaTag,
    /// Authenticates the events and names the sessions.
    key: StoreKey,
    client: redis::Client,
    connection: ConnectionManager,
    append: redis::Script,
}

/// Appends events to streams' lists KEYS, each also published on the channel named as its
/// list: ARGV[1] is how many events a list keeps, ARGV[2] its TTL in ms, then a pair per
/// event, in order: the index of its list in KEYS and the event's JSON. A list is trimmed
/// only when it grew past its bound.
const APPEND: &str = r"
local keep = tonumber(ARGV[1])
for i = 3, #ARGV, 2 do
  local key = KEYS[tonumber(ARGV[i])]
  if redis.call('RPUSH', key, ARGV[i + 1]) > keep then
    redis.call('LTRIM', key, -keep, -1)
  end
  redis.call('PUBLISH', key, ARGV[i + 1])
end
for _, key in ipairs(KEYS) do
  redis.call('PEXPIRE', key, ARGV[2])
end
return 0
";

impl RedisEvents {
    pub(super) fn connect(
        url: &str,
        namespace: &str,
        tag: ReplicaTag,
        trust: &StoreTrust,
    ) -> Result<Self, StoreError> {
        let super::connection::Opened {
            describe,
            client,
            connection,
        } = super::connection::open(url, namespace, OP_TIMEOUT, trust)?;
        Ok(Self {
            describe,
            prefix: super::connection::key_prefix(namespace),
            tag,
            key: trust.key.clone(),
            client,
            connection,
            append: super::redis::script(APPEND),
        })
    }

    fn stream_key(&self, session: &str, stream: u64) -> String {
        format!("{}events:{}:{stream}", self.prefix, self.key.name(session))
    }

    /// The event `entry` of list `list`, if it is an authenticated record of that list and
    /// reads as an event; anything else is logged and dropped.
    fn opened(key: &StoreKey, describe: &str, list: &str, entry: &str) -> Option<LoggedEvent> {
        let event = key
            .open(list, "event", entry)
            .map_err(|err| err.to_string())
            .and_then(|json| serde_json::from_str(json).map_err(|err| err.to_string()));
        match event {
            Ok(event) => Some(event),
            Err(reason) => {
                tracing::error!(store = %describe, key = %list, "an event of the shared event log was refused: {reason}");
                None
            }
        }
    }

    fn replica_channel(&self, tag: ReplicaTag) -> String {
        format!("{}replica:{tag}", self.prefix)
    }

    fn unavailable(&self, reason: impl Into<String>) -> StoreError {
        super::connection::unavailable(&self.describe, reason)
    }

    /// Runs `op` within [`OP_TIMEOUT`]; a connection found broken is made again once.
    async fn bounded<T, F>(&self, op: impl FnMut(ConnectionManager) -> F) -> Result<T, StoreError>
    where
        F: Future<Output = redis::RedisResult<T>>,
    {
        super::connection::bounded(&self.describe, &self.connection, OP_TIMEOUT, op).await
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
            // One script call ([`APPEND`]): one command for Redis to read per append.
            let mut keys: Vec<String> = Vec::new();
            let mut invocation = self.append.prepare_invoke();
            invocation.arg(bound).arg(millis(ttl));
            for (stream, event) in events {
                let key = self.stream_key(session, *stream);
                let index = match keys.iter().position(|known| *known == key) {
                    Some(index) => index,
                    None => {
                        invocation.key(&key);
                        keys.push(key);
                        keys.len() - 1
                    }
                };
                let json = serde_json::to_string(event).map_err(|err| StoreError::Corrupt {
                    store: self.describe.clone(),
                    reason: err.to_string(),
                })?;
                // Lua's KEYS count from 1.
                invocation
                    .arg(index + 1)
                    .arg(self.key.seal(&keys[index], "event", &json));
            }
            let invocation = &invocation;
            self.bounded(|mut connection| async move {
                invocation.invoke_async::<()>(&mut connection).await
            })
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
            Ok(entries
                .iter()
                .filter_map(|entry| Self::opened(&self.key, &self.describe, key, entry))
                .collect())
        })
    }

    fn follow<'a>(
        &'a self,
        session: &'a str,
        stream: u64,
    ) -> BoxFuture<'a, Result<BoxStream<'static, LoggedEvent>, StoreError>> {
        Box::pin(async move {
            let list = self.stream_key(session, stream);
            let pubsub = self.subscribed(&list).await?;
            let (key, describe) = (self.key.clone(), self.describe.clone());
            let events = pubsub.into_on_message().filter_map(move |message| {
                let opened = message
                    .get_payload::<String>()
                    .ok()
                    .and_then(|payload| Self::opened(&key, &describe, &list, &payload));
                async move { opened }
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
            let payload = self
                .key
                .encrypt(&channel, "answer", &payload)
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
            key: self.key.clone(),
            client: self.client.clone(),
            connection: self.connection.clone(),
            append: self.append.clone(),
        };
        tokio::spawn(async move {
            // Reconnects after the store went away; ends when the listener says it is done.
            loop {
                match events.subscribed(&channel).await {
                    Ok(pubsub) => {
                        let mut messages = pubsub.into_on_message();
                        while let Some(message) = messages.next().await {
                            let Ok(payload) = message.get_payload::<String>() else {
                                continue;
                            };
                            // Only an answer a replica with the key relayed is taken.
                            let payload = match events.key.decrypt(&channel, "answer", &payload) {
                                Ok(payload) => payload,
                                Err(err) => {
                                    tracing::error!(store = %events.describe, channel = %channel, "a relayed answer was refused: {err}");
                                    continue;
                                }
                            };
                            let Ok(relayed) = serde_json::from_str::<Relayed>(&payload) else {
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

#[cfg(test)]
mod tests {
    //! Against a real `redis-server` on a free loopback port (scripts/setup-interop installs it).

    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    use super::*;

    use crate::shared_store::test_server::{Server, trust};

    fn tag(value: u32) -> ReplicaTag {
        ReplicaTag::new(value).unwrap_or_else(|| panic!("tag {value}"))
    }

    fn event(seq: u64, last: bool) -> LoggedEvent {
        LoggedEvent {
            seq,
            last,
            request: "7".into(),
            line: format!(r#"{{"jsonrpc":"2.0","method":"m","params":{{"n":{seq}}}}}"#),
        }
    }

    const TTL: Duration = Duration::from_secs(60);

    #[tokio::test]
    async fn streams_are_bounded_expire_and_stay_in_their_namespace() -> Result<(), StoreError> {
        let server = Server::start().await;
        let one = RedisEvents::connect(&server.url, "one", tag(1), &trust())?;
        let two = RedisEvents::connect(&server.url, "two", tag(2), &trust())?;
        let stream = tag(1).first_stream() + 1;
        let events: Vec<Appended> = (1..=5).map(|seq| (stream, event(seq, seq == 5))).collect();
        one.append("s", &events[..3], 4, TTL).await?;
        one.append("s", &events[3..], 4, TTL).await?;
        let kept = one.read("s", stream).await?;
        // Bound of 4: the oldest went first.
        assert_eq!(
            kept.iter().map(|e| e.seq).collect::<Vec<_>>(),
            vec![2, 3, 4, 5]
        );
        assert!(kept[3].last && !kept[2].last);
        assert_eq!(kept[0], event(2, false));
        assert!(two.read("s", stream).await?.is_empty(), "another project's");
        assert!(
            one.read("other", stream).await?.is_empty(),
            "another session's"
        );
        let key = one.stream_key("s", stream);
        let key = &key;
        let ttl: i64 = one
            .bounded(|mut c| async move { redis::cmd("PTTL").arg(key).query_async(&mut c).await })
            .await?;
        assert!(
            ttl > 0 && ttl <= 60_000,
            "expires with the idle timeout: {ttl}"
        );
        Ok(())
    }

    /// One append of two streams' events, interleaved, keeps each stream's order and bound,
    /// on a cluster too (the script's keys are all in the project's slot).
    #[tokio::test]
    async fn one_append_of_two_streams_runs_on_a_cluster() -> Result<(), StoreError> {
        let server = Server::start_cluster().await;
        let log = RedisEvents::connect(&server.url, "unit", tag(1), &trust())?;
        let (a, b) = (tag(1).first_stream() + 1, tag(1).first_stream() + 2);
        let events: Vec<Appended> = (1..=6)
            .map(|seq| (if seq % 2 == 0 { b } else { a }, event(seq, false)))
            .collect();
        log.append("s", &events, 2, TTL).await?;
        let seqs = |kept: Vec<LoggedEvent>| kept.iter().map(|e| e.seq).collect::<Vec<_>>();
        assert_eq!(seqs(log.read("s", a).await?), vec![3, 5]);
        assert_eq!(seqs(log.read("s", b).await?), vec![4, 6]);
        Ok(())
    }

    #[tokio::test]
    async fn a_follower_gets_what_is_appended_after_it_subscribed() -> Result<(), StoreError> {
        let server = Server::start().await;
        let writer = RedisEvents::connect(&server.url, "p", tag(1), &trust())?;
        let reader = RedisEvents::connect(&server.url, "p", tag(2), &trust())?;
        let stream = tag(1).first_stream() + 1;
        writer
            .append("s", &[(stream, event(1, false))], 10, TTL)
            .await?;
        let mut follow = reader.follow("s", stream).await?;
        writer
            .append(
                "s",
                &[(stream, event(2, false)), (stream, event(3, true))],
                10,
                TTL,
            )
            .await?;
        let mut got = Vec::new();
        while got.len() < 2 {
            match tokio::time::timeout(Duration::from_secs(10), follow.next()).await {
                Ok(Some(event)) => got.push(event.seq),
                other => panic!("no event followed: {other:?}"),
            }
        }
        assert_eq!(got, vec![2, 3]);
        Ok(())
    }

    #[tokio::test]
    async fn answers_reach_a_running_replica_and_a_stopped_one_is_known_gone()
    -> Result<(), StoreError> {
        let server = Server::start().await;
        let asker = RedisEvents::connect(&server.url, "p", tag(1), &trust())?;
        let other = RedisEvents::connect(&server.url, "p", tag(2), &trust())?;
        let heard = Arc::new(Mutex::new(Vec::new()));
        let sink = heard.clone();
        asker.listen(Box::new(move |session, line| {
            if let Ok(mut heard) = sink.lock() {
                heard.push((session, line));
            }
            true
        }));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !other.alive(tag(1)).await? {
            assert!(Instant::now() < deadline, "the listener never subscribed");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            other
                .relay(tag(1), "s", r#"{"jsonrpc":"2.0","id":4,"result":{}}"#)
                .await?
        );
        while heard.lock().map(|h| h.is_empty()).unwrap_or(true) {
            assert!(Instant::now() < deadline, "the answer never arrived");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let heard = heard.lock().map(|h| h.clone()).unwrap_or_default();
        assert_eq!(
            heard,
            vec![(
                "s".to_owned(),
                r#"{"jsonrpc":"2.0","id":4,"result":{}}"#.to_owned()
            )]
        );
        assert!(!other.alive(tag(3)).await?, "no replica 3 runs");
        assert!(!other.relay(tag(3), "s", "{}").await?, "nobody took it");
        Ok(())
    }

    #[tokio::test]
    async fn a_store_that_is_down_fails_fast_naming_itself() -> Result<(), StoreError> {
        let mut server = Server::start().await;
        let events = RedisEvents::connect(&server.url, "p", tag(1), &trust())?;
        server.stop();
        for failed in [
            events.read("s", 1).await.map(|_| ()),
            events.relay(tag(2), "s", "{}").await.map(|_| ()),
            events.follow("s", 1).await.map(|_| ()),
        ] {
            match failed {
                Err(StoreError::Unavailable { store, .. }) => assert_eq!(store, server.url),
                other => panic!("expected the store to be unavailable, got {other:?}"),
            }
        }
        Ok(())
    }
}
