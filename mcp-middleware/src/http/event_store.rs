//! The event store: the SSE events of one session, kept for `Last-Event-ID` replay.
//!
//! Every event the proxy sends on a resumable stream is kept here, delivered or not, so a
//! client whose connection broke can ask for everything after the last event it saw. The store
//! is bounded by a count and by bytes; the oldest events go first. A resumption from an event
//! the store no longer has replays what is left and says so in the log.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// A stream of one session: `0` is the standalone (GET) stream, `1..` one per request.
pub(crate) type StreamId = u64;

/// The events of one session.
#[derive(Debug)]
pub(crate) struct EventStore {
    events: VecDeque<Stored>,
    bytes: usize,
    per_stream: HashMap<StreamId, usize>,
    max_events: usize,
    max_bytes: usize,
}

#[derive(Debug)]
struct Stored {
    stream: StreamId,
    seq: u64,
    line: Kept,
}

/// A kept event's message: shared with the delivery that sent it, or owned, as a message cut
/// through is at its end (`Streams::close_streamed`): taken as it is, and copied into a shared
/// one only when it is replayed, which few are.
#[derive(Debug)]
pub(crate) enum Kept {
    /// The message, as deliveries carry it.
    Shared(Arc<str>),
    /// The message, owned.
    Owned(String),
}

impl Kept {
    /// The message's length in bytes.
    pub(crate) fn len(&self) -> usize {
        match self {
            Self::Shared(line) => line.len(),
            Self::Owned(line) => line.len(),
        }
    }

    /// The message as deliveries carry it.
    pub(crate) fn shared(&self) -> Arc<str> {
        match self {
            Self::Shared(line) => line.clone(),
            Self::Owned(line) => line.as_str().into(),
        }
    }
}

impl EventStore {
    pub(crate) fn new(max_events: usize, max_bytes: usize) -> Self {
        Self {
            events: VecDeque::new(),
            bytes: 0,
            per_stream: HashMap::new(),
            max_events,
            max_bytes,
        }
    }

    /// Keeps event `seq` of `stream`, evicting the oldest events beyond the bounds.
    pub(crate) fn push(&mut self, stream: StreamId, seq: u64, line: Arc<str>) {
        self.push_kept(stream, seq, Kept::Shared(line));
    }

    /// [`EventStore::push`] for a message kept as [`Kept`] says.
    pub(crate) fn push_kept(&mut self, stream: StreamId, seq: u64, mut line: Kept) {
        if self.max_events == 0 || line.len() > self.max_bytes {
            return;
        }
        // The store is bounded by the messages' lengths: an owned one gives back the room it
        // grew into (up to as much again), which shrinking in place does without a copy.
        if let Kept::Owned(owned) = &mut line {
            owned.shrink_to_fit();
        }
        self.bytes += line.len();
        *self.per_stream.entry(stream).or_default() += 1;
        self.events.push_back(Stored { stream, seq, line });
        while self.events.len() > self.max_events || self.bytes > self.max_bytes {
            let Some(old) = self.events.pop_front() else {
                break;
            };
            self.bytes -= old.line.len();
            if let Some(count) = self.per_stream.get_mut(&old.stream) {
                *count -= 1;
                if *count == 0 {
                    self.per_stream.remove(&old.stream);
                }
            }
        }
    }

    /// The events of `stream` after `seq`, oldest first, and whether any event between `seq`
    /// and the first one returned was evicted.
    pub(crate) fn after(&self, stream: StreamId, seq: u64) -> (Vec<(u64, Arc<str>)>, bool) {
        let found: Vec<(u64, Arc<str>)> = self
            .events
            .iter()
            .filter(|e| e.stream == stream && e.seq > seq)
            .map(|e| (e.seq, e.line.shared()))
            .collect();
        let gap = found.first().is_some_and(|(first, _)| *first > seq + 1);
        (found, gap)
    }

    /// The most bytes of messages kept: a message longer than this is never kept.
    pub(crate) fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// Whether events are kept at all (a store of no events keeps none).
    pub(crate) fn keeps(&self) -> bool {
        self.max_events > 0
    }

    /// How many events of `stream` are kept.
    pub(crate) fn count(&self, stream: StreamId) -> usize {
        self.per_stream.get(&stream).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replays_after_an_id_and_evicts_the_oldest() {
        let mut store = EventStore::new(3, 1 << 20);
        for seq in 1..=4 {
            store.push(1, seq, Arc::from(format!("m{seq}")));
        }
        store.push(2, 1, Arc::from("other"));
        // Bound of 3: events 1 and 2 of stream 1 are gone.
        let (events, gap) = store.after(1, 0);
        assert_eq!(events.iter().map(|e| e.0).collect::<Vec<_>>(), vec![3, 4]);
        assert!(gap);
        let (events, gap) = store.after(1, 3);
        assert_eq!(events.len(), 1);
        assert!(!gap);
        assert_eq!(store.count(2), 1);
        assert_eq!(store.count(1), 2);
    }

    #[test]
    fn bounds_bytes_too() {
        let mut store = EventStore::new(100, 10);
        store.push(0, 1, Arc::from("123456"));
        store.push(0, 2, Arc::from("123456"));
        assert_eq!(store.after(0, 0).0.len(), 1);
        store.push(0, 3, Arc::from("this one is over the limit"));
        assert_eq!(store.after(0, 0).0.len(), 1);
    }

    #[test]
    fn an_owned_message_is_replayed_whole_and_counted_by_its_length() {
        let mut store = EventStore::new(100, 14);
        let mut grown = String::with_capacity(64);
        grown.push_str("{\"id\":1,\"r\":2}");
        store.push_kept(1, 1, Kept::Owned(grown));
        // Kept in no more room than its length, which is what the bound counts.
        let Kept::Owned(kept) = &store.events[0].line else {
            panic!("an owned message stays owned");
        };
        assert_eq!(kept.capacity(), kept.len());
        let (events, gap) = store.after(1, 0);
        assert_eq!(events.len(), 1);
        assert_eq!(&*events[0].1, "{\"id\":1,\"r\":2}");
        assert!(!gap);
        // 14 bytes of 14 are taken: one more byte evicts it.
        store.push(1, 2, Arc::from("x"));
        assert_eq!(
            store.after(1, 0).0.iter().map(|e| e.0).collect::<Vec<_>>(),
            [2]
        );
    }
}
