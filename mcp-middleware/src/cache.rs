//! A per-project key-value cache with expiry, for models ([`Context::cache`](crate::Context::cache)).
//!
//! Every session of a project sees the same cache (a summary computed for one client serves the
//! next); sessions of other projects do not. Values are JSON or bytes, each with its own time to
//! live. The cache is behind the small [`CacheStore`] trait so a shared store can back it when
//! several proxy replicas serve one project; the default is [`MemoryCache`], in the process and
//! bounded in entries and bytes (the expired go first, then the least recently used).
//!
//! Which store a project uses is decided by [`install`] (before its first session); a project
//! that installed none gets a [`MemoryCache`] with [`MemoryCache::DEFAULT_ENTRIES`] and
//! [`MemoryCache::DEFAULT_BYTES`]. A proxy without a project shares one cache under the empty
//! name.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// A cached value: JSON, or bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheValue {
    /// A JSON value.
    Json(Value),
    /// Bytes.
    Bytes(Vec<u8>),
}

impl CacheValue {
    /// About how many bytes the value takes, for the store's bound.
    pub fn size(&self) -> usize {
        match self {
            CacheValue::Bytes(bytes) => bytes.len(),
            // Serialising to measure is exact and only happens on insert.
            CacheValue::Json(value) => serde_json::to_vec(value).map_or(0, |text| text.len()),
        }
    }
}

/// What a cache operation returns: a boxed future, so a store may do I/O.
pub type CacheFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where a cache keeps its entries: in the process ([`MemoryCache`]) or, for proxy replicas, a
/// shared store.
///
/// Keys are the caller's (a [`Cache`] prefixes nothing: each project has its own store).
/// A store may drop any entry at any time (a cache is not a database); a `get` after the TTL
/// must not return the value.
pub trait CacheStore: Send + Sync + fmt::Debug {
    /// The value under `key`, unless it expired or was dropped.
    fn get<'a>(&'a self, key: &'a str) -> CacheFuture<'a, Option<CacheValue>>;
    /// Keeps `value` under `key` for `ttl`, replacing what was there.
    fn put<'a>(&'a self, key: &'a str, value: CacheValue, ttl: Duration) -> CacheFuture<'a, ()>;
    /// Drops the value under `key`; whether there was one.
    fn remove<'a>(&'a self, key: &'a str) -> CacheFuture<'a, bool>;
}

/// An in-process [`CacheStore`] bounded in entries and bytes: inserting past a bound drops the
/// expired entries, then the least recently used, until it fits (a value larger than the byte
/// bound on its own is not kept).
///
/// ```
/// use mcp_middleware::cache::{Cache, MemoryCache};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let cache = Cache::new(Arc::new(MemoryCache::new(100, 1 << 20)));
/// cache.put_json("answer", &42, Duration::from_secs(60)).await;
/// assert_eq!(cache.get_json::<u32>("answer").await, Some(42));
/// assert_eq!(cache.get_bytes("missing").await, None);
/// # });
/// ```
#[derive(Debug)]
pub struct MemoryCache {
    max_entries: usize,
    max_bytes: usize,
    inner: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    by_key: HashMap<String, Entry>,
    /// Keys by last use, oldest first.
    by_use: BTreeMap<u64, String>,
    bytes: usize,
    clock: u64,
}

#[derive(Debug)]
struct Entry {
    value: CacheValue,
    size: usize,
    expires: Instant,
    used: u64,
}

impl Entries {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn remove(&mut self, key: &str) -> Option<Entry> {
        let entry = self.by_key.remove(key)?;
        self.by_use.remove(&entry.used);
        self.bytes -= entry.size;
        Some(entry)
    }

    fn drop_expired(&mut self, now: Instant) {
        let expired: Vec<String> = self
            .by_key
            .iter()
            .filter(|(_, entry)| entry.expires <= now)
            .map(|(key, _)| key.clone())
            .collect();
        for key in expired {
            self.remove(&key);
        }
    }

    fn drop_oldest(&mut self) -> bool {
        let Some((_, key)) = self.by_use.pop_first() else {
            return false;
        };
        if let Some(entry) = self.by_key.remove(&key) {
            self.bytes -= entry.size;
        }
        true
    }
}

impl MemoryCache {
    /// Entries a project's default cache keeps at most.
    pub const DEFAULT_ENTRIES: usize = 10_000;
    /// Bytes a project's default cache keeps at most (64 MiB).
    pub const DEFAULT_BYTES: usize = 64 * 1024 * 1024;

    /// A cache of at most `max_entries` entries and `max_bytes` bytes of values.
    pub fn new(max_entries: usize, max_bytes: usize) -> Self {
        Self {
            max_entries: max_entries.max(1),
            max_bytes,
            inner: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        match self.inner.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn get_now(&self, key: &str, now: Instant) -> Option<CacheValue> {
        let mut entries = self.lock();
        let expires = entries.by_key.get(key)?.expires;
        if expires <= now {
            entries.remove(key);
            return None;
        }
        let used = entries.tick();
        let entry = entries.by_key.get_mut(key)?;
        let before = std::mem::replace(&mut entry.used, used);
        let value = entry.value.clone();
        entries.by_use.remove(&before);
        entries.by_use.insert(used, key.to_owned());
        Some(value)
    }

    fn put_now(&self, key: &str, value: CacheValue, ttl: Duration, now: Instant) {
        let size = value.size() + key.len();
        let mut entries = self.lock();
        entries.remove(key);
        if size > self.max_bytes || ttl.is_zero() {
            return;
        }
        if entries.by_key.len() >= self.max_entries || entries.bytes + size > self.max_bytes {
            entries.drop_expired(now);
        }
        while entries.by_key.len() >= self.max_entries || entries.bytes + size > self.max_bytes {
            if !entries.drop_oldest() {
                break;
            }
        }
        let used = entries.tick();
        // A TTL beyond what `Instant` can hold is as good as forever.
        let expires = now
            .checked_add(ttl)
            .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600));
        entries.bytes += size;
        entries.by_use.insert(used, key.to_owned());
        entries.by_key.insert(
            key.to_owned(),
            Entry {
                value,
                size,
                expires,
                used,
            },
        );
    }

    /// How many entries it holds (the expired not yet dropped included).
    pub fn len(&self) -> usize {
        self.lock().by_key.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Default for MemoryCache {
    fn default() -> Self {
        Self::new(Self::DEFAULT_ENTRIES, Self::DEFAULT_BYTES)
    }
}

impl CacheStore for MemoryCache {
    fn get<'a>(&'a self, key: &'a str) -> CacheFuture<'a, Option<CacheValue>> {
        let value = self.get_now(key, Instant::now());
        Box::pin(std::future::ready(value))
    }

    fn put<'a>(&'a self, key: &'a str, value: CacheValue, ttl: Duration) -> CacheFuture<'a, ()> {
        self.put_now(key, value, ttl, Instant::now());
        Box::pin(std::future::ready(()))
    }

    fn remove<'a>(&'a self, key: &'a str) -> CacheFuture<'a, bool> {
        let removed = self.lock().remove(key).is_some();
        Box::pin(std::future::ready(removed))
    }
}

/// A project's cache, as a hook uses it: typed helpers over its [`CacheStore`].
#[derive(Debug, Clone)]
pub struct Cache {
    store: Arc<dyn CacheStore>,
}

impl Cache {
    /// A cache over `store`.
    pub fn new(store: Arc<dyn CacheStore>) -> Self {
        Self { store }
    }

    /// The store behind it.
    pub fn store(&self) -> &Arc<dyn CacheStore> {
        &self.store
    }

    /// The value under `key`.
    pub async fn get(&self, key: &str) -> Option<CacheValue> {
        self.store.get(key).await
    }

    /// Keeps `value` under `key` for `ttl`.
    pub async fn put(&self, key: &str, value: CacheValue, ttl: Duration) {
        self.store.put(key, value, ttl).await;
    }

    /// Drops the value under `key`; whether there was one.
    pub async fn remove(&self, key: &str) -> bool {
        self.store.remove(key).await
    }

    /// The JSON value under `key` as a `T`; `None` when there is none or it is not a `T`.
    pub async fn get_json<T: DeserializeOwned>(&self, key: &str) -> Option<T> {
        match self.get(key).await? {
            CacheValue::Json(value) => serde_json::from_value(value).ok(),
            CacheValue::Bytes(_) => None,
        }
    }

    /// Keeps `value` as JSON under `key` for `ttl` (a value that cannot be written as JSON is not
    /// kept).
    pub async fn put_json<T: Serialize + ?Sized>(&self, key: &str, value: &T, ttl: Duration) {
        if let Ok(value) = serde_json::to_value(value) {
            self.put(key, CacheValue::Json(value), ttl).await;
        }
    }

    /// The bytes under `key`; `None` when there are none or the value is JSON.
    pub async fn get_bytes(&self, key: &str) -> Option<Vec<u8>> {
        match self.get(key).await? {
            CacheValue::Bytes(bytes) => Some(bytes),
            CacheValue::Json(_) => None,
        }
    }

    /// Keeps `bytes` under `key` for `ttl`.
    pub async fn put_bytes(&self, key: &str, bytes: Vec<u8>, ttl: Duration) {
        self.put(key, CacheValue::Bytes(bytes), ttl).await;
    }
}

fn stores() -> &'static Mutex<HashMap<String, Arc<dyn CacheStore>>> {
    static STORES: OnceLock<Mutex<HashMap<String, Arc<dyn CacheStore>>>> = OnceLock::new();
    STORES.get_or_init(Mutex::default)
}

/// Makes `store` the cache of the project called `project` (the empty name: a proxy without a
/// project), for every session that starts after; returns the store it replaces.
pub fn install(project: &str, store: Arc<dyn CacheStore>) -> Option<Arc<dyn CacheStore>> {
    let mut stores = match stores().lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    };
    stores.insert(project.to_owned(), store)
}

/// The cache of the project called `project`: the installed store, or a new default
/// [`MemoryCache`] kept for it.
pub fn for_project(project: &str) -> Cache {
    let mut stores = match stores().lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    };
    let store = stores
        .entry(project.to_owned())
        .or_insert_with(|| Arc::new(MemoryCache::default()))
        .clone();
    Cache::new(store)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn entries_expire_after_their_ttl() {
        let cache = MemoryCache::new(10, 1 << 20);
        let start = Instant::now();
        cache.put_now("a", CacheValue::Json(json!(1)), MINUTE, start);
        cache.put_now("b", CacheValue::Bytes(b"x".to_vec()), 2 * MINUTE, start);
        assert_eq!(
            cache.get_now("a", start + MINUTE / 2),
            Some(CacheValue::Json(json!(1)))
        );
        assert_eq!(
            cache.get_now("a", start + MINUTE),
            None,
            "expired at its TTL"
        );
        assert_eq!(cache.len(), 1, "an expired entry that was read is dropped");
        assert_eq!(
            cache.get_now("b", start + MINUTE),
            Some(CacheValue::Bytes(b"x".to_vec()))
        );
        cache.put_now("z", CacheValue::Json(json!(0)), Duration::ZERO, start);
        assert_eq!(cache.get_now("z", start), None, "a zero TTL keeps nothing");
    }

    #[test]
    fn the_least_recently_used_goes_first_when_full() {
        let cache = MemoryCache::new(3, 1 << 20);
        let now = Instant::now();
        for key in ["a", "b", "c"] {
            cache.put_now(key, CacheValue::Json(json!(key)), MINUTE, now);
        }
        assert!(
            cache.get_now("a", now).is_some(),
            "a is now the most recent"
        );
        cache.put_now("d", CacheValue::Json(json!("d")), MINUTE, now);
        assert_eq!(cache.len(), 3);
        assert_eq!(
            cache.get_now("b", now),
            None,
            "b was the least recently used"
        );
        for key in ["a", "c", "d"] {
            assert!(cache.get_now(key, now).is_some(), "{key}");
        }
    }

    #[test]
    fn expired_entries_go_before_live_ones() {
        let cache = MemoryCache::new(2, 1 << 20);
        let now = Instant::now();
        cache.put_now("live", CacheValue::Json(json!(1)), 10 * MINUTE, now);
        cache.put_now("short", CacheValue::Json(json!(2)), MINUTE, now);
        // `live` is the least recently used, but `short` has expired by now.
        cache.put_now("new", CacheValue::Json(json!(3)), MINUTE, now + 2 * MINUTE);
        assert!(cache.get_now("live", now + 2 * MINUTE).is_some());
        assert!(cache.get_now("new", now + 2 * MINUTE).is_some());
    }

    #[test]
    fn bytes_are_bounded_and_replacing_frees_the_old_value() {
        let cache = MemoryCache::new(100, 100);
        let now = Instant::now();
        cache.put_now("a", CacheValue::Bytes(vec![0; 40]), MINUTE, now);
        cache.put_now("b", CacheValue::Bytes(vec![0; 40]), MINUTE, now);
        cache.put_now("a", CacheValue::Bytes(vec![1; 40]), MINUTE, now);
        assert_eq!(cache.len(), 2, "replacing counts the new value only");
        cache.put_now("c", CacheValue::Bytes(vec![0; 40]), MINUTE, now);
        assert_eq!(cache.get_now("b", now), None, "evicted for room");
        assert_eq!(
            cache.get_now("a", now),
            Some(CacheValue::Bytes(vec![1; 40]))
        );
        cache.put_now("huge", CacheValue::Bytes(vec![0; 200]), MINUTE, now);
        assert_eq!(cache.get_now("huge", now), None, "larger than the bound");
        assert!(cache.get_now("c", now).is_some(), "and it evicted nothing");
    }

    #[tokio::test]
    async fn typed_helpers_and_projects_are_separate() {
        let one = for_project("cache-test-one");
        let two = for_project("cache-test-two");
        one.put_json("k", &json!({"n": 1}), MINUTE).await;
        assert_eq!(one.get_json::<Value>("k").await, Some(json!({"n": 1})));
        assert_eq!(two.get_json::<Value>("k").await, None, "another project");
        assert_eq!(
            for_project("cache-test-one").get_json::<Value>("k").await,
            Some(json!({"n": 1})),
            "the same project shares its cache"
        );
        assert_eq!(one.get_bytes("k").await, None, "JSON is not bytes");
        assert_eq!(one.get_json::<String>("k").await, None, "not a String");
        one.put_bytes("b", vec![1, 2], MINUTE).await;
        assert_eq!(one.get_bytes("b").await, Some(vec![1, 2]));
        assert!(one.remove("b").await);
        assert!(!one.remove("b").await);
        let replaced = install("cache-test-two", Arc::new(MemoryCache::new(1, 10)));
        assert!(replaced.is_some());
    }
}
