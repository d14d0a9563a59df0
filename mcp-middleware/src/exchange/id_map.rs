//! The one owner of a hop's request ids: allocation, the requests in flight (whose answer is
//! awaited, and by whom), the peer's id each one answers to, progress tokens and expiry.
//!
//! Every place that rewrites ids on the way through the proxy keeps its requests here: the
//! session's raw path and its proxy-made requests (`Session::pending`, client -> upstream),
//! requests the upstream sends the client (`Session::relayed`, upstream -> client), the chain's
//! upstream end (requests hook tasks write themselves, sharing the session's [`IdSource`]), a
//! `ServerSet`'s merger (one map per direction over all its servers) and the HTTP stateless
//! remap (ids of the session's own, from an [`IdSource`]).
//!
//! What an entry is (who waits for it) stays the user's type: it implements [`Waiting`] to say
//! which peer id it answers to, which progress token the peer sent and when it expires. The map
//! keeps the peer-id index in step with the entries, so "client id -> upstream id" (a
//! cancellation, a duplicate-id check) and "upstream id -> client id" (an answer) can never
//! drift apart.
//!
//! The progress-token rule of every hop is the same ([`swap_progress_token`]): the token sent
//! on is the request's own id on this hop, and the peer's token is kept in the entry for the
//! way back, so a progress notification finds its request with one lookup.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

/// Fresh ids for one hop, shareable between tasks (cloning it shares the counter). Ids start at
/// 1 and never repeat within the hop.
#[derive(Debug, Clone, Default)]
pub(crate) struct IdSource(Arc<AtomicU64>);

impl IdSource {
    /// A fresh id.
    pub(crate) fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// What a map entry tells about itself. Every method has a default for entries that have no
/// such fact (a request the proxy made itself answers to no peer, has no token, never expires).
pub(crate) trait Waiting {
    /// The id the peer knows this request by (raw JSON), when a peer asked for it.
    fn peer_id(&self) -> Option<&str> {
        None
    }
    /// The progress token the peer sent (raw JSON), replaced by this hop's id on the way on.
    fn progress_token(&self) -> Option<&str> {
        None
    }
    /// When the request stops being waited for.
    fn deadline(&self) -> Option<Instant> {
        None
    }
    /// Sets a new deadline (progress arrived). Entries without one ignore it.
    fn set_deadline(&mut self, _deadline: Instant) {}
}

/// Requests in flight on one hop, by this hop's id, with the index by peer id kept in step.
#[derive(Debug)]
pub(crate) struct IdMap<W> {
    ids: IdSource,
    entries: HashMap<u64, W>,
    by_peer: HashMap<Box<str>, u64>,
}

impl<W> Default for IdMap<W> {
    fn default() -> Self {
        Self {
            ids: IdSource::default(),
            entries: HashMap::new(),
            by_peer: HashMap::new(),
        }
    }
}

impl<W: Waiting> IdMap<W> {
    /// An empty map allocating from `ids` (shared with whoever else numbers requests on this
    /// hop).
    pub(crate) fn new(ids: IdSource) -> Self {
        Self {
            ids,
            entries: HashMap::new(),
            by_peer: HashMap::new(),
        }
    }

    /// A fresh id on this hop (not yet in the map).
    pub(crate) fn next_id(&self) -> u64 {
        self.ids.next()
    }

    /// Allocates an id and keeps `waiter` under it.
    pub(crate) fn allocate(&mut self, waiter: W) -> u64 {
        let id = self.next_id();
        self.insert(id, waiter);
        id
    }

    /// Keeps `waiter` under `id` (an id from this map's source), replacing what was there.
    pub(crate) fn insert(&mut self, id: u64, waiter: W) {
        if let Some(peer) = waiter.peer_id() {
            self.by_peer.insert(peer.into(), id);
        }
        if let Some(old) = self.entries.insert(id, waiter) {
            self.unindex(id, &old);
        }
    }

    fn unindex(&mut self, id: u64, waiter: &W) {
        if let Some(peer) = waiter.peer_id()
            && self.by_peer.get(peer) == Some(&id)
        {
            self.by_peer.remove(peer);
        }
    }

    /// Whether `id` is in flight.
    pub(crate) fn contains(&self, id: u64) -> bool {
        self.entries.contains_key(&id)
    }

    /// The entry under `id`.
    pub(crate) fn get(&self, id: u64) -> Option<&W> {
        self.entries.get(&id)
    }

    /// The entry under `id`, to change it. Its peer id must not change (take it out and put it
    /// back in for that).
    pub(crate) fn get_mut(&mut self, id: u64) -> Option<&mut W> {
        self.entries.get_mut(&id)
    }

    /// Takes the entry under `id` out (its answer arrived, or it was given up).
    pub(crate) fn remove(&mut self, id: u64) -> Option<W> {
        let waiter = self.entries.remove(&id)?;
        self.unindex(id, &waiter);
        Some(waiter)
    }

    /// The id on this hop of the request the peer knows as `peer_id`.
    pub(crate) fn by_peer(&self, peer_id: &str) -> Option<u64> {
        self.by_peer.get(peer_id).copied()
    }

    /// Takes out the request the peer knows as `peer_id` (it cancelled it): its id on this hop,
    /// to cancel it onward, and its entry.
    pub(crate) fn remove_by_peer(&mut self, peer_id: &str) -> Option<(u64, W)> {
        let id = self.by_peer(peer_id)?;
        self.remove(id).map(|waiter| (id, waiter))
    }

    /// Progress arrived under `token` (this hop's id, as the token was swapped): the request's
    /// deadline starts again (`timeout` from now, when there is one). Returns its id and entry.
    pub(crate) fn progress(&mut self, token: &str, timeout: Option<Duration>) -> Option<(u64, &W)> {
        let id = token.parse::<u64>().ok()?;
        let waiter = self.entries.get_mut(&id)?;
        if let Some(timeout) = timeout {
            waiter.set_deadline(Instant::now() + timeout);
        }
        Some((id, waiter))
    }

    /// Takes out every request whose deadline is at or before `now`, in id order.
    pub(crate) fn expired(&mut self, now: Instant) -> Vec<(u64, W)> {
        let mut ids: Vec<u64> = self
            .entries
            .iter()
            .filter(|(_, w)| w.deadline().is_some_and(|d| d <= now))
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        ids.into_iter()
            .filter_map(|id| self.remove(id).map(|w| (id, w)))
            .collect()
    }

    /// Takes out every entry, in id order.
    pub(crate) fn drain(&mut self) -> Vec<(u64, W)> {
        self.by_peer.clear();
        let mut all: Vec<(u64, W)> = self.entries.drain().collect();
        all.sort_unstable_by_key(|(id, _)| *id);
        // A burst of requests must not keep its memory for the session's life.
        self.entries.shrink_to(64);
        all
    }

    /// Keeps only the entries `keep` says yes to.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(u64, &W) -> bool) {
        let gone: Vec<u64> = self
            .entries
            .iter()
            .filter(|(id, w)| !keep(**id, w))
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            self.remove(id);
        }
    }

    /// Every entry, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&u64, &W)> {
        self.entries.iter()
    }

    /// Every entry.
    pub(crate) fn values(&self) -> impl Iterator<Item = &W> {
        self.entries.values()
    }

    /// The entries as a map by id.
    pub(crate) fn entries(&self) -> &HashMap<u64, W> {
        &self.entries
    }

    /// Whether nothing is in flight.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Replaces `params._meta.progressToken` with `id` (this hop's own), returning the old token
/// as raw JSON. `None` if there is no token.
pub(crate) fn swap_progress_token(params: &mut Map<String, Value>, id: u64) -> Option<Box<str>> {
    let old = params
        .get_mut("_meta")?
        .as_object_mut()?
        .get_mut("progressToken")?;
    let old = std::mem::replace(old, Value::from(id));
    Some(old.to_string().into_boxed_str())
}

/// [`swap_progress_token`] on params as text: the params rewritten and the old token. `None`
/// when the params are not a JSON object; the token is `None` when there was none (the params
/// come back re-serialised all the same).
pub(crate) fn swap_progress_token_in(params: &str, id: u64) -> Option<(String, Option<Box<str>>)> {
    let mut map: Map<String, Value> = serde_json::from_str(params).ok()?;
    let token = swap_progress_token(&mut map, id);
    Some((serde_json::to_string(&map).ok()?, token))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct Entry {
        peer: Option<&'static str>,
        token: Option<&'static str>,
        deadline: Option<Instant>,
    }

    impl Waiting for Entry {
        fn peer_id(&self) -> Option<&str> {
            self.peer
        }
        fn progress_token(&self) -> Option<&str> {
            self.token
        }
        fn deadline(&self) -> Option<Instant> {
            self.deadline
        }
        fn set_deadline(&mut self, deadline: Instant) {
            self.deadline = Some(deadline);
        }
    }

    fn client(peer: &'static str) -> Entry {
        Entry {
            peer: Some(peer),
            token: None,
            deadline: None,
        }
    }

    #[test]
    fn ids_are_fresh_and_shared_by_every_map_on_the_hop() {
        let ids = IdSource::default();
        let mut a: IdMap<Entry> = IdMap::new(ids.clone());
        let mut b: IdMap<Entry> = IdMap::new(ids.clone());
        let first = a.allocate(client("1"));
        let second = b.allocate(client("1"));
        let third = ids.next();
        assert_eq!((first, second, third), (1, 2, 3));
        assert_eq!(a.next_id(), 4);
    }

    #[test]
    fn splicing_in_and_out_keeps_both_directions_in_step() {
        let mut map: IdMap<Entry> = IdMap::default();
        let id = map.allocate(client("\"abc\""));
        assert_eq!(map.by_peer("\"abc\""), Some(id));
        assert_eq!(map.get(id).and_then(|e| e.peer), Some("\"abc\""));
        // The answer arrives: both directions are forgotten together.
        assert!(map.remove(id).is_some());
        assert_eq!(map.by_peer("\"abc\""), None);
        assert!(map.is_empty());
        // An entry without a peer is not indexed.
        let own = map.allocate(Entry {
            peer: None,
            token: None,
            deadline: None,
        });
        assert!(map.contains(own));
        assert!(map.by_peer.is_empty());
    }

    #[test]
    fn replacing_an_entry_moves_its_peer_index() {
        let mut map: IdMap<Entry> = IdMap::default();
        let id = map.allocate(client("7"));
        map.insert(id, client("8"));
        assert_eq!(map.by_peer("7"), None);
        assert_eq!(map.by_peer("8"), Some(id));
    }

    #[test]
    fn progress_finds_its_request_by_this_hops_id_and_restarts_the_deadline() {
        let mut map: IdMap<Entry> = IdMap::default();
        let early = Instant::now();
        let id = map.allocate(Entry {
            peer: Some("1"),
            token: Some("\"tok\""),
            deadline: Some(early),
        });
        let (found, entry) = map
            .progress(&id.to_string(), Some(Duration::from_secs(60)))
            .unwrap();
        assert_eq!((found, entry.token), (id, Some("\"tok\"")));
        assert!(entry.deadline.unwrap() > early);
        assert!(map.progress("99", None).is_none());
        assert!(map.progress("\"not a number\"", None).is_none());
    }

    #[test]
    fn cancelling_by_the_peers_id_takes_the_request_out() {
        let mut map: IdMap<Entry> = IdMap::default();
        let a = map.allocate(client("1"));
        let b = map.allocate(client("2"));
        let (cancelled, entry) = map.remove_by_peer("1").unwrap();
        assert_eq!((cancelled, entry.peer), (a, Some("1")));
        assert!(
            map.remove_by_peer("1").is_none(),
            "a second cancel finds nothing"
        );
        assert!(map.contains(b));
    }

    #[test]
    fn expiry_takes_out_what_is_due_in_id_order() {
        let mut map: IdMap<Entry> = IdMap::default();
        let now = Instant::now();
        let due = |peer| Entry {
            peer: Some(peer),
            token: None,
            deadline: Some(now),
        };
        let a = map.allocate(due("a"));
        let later = map.allocate(Entry {
            peer: Some("b"),
            token: None,
            deadline: Some(now + Duration::from_secs(60)),
        });
        let c = map.allocate(due("c"));
        let never = map.allocate(client("d"));
        let expired: Vec<u64> = map.expired(now).into_iter().map(|(id, _)| id).collect();
        assert_eq!(expired, vec![a, c]);
        assert_eq!(map.by_peer("a"), None);
        assert!(map.contains(later) && map.contains(never));
        let rest: Vec<u64> = map.drain().into_iter().map(|(id, _)| id).collect();
        assert_eq!(rest, vec![later, never]);
        assert_eq!(map.by_peer("b"), None);
    }

    #[test]
    fn retain_keeps_the_index_in_step() {
        let mut map: IdMap<Entry> = IdMap::default();
        let a = map.allocate(client("a"));
        let b = map.allocate(client("b"));
        map.retain(|id, _| id == b);
        assert!(!map.contains(a));
        assert_eq!(map.by_peer("a"), None);
        assert_eq!(map.by_peer("b"), Some(b));
    }

    #[test]
    fn the_progress_token_becomes_this_hops_id() {
        let (params, token) =
            swap_progress_token_in(r#"{"name":"x","_meta":{"progressToken":"tok"}}"#, 5).unwrap();
        assert_eq!(params, r#"{"name":"x","_meta":{"progressToken":5}}"#);
        assert_eq!(token.as_deref(), Some("\"tok\""));
        let (params, token) = swap_progress_token_in(r#"{"name":"x"}"#, 5).unwrap();
        assert_eq!((params.as_str(), token), (r#"{"name":"x"}"#, None));
        assert!(swap_progress_token_in("[1]", 5).is_none());
    }
}
