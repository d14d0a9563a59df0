//! Handshake changes as the shared store orders them, and which of them a replica applies.
//!
//! A client may change one session's handshake memory through two replicas at once
//! (`logging/setLevel` through A while `resources/subscribe` goes through B). Each change is
//! therefore stored on its own, as a [`Change`] applied atomically in the session's hash (the
//! log level, one field per subscribed URI, `initialized`: `redis`), never by writing the
//! handshake whole, so changes of different concerns never overwrite each other. Every write
//! takes the next number of the session's handshake counter (`hv`), so two changes of one
//! concern (two levels, a subscribe and an unsubscribe of one URI) are ordered by the store.
//!
//! The writing replica announces each change with its number (`fanout`), and hears back its
//! own numbers when its write succeeds. [`Ledger`] keeps, per concern, the highest number a
//! replica knows of and what that change was; a replica applies to its in-memory handshake
//! and its upstream only the change the store ordered last. While a change the client made
//! through this replica is not yet numbered, announcements of that concern are noted but not
//! applied: whether they come before or after it is only known once it is numbered. A
//! restored session starts from the counter its load read (every change up to it is in what
//! was loaded), so a late announcement of an older change is never applied.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::exchange::handshake::{Change, Concern};

/// A change with its place in the store's order of the session's handshake changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Numbered {
    /// The session's handshake counter after this change (`hv`): larger is later.
    pub(crate) seq: u64,
    pub(crate) change: Change,
}

/// What the session loop hears about its handshake from the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum News {
    /// Changes this replica's client made, now written, with their numbers.
    Written(Vec<Numbered>),
    /// Changes another replica's client made, as that replica announced them.
    Announced(Vec<Numbered>),
}

/// Per concern, what a replica knows of the store's order (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    /// Every change numbered up to this is in what the session started from.
    floor: u64,
    /// The last change known per concern, and its number.
    known: HashMap<Concern, Numbered>,
    /// Changes the client made through this replica not yet numbered, per concern.
    unnumbered: HashMap<Concern, usize>,
}

impl Ledger {
    /// A ledger for a session that started from the store's state at counter `floor` (0 for
    /// a new session).
    pub(crate) fn new(floor: u64) -> Self {
        Self {
            floor,
            ..Self::default()
        }
    }

    /// The client changed `change`'s concern through this replica (its upstream was told).
    pub(crate) fn made(&mut self, change: &Change) {
        *self.unnumbered.entry(change.concern()).or_default() += 1;
    }

    /// This replica's `numbered` change was written: the change now in force for its concern
    /// when nothing else of it is waiting for a number (it may be another replica's, numbered
    /// later), `None` while something is.
    pub(crate) fn written(&mut self, numbered: Numbered) -> Option<Change> {
        let concern = numbered.change.concern();
        let waiting = match self.unnumbered.get_mut(&concern) {
            Some(count) => {
                *count = count.saturating_sub(1);
                *count
            }
            None => 0,
        };
        self.note(numbered);
        if waiting > 0 {
            return None;
        }
        self.unnumbered.remove(&concern);
        self.known.get(&concern).map(|known| known.change.clone())
    }

    /// Another replica announced `numbered`: the change to apply, when it is the latest of its
    /// concern and nothing of that concern made here waits for its number.
    pub(crate) fn announced(&mut self, numbered: Numbered) -> Option<Change> {
        let concern = numbered.change.concern();
        let change = numbered.change.clone();
        if !self.note(numbered) || self.unnumbered.contains_key(&concern) {
            return None;
        }
        Some(change)
    }

    /// Keeps `numbered` if it is the latest of its concern known; whether it was.
    fn note(&mut self, numbered: Numbered) -> bool {
        if numbered.seq <= self.floor {
            return false;
        }
        let concern = numbered.change.concern();
        match self.known.get(&concern) {
            Some(known) if known.seq >= numbered.seq => false,
            _ => {
                self.known.insert(concern, numbered);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(name: &str, seq: u64) -> Numbered {
        Numbered {
            seq,
            change: Change::Level {
                params: format!(r#"{{"level":"{name}"}}"#),
            },
        }
    }

    #[test]
    fn an_older_announcement_after_a_newer_one_is_not_applied() {
        let mut ledger = Ledger::new(0);
        assert_eq!(
            ledger.announced(level("error", 5)),
            Some(level("error", 5).change)
        );
        assert_eq!(ledger.announced(level("debug", 4)), None);
    }

    #[test]
    fn an_announcement_waits_while_a_change_of_its_concern_made_here_has_no_number() {
        // Ours is numbered after theirs: ours stays.
        let mut ledger = Ledger::new(0);
        ledger.made(&level("info", 0).change);
        assert_eq!(ledger.announced(level("error", 5)), None);
        assert_eq!(
            ledger.written(level("info", 6)),
            Some(level("info", 6).change)
        );
        // Ours is numbered before theirs: theirs is applied once ours is numbered.
        let mut ledger = Ledger::new(0);
        ledger.made(&level("info", 0).change);
        assert_eq!(ledger.announced(level("error", 5)), None);
        assert_eq!(
            ledger.written(level("info", 4)),
            Some(level("error", 5).change)
        );
    }

    #[test]
    fn other_concerns_are_applied_at_once() {
        let mut ledger = Ledger::new(0);
        ledger.made(&level("info", 0).change);
        let subscribe = Numbered {
            seq: 3,
            change: Change::Subscribe { uri: "a".into() },
        };
        assert_eq!(
            ledger.announced(subscribe.clone()),
            Some(subscribe.change.clone())
        );
        let unsubscribe = Numbered {
            seq: 2,
            change: Change::Unsubscribe { uri: "a".into() },
        };
        assert_eq!(
            ledger.announced(unsubscribe),
            None,
            "older than the subscribe"
        );
    }

    #[test]
    fn two_changes_made_here_settle_on_the_later() {
        let mut ledger = Ledger::new(0);
        ledger.made(&level("info", 0).change);
        ledger.made(&level("error", 0).change);
        assert_eq!(ledger.written(level("info", 1)), None);
        assert_eq!(
            ledger.written(level("error", 2)),
            Some(level("error", 2).change)
        );
    }

    #[test]
    fn changes_a_restored_session_loaded_are_not_applied_again() {
        let mut ledger = Ledger::new(10);
        assert_eq!(ledger.announced(level("info", 9)), None);
        assert!(ledger.announced(level("info", 11)).is_some());
    }

    #[test]
    fn requests_make_the_changes_the_store_keeps() {
        assert_eq!(
            Change::of_request("resources/subscribe", Some(r#"{"uri":"mem://a"}"#)),
            Some(Change::Subscribe {
                uri: "mem://a".into()
            })
        );
        assert_eq!(
            Change::of_request("logging/setLevel", Some(r#"{"level":"info"}"#)),
            Some(Change::Level {
                params: r#"{"level":"info"}"#.into()
            })
        );
        assert_eq!(Change::of_request("resources/subscribe", Some("{}")), None);
        assert_eq!(Change::of_request("tools/call", Some("{}")), None);
    }
}
