//! One live session's model states kept in step with the shared store.
//!
//! Before a request enters the session, [`StateSync::refresh`] renews the session's TTL and,
//! when another replica wrote newer states, loads them (merged with whatever a request still
//! running here changed: [`merge`]). After the session writes a line for the client,
//! [`StateSync::flush`] writes the handshake and every state that changed, so whatever a
//! client has been told is in the store before it can ask another replica. A write is a
//! compare-and-set on the states' version; on a conflict the fresh states are read, this
//! replica's changes are laid over them (the hooks are not run again, so no upstream call is
//! repeated) and the write is tried again, a few times.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::{Saved, SessionMeta, SharedStore, StoreError, StoredSession, Touched, merge};
use crate::context::SessionScope;
use crate::model::StateDescriptor;

/// How many times a conflicting write is merged and tried again before it is given up (the
/// states stay changed here and the next flush tries again).
const ATTEMPTS: usize = 5;

/// What a live session last agreed with the store.
struct Synced {
    version: u64,
    /// Each state as the store has it, by state type name.
    base: BTreeMap<String, Value>,
    /// The meta last written (`None`: not yet).
    meta: Option<SessionMeta>,
}

/// A live session's link to the shared store.
pub(crate) struct StateSync {
    store: SharedStore,
    id: Arc<str>,
    ttl: Duration,
    scope: Arc<SessionScope>,
    states: Vec<StateDescriptor>,
    synced: tokio::sync::Mutex<Synced>,
}

/// Whether a session the store was asked about is still there.
pub(crate) enum Presence {
    Live,
    Gone,
}

impl StateSync {
    /// The link of a session this replica creates: nothing is in the store yet.
    pub(crate) fn new(
        store: SharedStore,
        id: Arc<str>,
        ttl: Duration,
        scope: Arc<SessionScope>,
    ) -> Self {
        let states = scope.chain.state_types().to_vec();
        Self {
            store,
            id,
            ttl,
            scope,
            states,
            synced: tokio::sync::Mutex::new(Synced {
                version: 0,
                base: BTreeMap::new(),
                meta: None,
            }),
        }
    }

    /// The link of a session restored from `stored`: its states are loaded into the scope.
    pub(crate) fn restored(
        store: SharedStore,
        id: Arc<str>,
        ttl: Duration,
        scope: Arc<SessionScope>,
        stored: StoredSession,
    ) -> Result<Self, StoreError> {
        let mut sync = Self::new(store, id, ttl, scope);
        sync.apply(&stored.states)?;
        *sync.synced.get_mut() = Synced {
            version: stored.version,
            base: stored.states,
            meta: Some(stored.meta),
        };
        Ok(sync)
    }

    /// Renews the TTL and takes in states another replica wrote since this one last looked.
    pub(crate) async fn refresh(&self) -> Result<Presence, StoreError> {
        let backend = &self.store.backend;
        let mut synced = self.synced.lock().await;
        let version = match backend.touch(&self.id, self.ttl).await? {
            Touched::Version(version) => version,
            Touched::Ended => return Ok(Presence::Gone),
            Touched::Missing => {
                // Not yet written (its initialize is on its way), expired while this replica
                // kept it open (a long GET stream), or lost by a store restarted without
                // persistence: this replica has it all, so it writes it again.
                if let Some(meta) = synced.meta.clone() {
                    tracing::info!(session = %short(&self.id), "the session was missing from the store; writing it again");
                    if !backend.save_meta(&self.id, &meta, self.ttl).await? {
                        return Ok(Presence::Gone);
                    }
                    synced.version = 0;
                    synced.base.clear();
                }
                return Ok(Presence::Live);
            }
        };
        if version == synced.version {
            return Ok(Presence::Live);
        }
        let Some(fresh) = backend.load(&self.id, self.ttl).await? else {
            return Ok(Presence::Gone);
        };
        self.take_in(&mut synced, fresh)?;
        Ok(Presence::Live)
    }

    /// Writes the handshake (`meta`) if it changed and every state that changed.
    pub(crate) async fn flush(&self, meta: &SessionMeta) -> Result<Presence, StoreError> {
        let backend = &self.store.backend;
        let mut synced = self.synced.lock().await;
        if synced.meta.as_ref() != Some(meta) {
            if meta.handshake.initialize.is_none() && synced.meta.is_none() {
                // Nothing worth restoring yet: the session exists once its initialize did.
                return Ok(Presence::Live);
            }
            if !backend.save_meta(&self.id, meta, self.ttl).await? {
                return Ok(Presence::Gone);
            }
            synced.meta = Some(meta.clone());
        }
        for _ in 0..ATTEMPTS {
            let ours = self.snapshot()?;
            let changed: Vec<(String, String)> = ours
                .iter()
                .filter(|(name, value)| synced.base.get(*name) != Some(value))
                .map(|(name, value)| (name.clone(), value.to_string()))
                .collect();
            if changed.is_empty() {
                return Ok(Presence::Live);
            }
            match backend
                .save_states(&self.id, synced.version, changed, self.ttl)
                .await?
            {
                Saved::Version(version) => {
                    synced.version = version;
                    synced.base = ours;
                    return Ok(Presence::Live);
                }
                Saved::Ended => return Ok(Presence::Gone),
                Saved::Missing => {
                    // Lost by the store (or expired): this replica writes it again, whole.
                    if !backend.save_meta(&self.id, meta, self.ttl).await? {
                        return Ok(Presence::Gone);
                    }
                    synced.version = 0;
                    synced.base.clear();
                }
                Saved::Conflict => {
                    tracing::debug!(
                        session = %short(&self.id),
                        "another replica changed this session's state meanwhile; merging"
                    );
                    let Some(fresh) = backend.load(&self.id, self.ttl).await? else {
                        return Ok(Presence::Gone);
                    };
                    self.take_in(&mut synced, fresh)?;
                }
            }
        }
        tracing::warn!(
            session = %short(&self.id),
            "the session's state kept changing on other replicas; the next answer writes it"
        );
        Ok(Presence::Live)
    }

    /// Takes in the store's states: each one merged with what changed here since `base`.
    fn take_in(&self, synced: &mut Synced, fresh: StoredSession) -> Result<(), StoreError> {
        let ours = self.snapshot()?;
        let mut merged = BTreeMap::new();
        for (name, theirs) in &fresh.states {
            let value = match (synced.base.get(name), ours.get(name)) {
                (Some(base), Some(mine)) => merge(base, mine, theirs),
                (None, Some(mine)) if mine != theirs => merge(&Value::Null, mine, theirs),
                _ => theirs.clone(),
            };
            merged.insert(name.clone(), value);
        }
        self.apply(&merged)?;
        synced.version = fresh.version;
        synced.base = fresh.states;
        synced.meta = Some(fresh.meta);
        Ok(())
    }

    /// Every storable state of the session as JSON.
    fn snapshot(&self) -> Result<BTreeMap<String, Value>, StoreError> {
        let mut out = BTreeMap::new();
        for descriptor in &self.states {
            let Some(slot) = self.scope.states.get(&(descriptor.type_id)()) else {
                continue;
            };
            let saved = {
                let guard = match slot.lock() {
                    Ok(guard) => guard,
                    Err(poisoned) => poisoned.into_inner(),
                };
                descriptor.save(&**guard)
            };
            match saved {
                Some(Ok(value)) => {
                    out.insert((descriptor.type_name)().to_owned(), value);
                }
                Some(Err(err)) => return Err(self.corrupt(descriptor, err)),
                None => {}
            }
        }
        Ok(out)
    }

    /// Replaces the session's states by `states` (those it names).
    fn apply(&self, states: &BTreeMap<String, Value>) -> Result<(), StoreError> {
        for descriptor in &self.states {
            let Some(value) = states.get((descriptor.type_name)()) else {
                continue;
            };
            let Some(slot) = self.scope.states.get(&(descriptor.type_id)()) else {
                continue;
            };
            match descriptor.load(value.clone()) {
                Some(Ok(state)) => {
                    let mut guard = match slot.lock() {
                        Ok(guard) => guard,
                        Err(poisoned) => poisoned.into_inner(),
                    };
                    *guard = state;
                }
                Some(Err(err)) => return Err(self.corrupt(descriptor, err)),
                None => {}
            }
        }
        Ok(())
    }

    fn corrupt(&self, descriptor: &StateDescriptor, reason: String) -> StoreError {
        StoreError::Corrupt {
            store: self.store.to_string(),
            reason: format!("the state `{}`: {reason}", (descriptor.type_name)()),
        }
    }
}

/// The start of a session id, for logs.
fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

/// The models of `chain` whose `State` a shared store cannot carry (not serde), by name.
pub(crate) fn unstorable_models(chain: &crate::chain::Chain) -> Vec<&'static str> {
    chain
        .layers()
        .iter()
        .filter(|layer| layer.state.is_some_and(|state| !state.is_storable()))
        .map(|layer| layer.name)
        .collect()
}
