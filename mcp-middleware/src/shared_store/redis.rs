//! The Redis (or Valkey) backend of the shared store, through the `redis` crate's connection
//! manager (one multiplexed connection per replica, reconnected when it breaks).
//!
//! Every key is `mcpm:{namespace}:...` with the braces literal: the project is the Redis
//! Cluster hash tag (`connection::key_prefix`), and every key a script touches is passed in
//! `KEYS` (none is computed inside Lua), so the scripts run on a cluster as on one server.
//!
//! A session is one hash, `mcpm:{namespace}:session:{name}`, where `name` is the keyed digest
//! of the session id (`StoreKey::name`: no key name holds an id): `meta` (JSON
//! [`SessionMeta`] holding only the handshake's `initialize`), `v` (the states' version), `q`
//! (its owner's quota set), `s:{state type}` (each model state's skeleton), `d:{digest}` (each
//! document a skeleton refers to, see [`DOCUMENTS`](super::DOCUMENTS)), and the rest of the
//! handshake, one change at a time (`handshake`): `h:level`, `h:sub:{uri}` (present while
//! subscribed), `h:initialized` and `hv`, the counter that numbers the changes. Every value
//! but the counters and `q` is a record authenticated with the replicas' key and bound to the
//! hash's key and its field (`trust`); a session one of whose records does not verify is
//! logged and not found (never adopted). One TTL, one `DEL` and one
//! renewal cover them all. Writes that must
//! be atomic are Lua scripts: the compare-and-set of states checks `v` and writes in one step.
//! The session's TTL is set to the idle timeout plus [`SLACK`] and renewed only once less
//! than the idle timeout is left, so most requests renew nothing: one read-only script call,
//! no write for Redis to log or replicate, and the session still lives at least the idle
//! timeout after its last request. Each owner's quota set holds its sessions scored by when
//! they expire, renewed with them.
//! Every command is bounded by [`OP_TIMEOUT`]; the connection manager's own connect and
//! response timeouts are the same, so a store that is down answers "unavailable" within it.

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::future::BoxFuture;
use redis::aio::ConnectionManager;

use super::handshake::Numbered;
use super::{
    Backend, Changed, Heard, Saved, SessionMeta, StatesWrite, StoreError, StoreKey, StoreTrust,
    StoredSession, Touched,
};
use crate::exchange::handshake::Change;

/// How long one store operation may take before the request fails.
const OP_TIMEOUT: Duration = Duration::from_secs(1);

/// How much longer than the idle timeout a session's keys are kept, as a fraction of it: a
/// renewal happens at most once per this much of the timeout.
const SLACK: u32 = 8;

/// Returns the states' version of session KEYS[1], renewing its TTL to ARGV[1] ms (and its
/// entry ARGV[3] in the quota set KEYS[3], if given) only when less than ARGV[2] ms are left;
/// -2 when the session was ended (KEYS[2] marks it), -1 when it is missing. The common case
/// only reads: PTTL and HGET.
const TOUCH: &str = r"
local left = redis.call('PTTL', KEYS[1])
if left == -2 then
  if redis.call('EXISTS', KEYS[2]) == 1 then return -2 end
  return -1
end
if left < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  if KEYS[3] then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    redis.call('ZADD', KEYS[3], 'XX', now + tonumber(ARGV[1]), ARGV[3])
    redis.call('PEXPIRE', KEYS[3], ARGV[1])
  end
end
return tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
";

/// Removes the session, its entry ARGV[2] in its owner's quota set (KEYS[3], if given: the
/// `q` field read just before), marks it ended for ARGV[1] ms and tells every replica
/// (channel ARGV[3], the id ARGV[4], dead from now on); whether it was there.
const DELETE: &str = r"
if KEYS[3] then redis.call('ZREM', KEYS[3], ARGV[2]) end
local removed = redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[2], '1', 'PX', ARGV[1])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return removed
";

/// Writes states if `v` is still ARGV[1]: ARGV[3] field/value pairs (states and documents)
/// follow, then the fields to remove (documents no state refers to). Returns the new
/// version, -1 on conflict, -2 when the session is missing, -3 when it was ended.
const SAVE_STATES: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then
  if redis.call('EXISTS', KEYS[2]) == 1 then return -3 end
  return -2
end
local v = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if v ~= tonumber(ARGV[1]) then return -1 end
local last = 3 + 2 * tonumber(ARGV[3])
for i = 4, last, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
for i = last + 1, #ARGV do redis.call('HDEL', KEYS[1], ARGV[i]) end
redis.call('HSET', KEYS[1], 'v', v + 1)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return v + 1
";

/// Reads a session's fields but its documents (`d:*`, read by digest when needed) and renews
/// its TTL: field/value pairs, none when it is missing.
const LOAD: &str = r"
local all = redis.call('HGETALL', KEYS[1])
if #all == 0 then return {} end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
local out = {}
for i = 1, #all, 2 do
  if string.sub(all[i], 1, 2) ~= 'd:' then
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
  end
end
return out
";

/// Writes the meta (and `v` = 0 for a new session), the key of the owner's quota set (`q`,
/// KEYS[3], for `DELETE`) and renews the TTL to ARGV[2] ms, the session's entry ARGV[3] in
/// that set (if it has one) with it; 0 (nothing written) when the session was ended. A new
/// (or lost) record also gets the handshake's parts, ARGV[4] field/value pairs after ARGV[4],
/// and its handshake counter `hv` starts at the server's clock in microseconds, so that the
/// changes of a session the store lost and a replica wrote again are numbered after every
/// earlier one. An existing record's handshake parts change only through `SAVE_HANDSHAKE`.
const SAVE_META: &str = r"
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
local t = redis.call('TIME')
if redis.call('EXISTS', KEYS[1]) == 0 then
  local last = 4 + 2 * tonumber(ARGV[4])
  for i = 5, last, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
  -- As a string: Lua would write a number this large with an exponent.
  redis.call('HSET', KEYS[1], 'hv', t[1] .. string.sub('00000' .. t[2], -6))
end
redis.call('HSET', KEYS[1], 'meta', ARGV[1], 'q', KEYS[3])
redis.call('HSETNX', KEYS[1], 'v', 0)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('ZADD', KEYS[3], 'XX', 'CH', now + tonumber(ARGV[2]), ARGV[3]) == 1 then
  redis.call('PEXPIRE', KEYS[3], ARGV[2])
end
return 1
";

/// Applies handshake changes to session KEYS[1], each in its own field, each numbered by
/// the session's handshake counter `hv` (HINCRBY: the store orders them): kind/arg/record
/// triples follow ARGV[1] (the TTL in ms, renewed). `level` sets `h:level` to the record;
/// `sub` sets `h:sub:{uri}` to it and `unsub` removes that field; `initialized` sets
/// `h:initialized` once, numbered 0 when it was set already. Returns each change's number,
/// or -2 when the session is missing, -3 when it was ended (KEYS[2] marks it).
const SAVE_HANDSHAKE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then
  if redis.call('EXISTS', KEYS[2]) == 1 then return -3 end
  return -2
end
local out = {}
for i = 2, #ARGV, 3 do
  local kind, arg, record = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local changed = true
  if kind == 'level' then
    redis.call('HSET', KEYS[1], 'h:level', record)
  elseif kind == 'sub' then
    redis.call('HSET', KEYS[1], 'h:sub:' .. arg, record)
  elseif kind == 'unsub' then
    redis.call('HDEL', KEYS[1], 'h:sub:' .. arg)
  else
    changed = redis.call('HSETNX', KEYS[1], 'h:initialized', record) == 1
  end
  if changed then
    out[#out + 1] = redis.call('HINCRBY', KEYS[1], 'hv', 1)
  else
    out[#out + 1] = 0
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return out
";

/// Counts owner's sessions in the quota set KEYS[1] and, below the limit ARGV[2], adds
/// session ARGV[1]: 1 when added (or already there), 0 when the owner is at its limit. Each
/// member's score is when it expires (the server's clock): the claim's, then its session's,
/// renewed with the session's TTL (`TOUCH`, `SAVE_META`) and removed by `DELETE`. Expired
/// members are removed, so entries end with their session.
const CLAIM: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return 1
end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
";

pub(super) struct RedisBackend {
    describe: String,
    prefix: String,
    ended: String,
    /// The prefix of each owner's quota set: `mcpm:{namespace}:quota:{owner}`.
    quota: String,
    /// The pub/sub channel `DELETE` announces ended sessions on: `mcpm:{namespace}:ended`.
    channel: String,
    /// The prefix of the channels messages for a session's GET stream travel on:
    /// `mcpm:{namespace}:stream:{name}`.
    stream_channel: String,
    /// Authenticates the records and names the sessions.
    trust: StoreKey,
    client: redis::Client,
    connection: ConnectionManager,
    touch: redis::Script,
    save_states: redis::Script,
    save_meta: redis::Script,
    delete: redis::Script,
    claim: redis::Script,
    load: redis::Script,
    save_handshake: redis::Script,
}

impl RedisBackend {
    pub(super) async fn connect(
        url: &str,
        namespace: &str,
        trust: &StoreTrust,
    ) -> Result<Self, StoreError> {
        let super::connection::Opened {
            describe,
            client,
            connection,
        } = super::connection::open(url, namespace, OP_TIMEOUT, trust)?;
        let project = super::connection::key_prefix(namespace);
        let backend = Self {
            describe,
            prefix: format!("{project}session:"),
            ended: format!("{project}ended:"),
            quota: format!("{project}quota:"),
            channel: format!("{project}ended"),
            stream_channel: format!("{project}stream:"),
            trust: trust.key.clone(),
            client,
            connection,
            touch: script(TOUCH),
            save_states: script(SAVE_STATES),
            save_meta: script(SAVE_META),
            delete: script(DELETE),
            claim: script(CLAIM),
            load: script(LOAD),
            save_handshake: script(SAVE_HANDSHAKE),
        };
        backend.ping().await?;
        Ok(backend)
    }

    /// Session `id`'s hash: `mcpm:{namespace}:session:{name}`.
    fn key(&self, id: &str) -> String {
        format!("{}{}", self.prefix, self.trust.name(id))
    }

    /// How session `id` is named in its owner's quota set.
    fn member(&self, id: &str) -> String {
        self.trust.name(id)
    }

    /// `value` as the record of field `field` of the hash `key`.
    fn seal(&self, key: &str, field: &str, value: &str) -> String {
        self.trust.seal(key, field, value)
    }

    /// The value of field `field` of the hash `key`, if it is an authenticated record of that
    /// field; otherwise logged (naming the key, the field and why) and `None`.
    fn open<'a>(&self, key: &str, field: &str, stored: &'a str) -> Option<&'a str> {
        match self.trust.open(key, field, stored) {
            Ok(value) => Some(value),
            Err(err) => {
                tracing::error!(store = %self.describe, key, field, "a session record in the shared store was refused: {err}");
                None
            }
        }
    }

    /// The set of `owner`'s sessions its quota counts: `mcpm:{namespace}:quota:{owner}`.
    fn quota_key(&self, owner: &str) -> String {
        format!("{}{owner}", self.quota)
    }

    /// The mark a `DELETE` leaves: `mcpm:{namespace}:ended:{name}`.
    fn ended_key(&self, id: &str) -> String {
        format!("{}{}", self.ended, self.trust.name(id))
    }

    /// Runs the operation `op` makes within [`OP_TIMEOUT`], turning every failure into
    /// [`StoreError::Unavailable`]. A connection found broken (the store restarted since the
    /// last operation) is made again once and the operation tried on it: every operation here
    /// is safe to repeat (a compare-and-set whose answer was lost conflicts with itself and
    /// merges to the same state).
    async fn bounded<T, F>(&self, op: impl FnMut(ConnectionManager) -> F) -> Result<T, StoreError>
    where
        F: Future<Output = redis::RedisResult<T>>,
    {
        super::connection::bounded(&self.describe, &self.connection, OP_TIMEOUT, op).await
    }

    fn corrupt(&self, reason: String) -> StoreError {
        StoreError::Corrupt {
            store: self.describe.clone(),
            reason,
        }
    }
}

/// The script `body`. Under test it starts with `#!lua`, which makes Redis 7 refuse any key
/// access outside the declared keys' slot even on a one-node cluster (the cluster test's
/// check); without it, scripts also run on Redis before 7.
pub(super) fn script(body: &str) -> redis::Script {
    if cfg!(test) {
        redis::Script::new(&format!("#!lua\n{body}"))
    } else {
        redis::Script::new(body)
    }
}

fn millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// How long a session's keys are kept when renewed: the idle timeout `ttl` plus [`SLACK`].
fn kept(ttl: Duration) -> u64 {
    millis(ttl.saturating_add(ttl / SLACK))
}

impl Backend for RedisBackend {
    fn listen(&self, on_heard: Box<dyn Fn(Heard) -> bool + Send + Sync>) {
        let client = self.client.clone();
        let ended = self.channel.clone();
        let streams = self.stream_channel.clone();
        let describe = self.describe.clone();
        let key = self.trust.clone();
        tokio::spawn(async move {
            use futures_util::StreamExt;
            // Reconnects after the store went away; ends when the listener says it is done.
            loop {
                match client.get_async_pubsub().await {
                    Ok(mut pubsub) => {
                        let subscribed = match pubsub.subscribe(&ended).await {
                            Ok(()) => pubsub.psubscribe(format!("{streams}*")).await,
                            Err(err) => Err(err),
                        };
                        match subscribed {
                            Ok(()) => {
                                let mut messages = pubsub.on_message();
                                while let Some(message) = messages.next().await {
                                    let Ok(payload) = message.get_payload::<String>() else {
                                        continue;
                                    };
                                    let channel = message.get_channel_name();
                                    let stream = channel.starts_with(&*streams);
                                    let kind = if stream { "stream" } else { "ended" };
                                    // Only what a replica with the key announced is heard.
                                    let read =
                                        key.decrypt(channel, kind, &payload).and_then(|text| {
                                            if !stream {
                                                return Ok(Heard::Ended(text));
                                            }
                                            let (id, line) =
                                                serde_json::from_str::<(String, String)>(&text)
                                                    .map_err(|_| {
                                                        super::RecordError::Malformed(
                                                            "not a stream message",
                                                        )
                                                    })?;
                                            Ok(Heard::ForStream { id, line })
                                        });
                                    let heard = match read {
                                        Ok(heard) => heard,
                                        Err(err) => {
                                            tracing::error!(store = %describe, channel, "an announcement was refused: {err}");
                                            continue;
                                        }
                                    };
                                    if !on_heard(heard) {
                                        return;
                                    }
                                }
                            }
                            Err(err) => {
                                tracing::debug!(store = %describe, %err, "cannot subscribe")
                            }
                        }
                    }
                    Err(err) => {
                        tracing::debug!(store = %describe, %err, "cannot listen to the store")
                    }
                }
                if !on_heard(Heard::Reconnecting) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
    }

    fn publish<'a>(&'a self, id: &'a str, line: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            // Named by the session's name; the id travels inside the encrypted message.
            let channel = format!("{}{}", self.stream_channel, self.trust.name(id));
            let message =
                serde_json::to_string(&(id, line)).map_err(|err| self.corrupt(err.to_string()))?;
            let line = self
                .trust
                .encrypt(&channel, "stream", &message)
                .map_err(|err| self.corrupt(err.to_string()))?;
            let (channel, line) = (&channel, &line);
            let _: i64 = self
                .bounded(|mut connection| async move {
                    redis::cmd("PUBLISH")
                        .arg(channel)
                        .arg(line)
                        .query_async(&mut connection)
                        .await
                })
                .await?;
            Ok(())
        })
    }

    fn describe(&self) -> &str {
        &self.describe
    }

    fn ping(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            let _: String = self
                .bounded(|mut connection| async move {
                    redis::cmd("PING").query_async(&mut connection).await
                })
                .await?;
            Ok(())
        })
    }

    fn load<'a>(
        &'a self,
        id: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Option<StoredSession>, StoreError>> {
        Box::pin(async move {
            let key = self.key(id);
            let mut invocation = self.load.key(&key);
            invocation.arg(kept(ttl));
            let invocation = &invocation;
            let pairs: Vec<String> = self
                .bounded(
                    |mut connection| async move { invocation.invoke_async(&mut connection).await },
                )
                .await?;
            let mut fields = BTreeMap::new();
            let mut pairs = pairs.into_iter();
            while let (Some(field), Some(value)) = (pairs.next(), pairs.next()) {
                fields.insert(field, value);
            }
            if !fields.contains_key("meta") {
                return Ok(None);
            }
            // Every record must verify: one that does not makes the session not found here,
            // whoever asks (it is never adopted, nor partly used).
            let mut opened = BTreeMap::new();
            for (field, value) in &fields {
                if matches!(field.as_str(), "v" | "hv" | "q") {
                    continue;
                }
                let Some(value) = self.open(&key, field, value) else {
                    return Ok(None);
                };
                opened.insert(field.as_str(), value);
            }
            let Some(meta) = opened.get("meta") else {
                return Ok(None);
            };
            let mut meta: SessionMeta =
                serde_json::from_str(meta).map_err(|err| self.corrupt(format!("`meta`: {err}")))?;
            // `meta` carries only the `initialize`; the fields of each concern hold the rest.
            let handshake = &mut meta.handshake;
            if let Some(level) = opened.get("h:level") {
                handshake.log_level = Some((*level).to_owned());
            }
            for field in opened.keys() {
                if let Some(uri) = field.strip_prefix("h:sub:") {
                    handshake.subscriptions.insert(uri.to_owned());
                }
            }
            if opened.contains_key("h:initialized") {
                handshake.initialized = true;
            }
            let handshake_seq = match fields.get("hv") {
                Some(hv) => hv
                    .parse()
                    .map_err(|err| self.corrupt(format!("`hv`: {err}")))?,
                None => 0,
            };
            let version = match fields.get("v") {
                Some(v) => v
                    .parse()
                    .map_err(|err| self.corrupt(format!("`v`: {err}")))?,
                None => 0,
            };
            let mut states = BTreeMap::new();
            for (field, value) in &opened {
                if let Some(name) = field.strip_prefix("s:") {
                    let value = serde_json::from_str(value)
                        .map_err(|err| self.corrupt(format!("`{field}`: {err}")))?;
                    states.insert(name.to_owned(), value);
                }
            }
            Ok(Some(StoredSession {
                meta,
                handshake_seq,
                version,
                states,
                documents: BTreeMap::new(),
            }))
        })
    }

    fn touch<'a>(
        &'a self,
        id: &'a str,
        owner: Option<&'a str>,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Touched, StoreError>> {
        Box::pin(async move {
            let mut invocation = self.touch.key(self.key(id));
            invocation.key(self.ended_key(id));
            if let Some(owner) = owner {
                invocation.key(self.quota_key(owner));
            }
            invocation
                .arg(kept(ttl))
                .arg(millis(ttl))
                .arg(self.member(id));
            let invocation = &invocation;
            let version: i64 = self
                .bounded(
                    |mut connection| async move { invocation.invoke_async(&mut connection).await },
                )
                .await?;
            Ok(match version {
                -2 => Touched::Ended,
                -1 => Touched::Missing,
                version => Touched::Version(u64::try_from(version).unwrap_or_default()),
            })
        })
    }

    fn save_meta<'a>(
        &'a self,
        id: &'a str,
        meta: &'a SessionMeta,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            // `meta` keeps the `initialize`; the rest of the handshake goes to its own fields
            // (written here for a new record only: see `SAVE_META`).
            let record = SessionMeta {
                handshake: super::HandshakeRecord {
                    initialize: meta.handshake.initialize.clone(),
                    ..super::HandshakeRecord::default()
                },
                ..meta.clone()
            };
            let json =
                serde_json::to_string(&record).map_err(|err| self.corrupt(err.to_string()))?;
            let key = self.key(id);
            let handshake = &meta.handshake;
            let mut parts: Vec<(String, &str)> = handshake
                .subscriptions
                .iter()
                .map(|uri| (format!("h:sub:{uri}"), "1"))
                .collect();
            if let Some(level) = &handshake.log_level {
                parts.push(("h:level".to_owned(), level));
            }
            if handshake.initialized {
                parts.push(("h:initialized".to_owned(), "1"));
            }
            let mut invocation = self.save_meta.key(&key);
            invocation
                .key(self.ended_key(id))
                .key(self.quota_key(&meta.owner))
                .arg(self.seal(&key, "meta", &json))
                .arg(kept(ttl))
                .arg(self.member(id))
                .arg(parts.len());
            for (field, value) in parts {
                let record = self.seal(&key, &field, value);
                invocation.arg(field).arg(record);
            }
            let invocation = &invocation;
            let written: i64 = self
                .bounded(
                    |mut connection| async move { invocation.invoke_async(&mut connection).await },
                )
                .await?;
            Ok(written == 1)
        })
    }

    fn save_handshake<'a>(
        &'a self,
        id: &'a str,
        changes: &'a [Change],
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Changed, StoreError>> {
        Box::pin(async move {
            let key = self.key(id);
            let mut invocation = self.save_handshake.key(&key);
            invocation.key(self.ended_key(id)).arg(kept(ttl));
            for change in changes {
                match change {
                    Change::Level { params } => invocation
                        .arg("level")
                        .arg("")
                        .arg(self.seal(&key, "h:level", params)),
                    Change::Subscribe { uri } => invocation.arg("sub").arg(uri).arg(self.seal(
                        &key,
                        &format!("h:sub:{uri}"),
                        "1",
                    )),
                    Change::Unsubscribe { uri } => invocation.arg("unsub").arg(uri).arg(""),
                    Change::Initialized => invocation.arg("initialized").arg("").arg(self.seal(
                        &key,
                        "h:initialized",
                        "1",
                    )),
                };
            }
            let invocation = &invocation;
            let answer: redis::Value = self
                .bounded(
                    |mut connection| async move { invocation.invoke_async(&mut connection).await },
                )
                .await?;
            let numbers: Vec<i64> = match answer {
                redis::Value::Int(-3) => return Ok(Changed::Ended),
                redis::Value::Int(-2) => return Ok(Changed::Missing),
                other => redis::from_redis_value(other)
                    .map_err(|err| self.corrupt(format!("a handshake write's answer: {err}")))?,
            };
            if numbers.len() != changes.len() {
                return Err(self.corrupt(format!(
                    "a handshake write numbered {} of {} changes",
                    numbers.len(),
                    changes.len()
                )));
            }
            Ok(Changed::Numbered(
                changes
                    .iter()
                    .zip(numbers)
                    .filter_map(|(change, seq)| {
                        let seq = u64::try_from(seq).ok().filter(|seq| *seq > 0)?;
                        Some(Numbered {
                            seq,
                            change: change.clone(),
                        })
                    })
                    .collect(),
            ))
        })
    }

    fn save_states<'a>(
        &'a self,
        id: &'a str,
        expected: u64,
        write: StatesWrite,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Saved, StoreError>> {
        Box::pin(async move {
            let key = self.key(id);
            let mut invocation = self.save_states.key(&key);
            invocation
                .key(self.ended_key(id))
                .arg(expected)
                .arg(kept(ttl))
                .arg(write.states.len() + write.documents.len());
            for (name, json) in write.states {
                let field = format!("s:{name}");
                let record = self.seal(&key, &field, &json);
                invocation.arg(field).arg(record);
            }
            for (digest, json) in write.documents {
                let field = format!("d:{digest}");
                let record = self.seal(&key, &field, &json);
                invocation.arg(field).arg(record);
            }
            for digest in write.removed {
                invocation.arg(format!("d:{digest}"));
            }
            let invocation = &invocation;
            let answer: i64 = self
                .bounded(
                    |mut connection| async move { invocation.invoke_async(&mut connection).await },
                )
                .await?;
            Ok(match answer {
                -3 => Saved::Ended,
                -2 => Saved::Missing,
                -1 => Saved::Conflict,
                version => Saved::Version(u64::try_from(version).unwrap_or_default()),
            })
        })
    }

    fn documents<'a>(
        &'a self,
        id: &'a str,
        digests: Vec<String>,
    ) -> BoxFuture<'a, Result<BTreeMap<String, String>, StoreError>> {
        Box::pin(async move {
            if digests.is_empty() {
                return Ok(BTreeMap::new());
            }
            let key = self.key(id);
            let fields: Vec<String> = digests.iter().map(|d| format!("d:{d}")).collect();
            let (key, fields) = (&key, &fields);
            let found: Vec<Option<String>> = self
                .bounded(|mut connection| async move {
                    redis::cmd("HMGET")
                        .arg(key)
                        .arg(fields)
                        .query_async(&mut connection)
                        .await
                })
                .await?;
            let mut documents = BTreeMap::new();
            for ((digest, field), stored) in digests.into_iter().zip(fields).zip(found) {
                let Some(stored) = stored else { continue };
                // A document that does not verify is an error, not a missing one: a state
                // without its documents must not be used.
                let json = self.open(key, field, &stored).ok_or_else(|| {
                    self.corrupt(format!("the document `{field}` of `{key}` did not verify"))
                })?;
                documents.insert(digest, json.to_owned());
            }
            Ok(documents)
        })
    }

    fn claim<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
        limit: usize,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let mut invocation = self.claim.key(self.quota_key(owner));
            invocation.arg(self.member(id)).arg(limit).arg(millis(ttl));
            let invocation = &invocation;
            let claimed: i64 = self
                .bounded(
                    |mut connection| async move { invocation.invoke_async(&mut connection).await },
                )
                .await?;
            Ok(claimed == 1)
        })
    }

    fn release<'a>(&'a self, owner: &'a str, id: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let key = self.quota_key(owner);
            let member = self.member(id);
            let (key, id) = (&key, &member);
            let _: i64 = self
                .bounded(|mut connection| async move {
                    redis::cmd("ZREM")
                        .arg(key)
                        .arg(id)
                        .query_async(&mut connection)
                        .await
                })
                .await?;
            Ok(())
        })
    }

    fn delete<'a>(&'a self, id: &'a str, ttl: Duration) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            // The quota set's key is in the record: read first, so the script declares it. An
            // owner never changes, so nothing can change it between the two.
            let key = self.key(id);
            let quota: Option<String> = {
                let key = &key;
                self.bounded(|mut connection| async move {
                    redis::cmd("HGET")
                        .arg(key)
                        .arg("q")
                        .query_async(&mut connection)
                        .await
                })
                .await?
            };
            let mut invocation = self.delete.key(key);
            invocation.key(self.ended_key(id));
            // `q` is not authenticated: only a quota set of this project is touched.
            if let Some(quota) = quota.filter(|quota| quota.starts_with(&self.quota)) {
                invocation.key(quota);
            }
            invocation
                .arg(millis(ttl))
                .arg(self.member(id))
                .arg(&self.channel)
                .arg(
                    self.trust
                        .encrypt(&self.channel, "ended", id)
                        .map_err(|err| self.corrupt(err.to_string()))?,
                );
            let invocation = &invocation;
            let removed: i64 = self
                .bounded(
                    |mut connection| async move { invocation.invoke_async(&mut connection).await },
                )
                .await?;
            Ok(removed > 0)
        })
    }
}

#[cfg(test)]
mod tests {
    //! Against a real `redis-server` on a free loopback port (scripts/setup-interop installs it).

    use std::time::{Duration, Instant};

    use super::*;
    use crate::shared_store::HandshakeRecord;

    use crate::shared_store::test_server::{Server, trust};

    fn meta() -> SessionMeta {
        SessionMeta {
            principal: "token:alice".to_owned(),
            owner: "token:alice".to_owned(),
            handshake: HandshakeRecord {
                initialize: Some("{}".to_owned()),
                ..HandshakeRecord::default()
            },
        }
    }

    const TTL: Duration = Duration::from_secs(60);

    impl RedisBackend {
        /// Session `id` as [`RedisBackend::load`] reads it; a missing one is an error.
        async fn loaded(&self, id: &str) -> Result<StoredSession, StoreError> {
            self.load(id, TTL)
                .await?
                .ok_or_else(|| self.corrupt("gone".into()))
        }

        /// Every field of session `id`'s hash, as stored.
        async fn fields(&self, id: &str) -> Result<BTreeMap<String, String>, StoreError> {
            let key = self.key(id);
            let key = &key;
            self.bounded(|mut connection| async move {
                redis::cmd("HGETALL")
                    .arg(key)
                    .query_async(&mut connection)
                    .await
            })
            .await
        }
    }

    #[tokio::test]
    async fn states_are_written_by_compare_and_set() -> Result<(), StoreError> {
        let server = Server::start().await;
        let store = RedisBackend::connect(&server.url, "unit", &trust()).await?;
        assert_eq!(
            store.touch("s1", Some("token:alice"), TTL).await?,
            Touched::Missing,
            "unknown session"
        );
        assert!(store.save_meta("s1", &meta(), TTL).await?);
        assert_eq!(
            store.touch("s1", Some("token:alice"), TTL).await?,
            Touched::Version(0)
        );
        let states = StatesWrite {
            states: vec![("gate::State".to_owned(), r#"{"open":true}"#.to_owned())],
            ..StatesWrite::default()
        };
        assert_eq!(
            store.save_states("s1", 0, states.clone(), TTL).await?,
            Saved::Version(1)
        );
        assert_eq!(
            store.save_states("s1", 0, states.clone(), TTL).await?,
            Saved::Conflict,
            "a writer that read version 0 conflicts once version 1 is written"
        );
        let loaded = store.loaded("s1").await?;
        assert_eq!(loaded.meta, meta());
        assert_eq!(loaded.version, 1);
        assert_eq!(
            loaded.states.get("gate::State"),
            Some(&serde_json::json!({ "open": true }))
        );
        assert!(store.delete("s1", TTL).await?);
        assert!(!store.delete("s1", TTL).await?);
        assert_eq!(
            store.touch("s1", Some("token:alice"), TTL).await?,
            Touched::Ended
        );
        assert_eq!(store.save_states("s1", 1, states, TTL).await?, Saved::Ended);
        assert!(
            !store.save_meta("s1", &meta(), TTL).await?,
            "an ended session is not written again"
        );
        Ok(())
    }

    #[tokio::test]
    async fn quotas_count_live_sessions_atomically_and_forget_ended_ones() -> Result<(), StoreError>
    {
        let server = Server::start().await;
        let store = RedisBackend::connect(&server.url, "unit", &trust()).await?;
        let owner = "token:alice";
        assert!(store.claim(owner, "a", 2, TTL).await?);
        assert!(
            store.claim(owner, "a", 2, TTL).await?,
            "a claim is idempotent"
        );
        assert!(store.claim(owner, "b", 2, TTL).await?);
        assert!(!store.claim(owner, "c", 2, TTL).await?, "at the limit");
        assert!(
            store.claim("token:bob", "c", 2, TTL).await?,
            "owners are apart"
        );
        store.release(owner, "b").await?;
        assert!(store.claim(owner, "c", 2, TTL).await?);
        // Written sessions count while their record lives; `delete` frees their place.
        store.save_meta("a", &meta(), TTL).await?;
        store.delete("a", TTL).await?;
        assert!(store.claim(owner, "d", 2, TTL).await?);
        // A claim never written stops counting once its TTL passed.
        assert!(
            store
                .claim("token:carol", "e", 1, Duration::from_millis(50))
                .await?
        );
        tokio::time::sleep(Duration::from_millis(120)).await;
        assert!(store.claim("token:carol", "f", 1, TTL).await?);
        Ok(())
    }

    #[tokio::test]
    async fn documents_are_fields_of_their_own_written_once_and_removed_with_the_last_reference()
    -> Result<(), StoreError> {
        let server = Server::start().await;
        let store = RedisBackend::connect(&server.url, "unit", &trust()).await?;
        store.save_meta("s", &meta(), TTL).await?;
        let write = StatesWrite {
            states: vec![(
                "p::State".to_owned(),
                r#"{"$documents":{"1":"d1"}}"#.to_owned(),
            )],
            documents: vec![("d1".to_owned(), r#""long text""#.to_owned())],
            removed: Vec::new(),
        };
        assert_eq!(
            store.save_states("s", 0, write, TTL).await?,
            Saved::Version(1)
        );
        let loaded = store.loaded("s").await?;
        assert!(loaded.documents.is_empty(), "a load reads no documents");
        let found = store
            .documents("s", vec!["d1".to_owned(), "nope".to_owned()])
            .await?;
        assert_eq!(found.len(), 1);
        assert_eq!(found.get("d1").map(String::as_str), Some(r#""long text""#));
        let write = StatesWrite {
            states: vec![("p::State".to_owned(), r#"{"$documents":{}}"#.to_owned())],
            documents: Vec::new(),
            removed: vec!["d1".to_owned()],
        };
        assert_eq!(
            store.save_states("s", 1, write, TTL).await?,
            Saved::Version(2)
        );
        assert!(
            store
                .documents("s", vec!["d1".to_owned()])
                .await?
                .is_empty()
        );
        Ok(())
    }

    /// Two handles of one session (two replicas) change its handshake at once, many rounds:
    /// levels and subscriptions from both, interleaved. Each change is kept on its own and
    /// numbered by Redis, so the stored handshake holds, per concern, the change Redis
    /// numbered last: nothing one handle wrote is overwritten by the other's view.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_handshake_changes_through_two_handles_are_all_kept()
    -> Result<(), StoreError> {
        use std::collections::{BTreeMap, BTreeSet};

        const ROUNDS: usize = 150;
        let server = Server::start().await;
        let one = RedisBackend::connect(&server.url, "unit", &trust()).await?;
        let two = RedisBackend::connect(&server.url, "unit", &trust()).await?;
        assert!(one.save_meta("s", &meta(), TTL).await?);
        let start = one
            .load("s", TTL)
            .await?
            .ok_or_else(|| one.corrupt("gone".into()))?
            .handshake_seq;
        assert!(start > 0, "the counter starts at the server's clock");
        // Handle `n` sets levels `n-i` and (un)subscribes URIs of its own and shared ones.
        async fn changes(store: &RedisBackend, n: usize) -> Result<Vec<Numbered>, StoreError> {
            let mut numbered = Vec::new();
            for i in 0..ROUNDS {
                let uri = match i % 4 {
                    0 | 1 => format!("mem://{n}/{}", i % 5),
                    _ => format!("mem://shared/{}", i % 3),
                };
                let batch = [
                    Change::Level {
                        params: format!(r#"{{"level":"{n}-{i}"}}"#),
                    },
                    if i % 3 == 2 {
                        Change::Unsubscribe { uri }
                    } else {
                        Change::Subscribe { uri }
                    },
                ];
                let batch = if i % 2 == 0 { &batch[..] } else { &batch[1..] };
                match store.save_handshake("s", batch, TTL).await? {
                    Changed::Numbered(written) => {
                        assert_eq!(written.len(), batch.len());
                        numbered.extend(written);
                    }
                    other => panic!("the session is there: {other:?}"),
                }
            }
            Ok(numbered)
        }
        let (a, b) = tokio::try_join!(changes(&one, 1), changes(&two, 2))?;
        // Per concern, what Redis numbered last.
        let mut last: BTreeMap<String, (u64, Change)> = BTreeMap::new();
        for Numbered { seq, change } in a.into_iter().chain(b) {
            assert!(seq > start);
            let concern = format!("{:?}", change.concern());
            if last.get(&concern).is_none_or(|(known, _)| *known < seq) {
                last.insert(concern, (seq, change));
            }
        }
        let mut level = None;
        let mut subscribed = BTreeSet::new();
        for (_, change) in last.into_values() {
            match change {
                Change::Level { params } => level = Some(params),
                Change::Subscribe { uri } => {
                    subscribed.insert(uri);
                }
                _ => {}
            }
        }
        let loaded = two
            .load("s", TTL)
            .await?
            .ok_or_else(|| two.corrupt("gone".into()))?;
        assert_eq!(loaded.meta.handshake.log_level, level);
        assert_eq!(loaded.meta.handshake.subscriptions, subscribed);
        assert_eq!(
            loaded.meta.handshake.initialize.as_deref(),
            Some("{}"),
            "the meta record is not written by a change"
        );
        assert!(loaded.handshake_seq >= start + (ROUNDS * 3) as u64);
        // `initialized` is recorded once: the second is numbered 0 and not returned.
        let first = one.save_handshake("s", &[Change::Initialized], TTL).await?;
        assert!(
            matches!(&first, Changed::Numbered(n) if n.len() == 1),
            "{first:?}"
        );
        assert_eq!(
            two.save_handshake("s", &[Change::Initialized], TTL).await?,
            Changed::Numbered(Vec::new())
        );
        assert!(
            one.load("s", TTL)
                .await?
                .is_some_and(|s| s.meta.handshake.initialized)
        );
        // An ended session takes no change.
        assert!(one.delete("s", TTL).await?);
        assert_eq!(
            two.save_handshake("s", &[Change::Initialized], TTL).await?,
            Changed::Ended
        );
        assert_eq!(
            two.save_handshake("gone", &[Change::Initialized], TTL)
                .await?,
            Changed::Missing
        );
        Ok(())
    }

    /// Many rounds of subscribing and unsubscribing, on many URIs: an unsubscribed URI leaves
    /// the hash (no `0` kept), and the handshake read back is what was last asked for.
    #[tokio::test]
    async fn unsubscribed_uris_leave_the_hash() -> Result<(), StoreError> {
        use std::collections::BTreeSet;

        let server = Server::start().await;
        let store = RedisBackend::connect(&server.url, "unit", &trust()).await?;
        assert!(store.save_meta("s", &meta(), TTL).await?);
        let mut subscribed = BTreeSet::new();
        for round in 0..200 {
            let uri = format!("mem://{}", round % 17);
            let change = if subscribed.contains(&uri) && round % 3 != 0 {
                subscribed.remove(&uri);
                Change::Unsubscribe { uri }
            } else {
                subscribed.insert(uri.clone());
                Change::Subscribe { uri }
            };
            let written = store.save_handshake("s", &[change], TTL).await?;
            assert!(
                matches!(&written, Changed::Numbered(n) if n.len() == 1),
                "{written:?}"
            );
        }
        // And an unsubscribe of a URI never subscribed to.
        store
            .save_handshake(
                "s",
                &[Change::Unsubscribe {
                    uri: "mem://never".into(),
                }],
                TTL,
            )
            .await?;
        let fields = store.fields("s").await?;
        let key = store.key("s");
        let stored: BTreeSet<String> = fields
            .iter()
            .filter_map(|(field, value)| {
                let uri = field.strip_prefix("h:sub:")?;
                assert_eq!(
                    store.open(&key, field, value),
                    Some("1"),
                    "{field} is kept as {value}"
                );
                Some(uri.to_owned())
            })
            .collect();
        assert_eq!(stored, subscribed);
        assert!(
            !subscribed.is_empty() && subscribed.len() < 17,
            "{subscribed:?}"
        );
        let loaded = store.loaded("s").await?;
        assert_eq!(loaded.meta.handshake.subscriptions, subscribed);
        assert_eq!(loaded.meta.handshake.initialize.as_deref(), Some("{}"));
        Ok(())
    }

    /// Every operation on a Redis Cluster node: a script touching a key in another slot than
    /// its declared ones, or declaring keys of two slots, fails there (`CROSSSLOT`), which a
    /// standalone server never says.
    #[tokio::test]
    async fn every_operation_runs_on_a_cluster() -> Result<(), StoreError> {
        let server = Server::start_cluster().await;
        let store = RedisBackend::connect(&server.url, "unit", &trust()).await?;
        let owner = "token:alice";
        assert!(store.claim(owner, "s", 2, TTL).await?);
        assert!(store.save_meta("s", &meta(), TTL).await?);
        assert_eq!(
            store.touch("s", Some(owner), TTL).await?,
            Touched::Version(0)
        );
        // A longer idle timeout than the TTL left: this touch renews (and writes).
        assert_eq!(
            store.touch("s", Some(owner), TTL * 4).await?,
            Touched::Version(0)
        );
        let write = StatesWrite {
            states: vec![(
                "p::State".to_owned(),
                r#"{"$documents":{"1":"d1"}}"#.to_owned(),
            )],
            documents: vec![("d1".to_owned(), r#""text""#.to_owned())],
            removed: Vec::new(),
        };
        assert_eq!(
            store.save_states("s", 0, write, TTL).await?,
            Saved::Version(1)
        );
        assert!(store.load("s", TTL).await?.is_some());
        let change = [Change::Subscribe {
            uri: "mem://a".to_owned(),
        }];
        assert!(matches!(
            store.save_handshake("s", &change, TTL).await?,
            Changed::Numbered(n) if n.len() == 1
        ));
        assert_eq!(store.documents("s", vec!["d1".to_owned()]).await?.len(), 1);
        store.release(owner, "nope").await?;
        assert!(store.delete("s", TTL).await?);
        assert_eq!(store.touch("s", Some(owner), TTL).await?, Touched::Ended);
        Ok(())
    }

    /// A written session keeps counting against its owner's quota past its claim's expiry,
    /// renewed with its TTL.
    #[tokio::test]
    async fn a_written_session_counts_while_it_lives() -> Result<(), StoreError> {
        let server = Server::start().await;
        let store = RedisBackend::connect(&server.url, "unit", &trust()).await?;
        let owner = "token:alice";
        assert!(
            store
                .claim(owner, "a", 1, Duration::from_millis(50))
                .await?
        );
        assert!(store.save_meta("a", &meta(), TTL).await?);
        tokio::time::sleep(Duration::from_millis(120)).await;
        assert!(!store.claim(owner, "b", 1, TTL).await?, "a still counts");
        assert!(store.delete("a", TTL).await?);
        assert!(
            store.claim(owner, "b", 1, TTL).await?,
            "a ended, its place is free"
        );
        Ok(())
    }

    /// A record changed in the store (another principal written into `meta`), one moved from
    /// another session, or one written without the key, is refused: the session is not found.
    #[tokio::test]
    async fn records_that_do_not_verify_are_refused() -> Result<(), StoreError> {
        let server = Server::start().await;
        let store = RedisBackend::connect(&server.url, "unit", &trust()).await?;
        for id in ["a", "b", "c", "d"] {
            assert!(store.save_meta(id, &meta(), TTL).await?);
            assert!(store.load(id, TTL).await?.is_some());
        }
        let hset = |id: &str, field: &'static str, value: String| {
            let key = store.key(id);
            let store = &store;
            async move {
                let key = &key;
                let value = &value;
                store
                    .bounded(|mut connection| async move {
                        redis::cmd("HSET")
                            .arg(key)
                            .arg(field)
                            .arg(value)
                            .query_async::<i64>(&mut connection)
                            .await
                    })
                    .await
            }
        };
        let stored = store.fields("a").await?["meta"].clone();
        hset("a", "meta", stored.replace("token:alice", "token:mallory")).await?;
        assert_eq!(store.load("a", TTL).await?, None, "a changed principal");
        hset("b", "meta", stored.clone()).await?;
        assert_eq!(store.load("b", TTL).await?, None, "a record moved from `a`");
        let plain = r#"{"principal":"token:mallory","owner":"token:mallory","handshake":{}}"#;
        hset("c", "meta", plain.to_owned()).await?;
        assert_eq!(
            store.load("c", TTL).await?,
            None,
            "a record without the key"
        );
        hset("d", "h:level", r#"{"level":"debug"}"#.to_owned()).await?;
        assert_eq!(
            store.load("d", TTL).await?,
            None,
            "a handshake part without the key"
        );
        // No key names the session: only its digest.
        assert!(!store.key("a").contains(":a"), "{}", store.key("a"));
        Ok(())
    }

    /// What another client of Redis publishes on the replicas' channels (a line for a
    /// session's GET stream, a session ended) is not heard; what a replica announces is.
    #[tokio::test]
    async fn only_announcements_made_with_the_key_are_heard() -> Result<(), StoreError> {
        let server = Server::start().await;
        let store = RedisBackend::connect(&server.url, "unit", &trust()).await?;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        store.listen(Box::new(move |heard| tx.send(heard).is_ok()));
        let raw_publish = |channel: String, payload: &'static str| {
            let store = &store;
            async move {
                let channel = &channel;
                store
                    .bounded(|mut connection| async move {
                        redis::cmd("PUBLISH")
                            .arg(channel)
                            .arg(payload)
                            .query_async::<i64>(&mut connection)
                            .await
                    })
                    .await
            }
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut heard = Vec::new();
        // Each round: the forged messages, then a genuine one on the same connection, which
        // Redis delivers after them; once the genuine one arrives the forged ones were dropped.
        'rounds: loop {
            assert!(Instant::now() < deadline, "nothing was heard: {heard:?}");
            raw_publish(format!("{}s", store.stream_channel), r#"{"forged":1}"#).await?;
            raw_publish(store.channel.clone(), "s").await?;
            store.publish("s", r#"{"genuine":1}"#).await?;
            while let Ok(Some(one)) =
                tokio::time::timeout(Duration::from_millis(100), rx.recv()).await
            {
                let genuine =
                    matches!(&one, Heard::ForStream { line, .. } if line.contains("genuine"));
                heard.push(one);
                if genuine {
                    break 'rounds;
                }
            }
        }
        assert!(
            heard.iter().all(|one| match one {
                Heard::ForStream { id, line } => id == "s" && line == r#"{"genuine":1}"#,
                Heard::Ended(_) => false,
                Heard::Reconnecting => true,
            }),
            "{heard:?}"
        );
        Ok(())
    }

    #[tokio::test]
    async fn namespaces_keep_projects_apart() -> Result<(), StoreError> {
        let server = Server::start().await;
        let one = RedisBackend::connect(&server.url, "one", &trust()).await?;
        let two = RedisBackend::connect(&server.url, "two", &trust()).await?;
        one.save_meta("s", &meta(), TTL).await?;
        assert_eq!(two.load("s", TTL).await?, None);
        assert!(one.load("s", TTL).await?.is_some());
        Ok(())
    }

    #[tokio::test]
    async fn a_store_that_goes_away_fails_fast_naming_itself_and_recovers() -> Result<(), StoreError>
    {
        let mut server = Server::start().await;
        let store = RedisBackend::connect(&server.url, "unit", &trust()).await?;
        store.save_meta("s", &meta(), TTL).await?;
        server.stop();
        let failed = store.touch("s", Some("token:alice"), TTL).await;
        match failed {
            Err(StoreError::Unavailable { store: named, .. }) => assert_eq!(named, server.url),
            other => panic!("expected the store to be unavailable, got {other:?}"),
        }
        server.restart().await;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match store.ping().await {
                Ok(()) => break,
                Err(err) => assert!(Instant::now() < deadline, "never recovered: {err}"),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // A fresh server has lost the session (no persistence here): missing, not ended, so
        // the replica holding it writes it again.
        assert_eq!(
            store.touch("s", Some("token:alice"), TTL).await?,
            Touched::Missing
        );
        Ok(())
    }
}
