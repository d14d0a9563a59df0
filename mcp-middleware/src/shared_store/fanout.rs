//! Handshake changes that must reach every replica running a session's upstream.
//!
//! Each replica that serves a session runs that session's upstream. When the client changes
//! what those upstreams were told (`logging/setLevel`, `resources/subscribe`,
//! `resources/unsubscribe`) through one replica, that replica's upstream gets the request as
//! usual, the change is written to the store's record of the session, and then announced
//! here: every other replica holding the session sends its own upstream the log level or the
//! subscription added or removed (`Session::take_handshake`), so a resource
//! that changes on any replica's upstream reaches the client, and every upstream logs at the
//! level the client asked for. A replica that restores the session later replays the stored
//! record instead.
//!
//! The client's `notifications/initialized` travels the same way: the replica it was POSTed
//! to writes and announces the change `initialized` before the client gets its `202`
//! (`http::shared_streams::initialized`), and each replica whose upstream has not been told
//! tells it once; one that starts the upstream later replays it with the handshake. The
//! client's next request may still reach a replica before the announcement does (pub/sub is
//! not awaited by the subscribers): that request then goes to an upstream not yet told.
//!
//! An announcement carries the changes the client made through the announcing replica, each
//! with the number the store gave it when it was written (`handshake`): a replica applies a
//! change only when it is the latest of its concern it knows of, so it never applies an older
//! announcement after a newer one, and two replicas whose clients change one concern at the
//! same moment both end with the change the store ordered last. A replica ignores its own
//! announcements and does not announce what it took (no echo between replicas).
//!
//! With Redis it is one pub/sub channel, `mcpm:{namespace}:handshake` (braces literal, as
//! every key: `connection::key_prefix`), carrying, encrypted with the replicas' key (`trust`:
//! the session id is not for other subscribers, and a message without the key is refused)
//! `{"session": ID, "changes": [{"seq": N, "change": {"kind": "level", "params": "..."}}, ...],
//! "origin": REPLICA}` (kinds `level`, `subscribe` and `unsubscribe` with `uri`,
//! `initialized`).

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};

use super::StoreError;
use super::handshake::Numbered;

/// What one replica announces to the others: changes of session `session`'s handshake, with
/// their numbers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct HandshakeChanged {
    pub(crate) session: String,
    pub(crate) changes: Vec<Numbered>,
    /// The announcing replica (random per process), so it does not take its own announcement
    /// back after its client changed the handshake again.
    #[serde(default)]
    pub(crate) origin: String,
}

/// Where handshake changes travel between replicas.
pub(crate) trait Fanout: Send + Sync + 'static {
    /// Tells every replica of session `session`'s handshake `changes`.
    fn announce<'a>(
        &'a self,
        session: &'a str,
        changes: &'a [Numbered],
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    /// Calls `on_heard` with every other replica's announcement, until it returns `false`; a broken connection is made again, after asking `on_heard(None)`
    /// whether to go on.
    fn listen(&self, on_heard: Box<dyn Fn(Option<HandshakeChanged>) -> bool + Send + Sync>);
}

#[cfg(feature = "redis")]
pub(crate) use self::redis::RedisFanout;

#[cfg(feature = "redis")]
mod redis {
    use std::time::Duration;

    use futures_util::future::BoxFuture;
    use redis::aio::ConnectionManager;

    use super::{Fanout, HandshakeChanged};
    use crate::shared_store::StoreError;
    use crate::shared_store::handshake::Numbered;

    /// How long one announcement may take before it is given up (logged).
    const OP_TIMEOUT: Duration = Duration::from_secs(1);

    /// The Redis pub/sub channel of one project's handshake changes.
    pub(crate) struct RedisFanout {
        describe: String,
        channel: String,
        client: ::redis::Client,
        connection: ConnectionManager,
        /// This replica, in its announcements.
        origin: String,
        /// Authenticates the announcements: one written by anyone else is dropped, logged.
        key: crate::shared_store::StoreKey,
    }

    impl RedisFanout {
        /// A fanout on the Redis at `url` for `namespace` (connected lazily: the store's own
        /// connection has checked that it answers).
        pub(crate) fn new(
            url: &str,
            namespace: &str,
            trust: &crate::shared_store::StoreTrust,
        ) -> Result<Self, StoreError> {
            let crate::shared_store::connection::Opened {
                describe,
                client,
                connection,
            } = crate::shared_store::connection::open(url, namespace, OP_TIMEOUT, trust)?;
            let config_error = |reason: String| StoreError::Config {
                store: describe.clone(),
                reason,
            };
            let mut random = [0u8; 8];
            getrandom::fill(&mut random).map_err(|err| config_error(err.to_string()))?;
            Ok(Self {
                origin: random.iter().map(|b| format!("{b:02x}")).collect(),
                channel: format!(
                    "{}handshake",
                    crate::shared_store::connection::key_prefix(namespace)
                ),
                describe,
                client,
                connection,
                key: trust.key.clone(),
            })
        }
    }

    impl Fanout for RedisFanout {
        fn announce<'a>(
            &'a self,
            session: &'a str,
            changes: &'a [Numbered],
        ) -> BoxFuture<'a, Result<(), StoreError>> {
            Box::pin(async move {
                let unavailable = |reason: String| StoreError::Unavailable {
                    store: self.describe.clone(),
                    reason,
                };
                let payload = serde_json::to_string(&HandshakeChanged {
                    session: session.to_owned(),
                    changes: changes.to_vec(),
                    origin: self.origin.clone(),
                })
                .map_err(|err| unavailable(err.to_string()))?;
                let mut connection = self.connection.clone();
                let payload = self
                    .key
                    .encrypt(&self.channel, "handshake", &payload)
                    .map_err(|err| unavailable(err.to_string()))?;
                let mut publish = ::redis::cmd("PUBLISH");
                publish.arg(&self.channel).arg(payload);
                let sent = publish.query_async::<i64>(&mut connection);
                match tokio::time::timeout(OP_TIMEOUT, sent).await {
                    Ok(Ok(_)) => Ok(()),
                    Ok(Err(err)) => Err(unavailable(err.to_string())),
                    Err(_) => Err(unavailable(format!(
                        "no answer within {} ms",
                        OP_TIMEOUT.as_millis()
                    ))),
                }
            })
        }

        fn listen(&self, on_heard: Box<dyn Fn(Option<HandshakeChanged>) -> bool + Send + Sync>) {
            let client = self.client.clone();
            let channel = self.channel.clone();
            let describe = self.describe.clone();
            let origin = self.origin.clone();
            let key = self.key.clone();
            tokio::spawn(async move {
                use futures_util::StreamExt;
                loop {
                    match client.get_async_pubsub().await {
                        Ok(mut pubsub) => match pubsub.subscribe(&channel).await {
                            Ok(()) => {
                                let mut messages = pubsub.on_message();
                                while let Some(message) = messages.next().await {
                                    let Ok(payload) = message.get_payload::<String>() else {
                                        continue;
                                    };
                                    let payload = match key.decrypt(&channel, "handshake", &payload)
                                    {
                                        Ok(payload) => payload,
                                        Err(err) => {
                                            tracing::error!(store = %describe, channel = %channel, "a handshake announcement was refused: {err}");
                                            continue;
                                        }
                                    };
                                    match serde_json::from_str::<HandshakeChanged>(&payload) {
                                        Ok(heard) if heard.origin == origin => {}
                                        Ok(heard) => {
                                            if !on_heard(Some(heard)) {
                                                return;
                                            }
                                        }
                                        Err(err) => tracing::warn!(
                                            store = %describe,
                                            %err,
                                            "an unreadable handshake announcement was ignored"
                                        ),
                                    }
                                }
                            }
                            Err(err) => {
                                tracing::debug!(store = %describe, %err, "cannot subscribe to handshake changes")
                            }
                        },
                        Err(err) => {
                            tracing::debug!(store = %describe, %err, "cannot listen for handshake changes")
                        }
                    }
                    if !on_heard(None) {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            });
        }
    }
}
