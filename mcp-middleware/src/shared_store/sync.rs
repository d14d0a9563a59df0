//! One live session's model states kept in step with the shared store.
//!
//! Before a request enters the session, [`StateSync::refresh`] renews the session's TTL and,
//! when another replica wrote newer states, loads them (merged with whatever a request still
//! running here changed: [`merge`]). After the session writes a line for the client,
//! [`StateSync::flush`] writes the handshake changes (one by one, never the handshake whole:
//! `handshake`) and every state that changed, so whatever a client has been told is in the
//! store before it can ask another replica. A write is a
//! compare-and-set on the states' version; on a conflict the fresh states are read, this
//! replica's changes are laid over them (the hooks are not run again, so no upstream call is
//! repeated) and the write is tried again, a few times.
//!
//! Only states a hook took (`ctx.state`) since the last write are serialised, and only those
//! that differ from the store's are written: a request that changed nothing costs the one
//! round trip of `refresh`. What is compared, merged and written is each state's skeleton
//! (its documents replaced by digests, see `documents`); a document is written once, with the
//! skeleton that first refers to it, and read only by a replica that does not hold it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;

use super::documents::{self, Split};
use super::handshake::Numbered;
use super::{
    Changed, Saved, SessionMeta, SharedStore, StatesWrite, StoreError, StoredSession, Touched,
    merge,
};
use crate::context::SessionScope;
use crate::exchange::handshake::Change;
use crate::model::StateDescriptor;

/// How many times a conflicting write is merged and tried again before it is given up (the
/// states stay changed here and the next flush tries again).
const ATTEMPTS: usize = 5;

/// What a live session last agreed with the store.
struct Synced {
    version: u64,
    /// Each state's skeleton as the store has it, by state type name.
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
    /// Whether the session is written before any `initialize` (a stateless session, which
    /// has none).
    without_handshake: bool,
    /// Whose quota the session counts against, renewed with its TTL (`None`: the written
    /// meta's owner).
    owner: Option<Arc<str>>,
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
            without_handshake: false,
            owner: None,
        }
    }

    /// The same link, the session counted against `owner`'s quota.
    pub(crate) fn owned_by(self, owner: &str) -> Self {
        Self {
            owner: Some(owner.into()),
            ..self
        }
    }

    /// The same link, written from the first answer on when `yes` (a stateless session).
    pub(crate) fn without_handshake(self, yes: bool) -> Self {
        Self {
            without_handshake: yes,
            ..self
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
        let full = stored
            .states
            .iter()
            .map(|(name, skeleton)| (name.clone(), documents::join(skeleton, &stored.documents)))
            .collect();
        sync.apply(&full)?;
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
        let owner = self
            .owner
            .as_deref()
            .or_else(|| synced.meta.as_ref().map(|meta| meta.owner.as_str()));
        let version = match backend.touch(&self.id, owner, self.ttl).await? {
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
                    // Every state goes with the next answer.
                    self.mark_dirty(&self.states.iter().collect::<Vec<_>>());
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
        self.take_in(&mut synced, fresh, &[]).await?;
        Ok(Presence::Live)
    }

    /// Writes the session's `meta` if its `initialize` (or owner) changed, the handshake
    /// `changes` the client made through this replica (each on its own, numbered by the store:
    /// `handshake`; those written are taken out of `changes` and returned with their numbers)
    /// and every state that changed. Changes not written (the store failed, or the session is
    /// not worth storing yet) stay in `changes` for the next flush.
    pub(crate) async fn flush(
        &self,
        meta: &SessionMeta,
        changes: &mut Vec<Change>,
    ) -> Result<(Presence, Vec<Numbered>), StoreError> {
        let backend = &self.store.backend;
        let mut synced = self.synced.lock().await;
        let written = synced.meta.as_ref().is_some_and(|known| {
            known.principal == meta.principal
                && known.owner == meta.owner
                && known.handshake.initialize == meta.handshake.initialize
        });
        if !written {
            if meta.handshake.initialize.is_none()
                && synced.meta.is_none()
                && !self.without_handshake
            {
                // Nothing worth restoring yet: the session exists once its initialize did.
                return Ok((Presence::Live, Vec::new()));
            }
            if !backend.save_meta(&self.id, meta, self.ttl).await? {
                return Ok((Presence::Gone, Vec::new()));
            }
        }
        // The whole handshake as this replica knows it, for writing the session again should
        // the store lose it; only the changes are written otherwise.
        synced.meta = Some(meta.clone());
        let mut numbered = Vec::new();
        if !changes.is_empty() {
            let mut answer = backend.save_handshake(&self.id, changes, self.ttl).await?;
            if answer == Changed::Missing {
                // Lost by the store (or expired): this replica writes it again, whole.
                if !backend.save_meta(&self.id, meta, self.ttl).await? {
                    return Ok((Presence::Gone, Vec::new()));
                }
                synced.version = 0;
                synced.base.clear();
                self.mark_dirty(&self.states.iter().collect::<Vec<_>>());
                answer = backend.save_handshake(&self.id, changes, self.ttl).await?;
            }
            match answer {
                Changed::Numbered(written) => {
                    changes.clear();
                    numbered = written;
                }
                Changed::Ended => return Ok((Presence::Gone, Vec::new())),
                // Gone again at once: the next flush tries again.
                Changed::Missing => return Ok((Presence::Live, Vec::new())),
            }
        }
        // Only states a hook took since the last write are serialised; none taken, nothing
        // to write and no round trip.
        let taken = self.take_dirty();
        if taken.is_empty() {
            return Ok((Presence::Live, numbered));
        }
        let written = self.write_states(&mut synced, meta, &taken).await;
        if !matches!(written, Ok(true)) {
            // Not (all) written: the next flush tries them again.
            self.mark_dirty(&taken);
        }
        // Handshake changes written are reported even when the states failed: they are stored.
        match written {
            Ok(true) => Ok((Presence::Live, numbered)),
            Ok(false) => Ok((Presence::Gone, numbered)),
            Err(err) if numbered.is_empty() => Err(err),
            Err(err) => {
                tracing::warn!(session = %short(&self.id), "{err}; the session's changed state is written with its next answer");
                Ok((Presence::Live, numbered))
            }
        }
    }

    /// Writes the states `taken` names that differ from the store's, merging on conflict;
    /// `Ok(false)`: the session was ended.
    async fn write_states(
        &self,
        synced: &mut Synced,
        meta: &SessionMeta,
        taken: &[&StateDescriptor],
    ) -> Result<bool, StoreError> {
        let backend = &self.store.backend;
        let mut taken = taken.to_vec();
        for _ in 0..ATTEMPTS {
            let mut ours = BTreeMap::new();
            let mut held = BTreeMap::new();
            for (name, state) in self.snapshot_of(&taken)? {
                let Split {
                    skeleton,
                    documents,
                } = documents::split(state);
                ours.insert(name, skeleton);
                held.extend(documents);
            }
            let changed: Vec<(String, String)> = ours
                .iter()
                .filter(|(name, value)| synced.base.get(*name) != Some(value))
                .map(|(name, value)| (name.clone(), value.to_string()))
                .collect();
            if changed.is_empty() {
                return Ok(true);
            }
            // Documents the store has are referred to by its skeletons (`base`, which the
            // compare-and-set confirms): write the others, remove those no skeleton keeps.
            let before = referred(synced.base.values());
            let mut after_base = synced.base.clone();
            after_base.extend(ours.iter().map(|(n, v)| (n.clone(), v.clone())));
            let after = referred(after_base.values());
            let write = StatesWrite {
                states: changed,
                documents: held
                    .into_iter()
                    .filter(|(digest, _)| after.contains(digest) && !before.contains(digest))
                    .collect(),
                removed: before.difference(&after).cloned().collect(),
            };
            match backend
                .save_states(&self.id, synced.version, write, self.ttl)
                .await?
            {
                Saved::Version(version) => {
                    synced.version = version;
                    synced.base = after_base;
                    return Ok(true);
                }
                Saved::Ended => return Ok(false),
                Saved::Missing => {
                    // Lost by the store (or expired): this replica writes it again, whole.
                    if !backend.save_meta(&self.id, meta, self.ttl).await? {
                        return Ok(false);
                    }
                    synced.version = 0;
                    synced.base.clear();
                    taken = self.states.iter().collect();
                }
                Saved::Conflict => {
                    tracing::debug!(
                        session = %short(&self.id),
                        "another replica changed this session's state meanwhile; merging"
                    );
                    let Some(fresh) = backend.load(&self.id, self.ttl).await? else {
                        return Ok(false);
                    };
                    self.take_in(synced, fresh, &taken).await?;
                }
            }
        }
        tracing::warn!(
            session = %short(&self.id),
            "the session's state kept changing on other replicas; the next answer writes it"
        );
        Ok(true)
    }

    /// The states hooks took since the last call, their dirty marks cleared. A mark is
    /// cleared before the state is read, so a hook that takes it meanwhile marks it again.
    fn take_dirty(&self) -> Vec<&StateDescriptor> {
        self.states
            .iter()
            .filter(|descriptor| {
                self.scope
                    .dirty
                    .get(&(descriptor.type_id)())
                    .is_some_and(|dirty| dirty.swap(false, Ordering::AcqRel))
            })
            .collect()
    }

    /// Marks `states` as changed, for the next flush.
    fn mark_dirty(&self, states: &[&StateDescriptor]) {
        for descriptor in states {
            if let Some(dirty) = self.scope.dirty.get(&(descriptor.type_id)()) {
                dirty.store(true, Ordering::Release);
            }
        }
    }

    /// Takes in the store's states: each one a hook changed here (`changing`, being written,
    /// or marked dirty) merged with what changed here since `base` (its default when the
    /// store had none), the others as the store has them. Documents the store's skeletons
    /// refer to that this replica does not hold are read.
    async fn take_in(
        &self,
        synced: &mut Synced,
        fresh: StoredSession,
        changing: &[&StateDescriptor],
    ) -> Result<(), StoreError> {
        let mut ours = BTreeMap::new();
        let mut held = fresh.documents;
        for (name, state) in self.snapshot()? {
            let Split {
                skeleton,
                documents,
            } = documents::split(state);
            ours.insert(name, skeleton);
            held.extend(documents);
        }
        let wanted: Vec<String> = referred(fresh.states.values())
            .into_iter()
            .filter(|digest| !held.contains_key(digest))
            .collect();
        held.extend(self.store.backend.documents(&self.id, wanted).await?);
        let mut merged = BTreeMap::new();
        for (name, theirs) in &fresh.states {
            let descriptor = self.states.iter().find(|d| (d.type_name)() == name);
            let changed_here = descriptor.is_some_and(|descriptor| {
                let id = (descriptor.type_id)();
                changing.iter().any(|d| (d.type_id)() == id)
                    || self
                        .scope
                        .dirty
                        .get(&id)
                        .is_some_and(|dirty| dirty.load(Ordering::Acquire))
            });
            let value = match (changed_here, synced.base.get(name), ours.get(name)) {
                (true, Some(base), Some(mine)) => merge(base, mine, theirs),
                (true, None, Some(mine)) => {
                    let base = descriptor.and_then(default_skeleton).unwrap_or(Value::Null);
                    merge(&base, mine, theirs)
                }
                _ => theirs.clone(),
            };
            if value != *theirs
                && let Some(descriptor) = descriptor
            {
                // Ours laid over theirs: the store does not have it yet.
                self.mark_dirty(&[descriptor]);
            }
            merged.insert(name.clone(), documents::join(&value, &held));
        }
        self.apply(&merged)?;
        synced.version = fresh.version;
        synced.base = fresh.states;
        synced.meta = Some(fresh.meta);
        Ok(())
    }

    /// Every storable state of the session as JSON.
    fn snapshot(&self) -> Result<BTreeMap<String, Value>, StoreError> {
        self.snapshot_of(&self.states.iter().collect::<Vec<_>>())
    }

    /// The storable states among `states` as JSON.
    fn snapshot_of(
        &self,
        states: &[&StateDescriptor],
    ) -> Result<BTreeMap<String, Value>, StoreError> {
        let mut out = BTreeMap::new();
        for descriptor in states {
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

/// The skeleton of a fresh (default) state of `descriptor`'s type, when it is storable.
fn default_skeleton(descriptor: &StateDescriptor) -> Option<Value> {
    let fresh = (descriptor.new)();
    let state = descriptor.save(&*fresh)?.ok()?;
    Some(documents::split(state).skeleton)
}

/// Every document digest the skeletons `states` refer to.
fn referred<'a>(states: impl Iterator<Item = &'a Value>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for state in states {
        documents::digests(state, &mut out);
    }
    out
}

/// Reads the documents `stored`'s skeletons refer to (a session about to be restored).
pub(crate) async fn with_documents(
    store: &SharedStore,
    id: &str,
    mut stored: StoredSession,
) -> Result<StoredSession, StoreError> {
    let wanted = referred(stored.states.values()).into_iter().collect();
    stored.documents = store.backend.documents(id, wanted).await?;
    Ok(stored)
}

/// How logs name session `id` (`crate::session_id::log_id`).
fn short(id: &str) -> String {
    crate::session_id::log_id(id)
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
