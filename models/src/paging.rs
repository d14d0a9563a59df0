//! What `paginate` and `section-split` share: cutting text into pages at line boundaries, the
//! bounded per-session document store, sizes as people read them, and config checks.
//!
//! `section-split` does not extend `paginate`: a parent's `transform_content` runs inside its
//! child's, so `paginate` would cut a large Markdown text into pages before `section-split` could
//! see its headings. Both models use this module instead, each with its own store and tool.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer};

/// Cuts `text` into pages of at most `page_bytes` bytes and returns where each page ends.
///
/// A page ends after the last line break that fits; a line longer than a page is cut at the last
/// character boundary that fits, never inside a UTF-8 character. Concatenating the pages gives
/// `text` back exactly. Text that fits one page is one page; empty text is one empty page.
pub(crate) fn page_ends(text: &str, page_bytes: usize) -> Vec<usize> {
    let page_bytes = page_bytes.max(4);
    let bytes = text.as_bytes();
    let mut ends = Vec::with_capacity(text.len() / page_bytes + 1);
    let mut start = 0;
    while text.len() - start > page_bytes {
        let limit = start + page_bytes;
        let end = match bytes[start..limit].iter().rposition(|b| *b == b'\n') {
            Some(at) => start + at + 1,
            None => floor_char_boundary(text, limit, start),
        };
        ends.push(end);
        start = end;
    }
    ends.push(text.len());
    ends
}

/// The last character boundary at or before `at` that lies after `start` (or, if a single
/// character does not fit, the end of that character).
fn floor_char_boundary(text: &str, at: usize, start: usize) -> usize {
    let mut end = at;
    while end > start && !text.is_char_boundary(end) {
        end -= 1;
    }
    if end > start {
        return end;
    }
    let mut end = at;
    while end < text.len() && !text.is_char_boundary(end) {
        end += 1;
    }
    end
}

/// Page `number` (1-based) of `text`, given its [`page_ends`].
pub(crate) fn page<'a>(text: &'a str, ends: &[usize], number: usize) -> Option<&'a str> {
    let index = number.checked_sub(1)?;
    let end = *ends.get(index)?;
    let start = match index {
        0 => 0,
        _ => ends[index - 1],
    };
    text.get(start..end)
}

/// A size as people read it: `812 B`, `12.4 KiB`, `3.1 MiB`.
pub(crate) fn size(bytes: usize) -> String {
    const KIB: f64 = 1024.0;
    // Display only: precision loss on huge sizes does not matter.
    #[allow(clippy::cast_precision_loss)]
    let value = bytes as f64;
    if bytes < 1024 {
        format!("{bytes} B")
    } else if value < KIB * KIB {
        format!("{:.1} KiB", value / KIB)
    } else {
        format!("{:.1} MiB", value / (KIB * KIB))
    }
}

/// How much a session's store may hold.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub(crate) struct Limits {
    /// Documents kept at most.
    pub(crate) documents: usize,
    /// Bytes of text kept at most (the newest document is kept even if it alone is larger).
    pub(crate) bytes: usize,
}

/// Documents kept for a session, oldest first, bounded by [`Limits`]: storing one evicts the
/// oldest until the store fits again.
///
/// Serialised for a shared store as `{"$documents": {key: value}, "order": {key: [seq, size]},
/// "clock": n}`: each document under a member of its own in the store's documents object
/// (`mcp_middleware::shared_store::DOCUMENTS`, which the store keeps under keys of their own,
/// written once), and the order as a map too, so two replicas that each stored or read a
/// different document merge without losing either.
#[derive(Debug)]
pub(crate) struct Store<K, V> {
    entries: VecDeque<(K, V, usize)>,
    bytes: usize,
}

impl<K, V> Default for Store<K, V> {
    fn default() -> Self {
        Self {
            entries: VecDeque::new(),
            bytes: 0,
        }
    }
}

/// How a [`Store`] is written: borrowed.
#[derive(serde::Serialize)]
struct StoreOut<'a, V> {
    #[serde(rename = "$documents")]
    documents: BTreeMap<String, &'a V>,
    order: BTreeMap<String, (u64, usize)>,
}

/// How a [`Store`] is read.
#[derive(serde::Deserialize)]
struct StoreIn<V> {
    #[serde(rename = "$documents")]
    documents: BTreeMap<String, V>,
    order: BTreeMap<String, (u64, usize)>,
}

impl<K: fmt::Display, V: serde::Serialize> serde::Serialize for Store<K, V> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = StoreOut {
            documents: BTreeMap::new(),
            order: BTreeMap::new(),
        };
        for (seq, (key, value, size)) in (0u64..).zip(&self.entries) {
            let key = key.to_string();
            out.order.insert(key.clone(), (seq, *size));
            out.documents.insert(key, value);
        }
        out.serialize(serializer)
    }
}

impl<'de, K, V> serde::Deserialize<'de> for Store<K, V>
where
    K: FromStr,
    V: serde::Deserialize<'de>,
{
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut read = StoreIn::<V>::deserialize(deserializer)?;
        // Oldest first; a merge of two replicas' orders may repeat a place: then by key.
        let mut order: Vec<(u64, String, usize)> = read
            .order
            .into_iter()
            .map(|(key, (seq, size))| (seq, key, size))
            .collect();
        order.sort();
        let mut store = Self::default();
        for (_, key, size) in order {
            // An entry whose document is gone (evicted by another replica meanwhile) is
            // dropped, and so is a key this build cannot read.
            let (Some(value), Ok(parsed)) = (read.documents.remove(&key), key.parse()) else {
                continue;
            };
            store.entries.push_back((parsed, value, size));
            store.bytes += size;
        }
        Ok(store)
    }
}

impl<K: PartialEq, V> Store<K, V> {
    /// Stores `value` of `size` bytes under `key` as the newest entry (replacing an entry with
    /// the same key) and evicts the oldest entries beyond `limits`. Returns how many it evicted.
    pub(crate) fn insert(&mut self, key: K, value: V, size: usize, limits: Limits) -> usize {
        self.remove(&key);
        self.entries.push_back((key, value, size));
        self.bytes += size;
        let mut evicted = 0;
        while self.entries.len() > 1
            && (self.entries.len() > limits.documents.max(1) || self.bytes > limits.bytes)
        {
            if let Some((_, _, size)) = self.entries.pop_front() {
                self.bytes -= size;
                evicted += 1;
            }
        }
        evicted
    }

    /// The entry under `key`, if it is still kept.
    pub(crate) fn get(&self, key: &K) -> Option<&V> {
        self.entries
            .iter()
            .find(|(k, _, _)| k == key)
            .map(|(_, v, _)| v)
    }

    /// Whether an entry is kept under `key`.
    pub(crate) fn contains(&self, key: &K) -> bool {
        self.get(key).is_some()
    }

    /// Makes the entry under `key` the newest, so it is evicted last. Whether it is kept.
    pub(crate) fn touch(&mut self, key: &K) -> bool {
        match self.entries.iter().position(|(k, _, _)| k == key) {
            Some(at) => {
                if let Some(entry) = self.entries.remove(at) {
                    self.entries.push_back(entry);
                }
                true
            }
            None => false,
        }
    }

    fn remove(&mut self, key: &K) {
        if let Some(at) = self.entries.iter().position(|(k, _, _)| k == key)
            && let Some((_, _, size)) = self.entries.remove(at)
        {
            self.bytes -= size;
        }
    }

    /// How many entries are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// A per-session random tag, for telling this session's cursors from others'.
pub(crate) fn session_tag() -> u32 {
    use std::hash::{BuildHasher, RandomState};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{SystemTime, UNIX_EPOCH};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let hash = RandomState::new().hash_one((nanos, COUNTER.fetch_add(1, Ordering::Relaxed)));
    // The low 32 bits are as random as the rest.
    #[allow(clippy::cast_possible_truncation)]
    let tag = hash as u32;
    tag
}

/// A stable 32-bit hash of `bytes` (FNV-1a 64, folded): the same content gets the same value in
/// every build and every run.
pub(crate) fn content_hash(parts: &[&[u8]]) -> u32 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in *part {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
        // Separate the parts, so ("ab", "c") and ("a", "bc") differ.
        hash ^= 0xff;
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    #[allow(clippy::cast_possible_truncation)]
    let folded = (hash ^ (hash >> 32)) as u32;
    folded
}

/// Reads a `usize` config field that must be at least `MIN`.
pub(crate) fn at_least<'de, const MIN: usize, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<usize, D::Error> {
    let value = usize::deserialize(deserializer)?;
    if value < MIN {
        return Err(serde::de::Error::custom(format!(
            "must be at least {MIN}, got {value}"
        )));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pages(text: &str, page_bytes: usize) -> Vec<&str> {
        let ends = page_ends(text, page_bytes);
        (1..=ends.len())
            .map(|n| page(text, &ends, n).expect("page"))
            .collect()
    }

    #[test]
    fn short_text_is_one_page() {
        assert_eq!(pages("abc\n", 16), ["abc\n"]);
        assert_eq!(pages("", 16), [""]);
    }

    #[test]
    fn pages_end_at_line_breaks() {
        let text = "one\ntwo\nthree\nfour\n";
        assert_eq!(pages(text, 9), ["one\ntwo\n", "three\n", "four\n"]);
    }

    #[test]
    fn long_lines_are_cut_at_char_boundaries() {
        let text = "żółw".repeat(10);
        for page in pages(&text, 7) {
            assert!(page.len() <= 7, "{page:?}");
        }
        assert_eq!(pages(&text, 7).concat(), text);
    }

    #[test]
    fn the_store_evicts_the_oldest_first() {
        let limits = Limits {
            documents: 2,
            bytes: 100,
        };
        let mut store = Store::default();
        assert_eq!(store.insert(1, "a", 10, limits), 0);
        assert_eq!(store.insert(2, "b", 10, limits), 0);
        assert!(store.touch(&1));
        assert_eq!(store.insert(3, "c", 10, limits), 1);
        assert!(store.get(&2).is_none());
        assert_eq!(store.get(&1), Some(&"a"));
        assert_eq!(store.insert(4, "d", 95, limits), 2, "over the byte bound");
        assert_eq!(store.len(), 1);
        assert_eq!(store.insert(5, "e", 500, limits), 1);
        assert_eq!(store.get(&5), Some(&"e"), "the newest stays, however large");
    }

    #[test]
    fn the_store_round_trips_through_json_keeping_its_order() {
        let limits = Limits {
            documents: 3,
            bytes: 100,
        };
        let mut store: Store<u64, String> = Store::default();
        store.insert(7, "seven".into(), 5, limits);
        store.insert(3, "three".into(), 5, limits);
        store.touch(&7);
        let json = serde_json::to_value(&store).expect("serialises");
        assert_eq!(json["$documents"]["3"], "three");
        let back: Store<u64, String> = serde_json::from_value(json).expect("reads back");
        assert_eq!(back.bytes, 10);
        let order: Vec<u64> = back.entries.iter().map(|(k, _, _)| *k).collect();
        assert_eq!(order, [3, 7], "oldest first");
    }

    #[test]
    fn an_entry_without_its_document_is_dropped() {
        let json = serde_json::json!({
            "$documents": { "1": "one" },
            "order": { "1": [0, 3], "2": [1, 4] }
        });
        let store: Store<u64, String> = serde_json::from_value(json).expect("reads");
        assert_eq!(store.len(), 1);
        assert_eq!(store.bytes, 3);
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(size(812), "812 B");
        assert_eq!(size(12 * 1024 + 400), "12.4 KiB");
        assert_eq!(size(3 * 1024 * 1024), "3.0 MiB");
    }

    #[test]
    fn content_hashes_are_stable() {
        assert_eq!(content_hash(&[b"abc"]), content_hash(&[b"abc"]));
        assert_ne!(content_hash(&[b"ab", b"c"]), content_hash(&[b"a", b"bc"]));
    }
}
