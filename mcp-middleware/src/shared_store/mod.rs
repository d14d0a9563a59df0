//! The shared session store (`serve --store redis://...`): what the replicas of one
//! project share so that any of them serves any session.
//!
//! This module owns the record of a session as the store keeps it (`StoredSession`: who owns
//! it, the handshake to replay to a fresh upstream, and each model's `State` as JSON under a
//! version), the [`SharedStore`] handle the HTTP front is given, and the backend trait a store
//! implements ([`redis`](self) behind the `redis` feature). How a live session keeps its model
//! state in step with the store is in `sync`; the three-way merge that settles two replicas'
//! concurrent updates of one state is in `merge`. Handshake changes are stored and ordered one
//! by one (`handshake`), and a change a client makes through one replica reaches the upstreams
//! the session runs on the others through `fanout`; the
//! configuration the replicas share (a project's documents, by generation) is
//! `SharedConfig` (`config`, behind the `redis` feature).
//!
//! What is stored, and what is not:
//! - the principal the session belongs to (an identity, never a credential: bearer tokens and
//!   client certificates are checked again on every request and never written);
//! - the handshake (`initialize` params, log level, resource subscriptions), replayed to the
//!   upstream a replica starts for a session it did not create: what the upstream itself kept
//!   in memory for the session is not carried;
//! - every model's `State` (serde), including paginate's and section-split's documents, each
//!   of which is kept once under a field of its own ([`DOCUMENTS`]);
//! - each owner's sessions, for the quota counted on every replica
//!   (`mcpm:{project}:quota:{owner}`);
//! - stateless 2026-07-28 clients' states, under `stateless:` and a digest of owner and client.
//!
//! Keys are namespaced per project (`mcpm:{project}:session:{name}`), so one Redis serves
//! several projects; each key expires after the idle timeout, renewed by every request (a
//! sliding TTL). The project is the keys' Redis Cluster hash tag (`{project}`, braces literal),
//! so that every script's keys are in one slot.
//!
//! Redis is not trusted with the replicas (`trust`): a session is named in keys by a keyed
//! digest of its id, never the id, every record written (sessions, events, the shared
//! configuration) is authenticated with a key derived from the secret the replicas share
//! ([`StoreTrust`]), and what the replicas announce on pub/sub is encrypted too; what does not
//! verify is logged and refused.

#[cfg(feature = "redis")]
mod config;
#[cfg(feature = "redis")]
mod connection;
mod documents;
pub(crate) mod events;
#[cfg(feature = "redis")]
mod events_redis;
pub(crate) mod fanout;
pub(crate) mod handshake;
mod merge;
#[cfg(feature = "redis")]
mod redis;
pub(crate) mod relay;
pub(crate) mod sync;
#[cfg(all(test, feature = "redis"))]
mod test_server;
#[cfg(all(test, feature = "redis"))]
mod tls_tests;
mod trust;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};

#[cfg(feature = "redis")]
pub use config::{ConfigGeneration, ConfigNews, Lagging, Published, SharedConfig};
pub use documents::DOCUMENTS;
pub(crate) use merge::merge;
pub use trust::{RECORD_PREFIX, RecordError, StoreKey, StoreTrust};

/// A shared session store: cheap to clone, given to every replica's HTTP front through
/// [`HttpOptions::shared_store`](crate::http::HttpOptions::shared_store).
///
/// ```no_run
/// # #[cfg(feature = "redis")]
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use mcp_middleware::shared_store::{SharedStore, StoreKey, StoreTrust};
///
/// // The secret every replica of the project is given (`mcpctl serve --state-key-file`).
/// let trust = StoreTrust::new(StoreKey::from_file("/run/secrets/mcpm-key".as_ref())?);
/// let store = SharedStore::redis("redis://127.0.0.1:6379/0", "my-project", &trust).await?;
/// println!("sessions live in {store}");
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct SharedStore {
    pub(crate) backend: Arc<dyn Backend>,
    /// Where handshake changes reach the other replicas running the session (`fanout`).
    pub(crate) fanout: Option<Arc<dyn fanout::Fanout>>,

    /// The SSE event log and deliveries between replicas (`events`).
    pub(crate) events: Arc<dyn events::EventLog>,
}

impl fmt::Debug for SharedStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SharedStore")
            .field(&self.backend.describe())
            .finish()
    }
}

impl fmt::Display for SharedStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.backend.describe())
    }
}

impl SharedStore {
    /// Connects to Redis (or Valkey) at `url` (`redis://HOST:PORT[/DB]`, or `rediss://` for
    /// TLS, verified as `trust` says), keeping this project's sessions under
    /// `mcpm:{namespace}:`, every record authenticated with `trust`'s key and every session
    /// named by its digest (`trust`). Fails when the URL is malformed or the server does not
    /// answer a `PING` within a few seconds; once running, a store that goes away makes
    /// requests fail fast with an error naming it, and they work again when it returns.
    #[cfg(feature = "redis")]
    pub async fn redis(url: &str, namespace: &str, trust: &StoreTrust) -> Result<Self, StoreError> {
        let backend = redis::RedisBackend::connect(url, namespace, trust).await?;
        let fanout = fanout::RedisFanout::new(url, namespace, trust)?;
        let events =
            events_redis::RedisEvents::connect(url, namespace, relay::ReplicaTag::random(), trust)?;
        Ok(Self {
            backend: Arc::new(backend),
            fanout: Some(Arc::new(fanout)),
            events: Arc::new(events),
        })
    }

    /// Checks that the store answers.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.backend.ping().await
    }
}

/// Why the shared store could not do what was asked. The message names the store (its URL
/// without credentials).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store's address is not one this build can use.
    #[error("the session store `{store}` is not usable: {reason}")]
    Config {
        /// The store, as given (credentials removed).
        store: String,
        /// What was wrong with it.
        reason: String,
    },
    /// The store did not answer, or answered with an error.
    #[error("the session store `{store}` is unavailable: {reason}")]
    Unavailable {
        /// The store (credentials removed).
        store: String,
        /// What happened.
        reason: String,
    },
    /// A record in the store could not be read (written by another version, or edited).
    #[error("the session store `{store}` holds an unreadable record for a session: {reason}")]
    Corrupt {
        /// The store (credentials removed).
        store: String,
        /// What could not be read.
        reason: String,
    },
}

/// What the store keeps of a session besides its model state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SessionMeta {
    /// [`Identity::principal`](crate::Identity::principal) of whoever started it.
    pub(crate) principal: String,
    /// Whose session quota it counts against (the principal, or an anonymous client's
    /// address).
    pub(crate) owner: String,
    /// What a fresh upstream is told before the session's requests reach it.
    pub(crate) handshake: HandshakeRecord,
}

/// The handshake memory of a session, as the store keeps it: what the restart path replays.
///
/// In the stored `meta` record only `initialize` is written; the log level, the subscriptions
/// and `initialized` are fields of their own, changed one
/// [`Change`](crate::exchange::handshake::Change) at a time.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct HandshakeRecord {
    /// The params of the client's `initialize` the upstream accepted.
    pub(crate) initialize: Option<String>,
    /// The params of the last `logging/setLevel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) log_level: Option<String>,
    /// Resources the client subscribed to.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub(crate) subscriptions: BTreeSet<String>,
    /// Whether the client sent `notifications/initialized` (to any replica): a replica that
    /// runs the session's upstream and has not told it yet does so when it hears this
    /// (`fanout`). Absent in records written before it existed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) initialized: bool,
}

/// A session as read from the store.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StoredSession {
    pub(crate) meta: SessionMeta,
    /// The session's handshake counter when it was read: every handshake change numbered up
    /// to it is in `meta.handshake` ([`handshake::Ledger::new`]).
    pub(crate) handshake_seq: u64,
    /// The version of `states`: every successful [`Backend::save_states`] adds one.
    pub(crate) version: u64,
    /// Each model's state as JSON, by the state type's name: skeletons, whose documents
    /// (see [`DOCUMENTS`]) are digests.
    pub(crate) states: BTreeMap<String, serde_json::Value>,
    /// Documents the skeletons refer to, by digest: those read with them (a `load` reads
    /// none).
    pub(crate) documents: BTreeMap<String, String>,
}

/// One compare-and-set write of a session's states ([`Backend::save_states`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StatesWrite {
    /// Changed states' skeletons as JSON, by state type name.
    pub(crate) states: Vec<(String, String)>,
    /// Documents not yet in the store, by digest.
    pub(crate) documents: Vec<(String, String)>,
    /// Digests of documents no state refers to any more.
    pub(crate) removed: Vec<String>,
}

/// How [`Backend::save_states`] went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
// Only the Redis backend makes them; without it the store cannot be built.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub(crate) enum Saved {
    /// Written; the new version.
    Version(u64),
    /// Someone else wrote first: the version was no longer the one expected.
    Conflict,
    /// The session is not in the store (expired, or lost by the store).
    Missing,
    /// The session was ended (`DELETE`).
    Ended,
}

/// How [`Backend::save_handshake`] went.
#[derive(Debug, Clone, PartialEq, Eq)]
// Only the Redis backend makes them; without it the store cannot be built.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub(crate) enum Changed {
    /// Written: the changes that changed something, with their numbers.
    Numbered(Vec<handshake::Numbered>),
    /// The session is not in the store (expired, or lost by the store).
    Missing,
    /// The session was ended (`DELETE`).
    Ended,
}

/// What [`Backend::touch`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
// Only the Redis backend makes them; without it the store cannot be built.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub(crate) enum Touched {
    /// The session is there; the version of its states.
    Version(u64),
    /// The session is not there, and was not ended: it expired, or the store lost it (a
    /// restart without persistence). A replica that holds it live writes it again.
    Missing,
    /// The session was ended (`DELETE`) within the last TTL.
    Ended,
}

/// What a replica hears from the others through the store.
#[derive(Debug, Clone, PartialEq, Eq)]
// Only the Redis backend makes them; without it the store cannot be built.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub(crate) enum Heard {
    /// Session `id` was ended (`DELETE`) on some replica.
    Ended(String),
    /// A message for session `id`'s GET stream, produced on a replica that does not hold it.
    ForStream { id: String, line: String },
    /// The connection to the store broke and is being made again (asks whether to go on).
    Reconnecting,
}

/// What a shared store does. Every call is bounded in time: a store that does not answer is an
/// [`StoreError::Unavailable`], never a hang.
pub(crate) trait Backend: Send + Sync + 'static {
    /// The store's address, without credentials, for messages.
    fn describe(&self) -> &str;
    /// Checks that the store answers.
    fn ping(&self) -> BoxFuture<'_, Result<(), StoreError>>;
    /// Reads session `id` and renews its TTL; `None` when the store has no such session.
    fn load<'a>(
        &'a self,
        id: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Option<StoredSession>, StoreError>>;
    /// Renews session `id`'s TTL (and its place in `owner`'s quota, when known) and returns
    /// the version of its states. A renewal may be skipped while the TTL left is at least
    /// `ttl`, so that a request that changes nothing writes nothing.
    fn touch<'a>(
        &'a self,
        id: &'a str,
        owner: Option<&'a str>,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Touched, StoreError>>;
    /// Writes session `id`'s meta (creating the session when it is new, with the whole
    /// handshake: later changes go through [`Backend::save_handshake`]), renewing its TTL;
    /// `false` (nothing written) when the session was ended.
    fn save_meta<'a>(
        &'a self,
        id: &'a str,
        meta: &'a SessionMeta,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;
    /// Applies `changes` to session `id`'s stored handshake, each atomically and numbered by
    /// the store (see `handshake`), renewing its TTL.
    fn save_handshake<'a>(
        &'a self,
        id: &'a str,
        changes: &'a [crate::exchange::handshake::Change],
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Changed, StoreError>>;
    /// Writes `write` to session `id` if its version is still `expected`.
    fn save_states<'a>(
        &'a self,
        id: &'a str,
        expected: u64,
        write: StatesWrite,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Saved, StoreError>>;
    /// The documents of session `id` with the given digests (those the store has).
    fn documents<'a>(
        &'a self,
        id: &'a str,
        digests: Vec<String>,
    ) -> BoxFuture<'a, Result<BTreeMap<String, String>, StoreError>>;
    /// Calls `on_heard` with what every replica announces (sessions ended, messages for a
    /// session's GET stream), until it returns `false`.
    fn listen(&self, on_heard: Box<dyn Fn(Heard) -> bool + Send + Sync>);
    /// Announces `line` for session `id`'s GET stream, which another replica may hold.
    fn publish<'a>(&'a self, id: &'a str, line: &'a str) -> BoxFuture<'a, Result<(), StoreError>>;
    /// Counts `owner`'s sessions on every replica and, when fewer than `limit`, counts session
    /// `id` among them (atomically: two replicas cannot both take the last place); `false`
    /// when `owner` is at its limit. A session counts while its record lives (ended by
    /// `delete` or its TTL); one claimed but never written stops counting after `ttl`.
    fn claim<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
        limit: usize,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;
    /// Stops counting session `id` against `owner` (it could not be started).
    fn release<'a>(&'a self, owner: &'a str, id: &'a str) -> BoxFuture<'a, Result<(), StoreError>>;
    /// Removes session `id`, leaving a mark for `ttl` that it was ended (so a replica that
    /// still holds it ends it instead of writing it again); whether it was there.
    fn delete<'a>(&'a self, id: &'a str, ttl: Duration) -> BoxFuture<'a, Result<bool, StoreError>>;
}

/// `url` without its password (`redis://user:secret@host` -> `redis://user:***@host`), for
/// messages and logs.
///
/// ```
/// use mcp_middleware::shared_store::redact;
/// assert_eq!(redact("redis://app:secret@db:6379/1"), "redis://app:***@db:6379/1");
/// ```
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
            format!("{scheme}://{user}:***@{host}{path}")
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(
            redact("redis://:hunter2@db:6379/1"),
            "redis://:***@db:6379/1"
        );
        assert_eq!(
            redact("redis://app:hunter2@db:6379"),
            "redis://app:***@db:6379"
        );
        assert_eq!(redact("redis://db:6379/2"), "redis://db:6379/2");
    }
}
