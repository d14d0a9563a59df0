//! The Redis (or Valkey) backend of the shared store, through the `redis` crate's connection
//! manager (one multiplexed connection per replica, reconnected when it breaks).
//!
//! A session is one hash, `mcpm:{namespace}:session:{id}`: `meta` (JSON [`SessionMeta`]),
//! `v` (the states' version) and `s:{state type}` (each model state's JSON). Writes that must
//! be atomic are Lua scripts: the compare-and-set of states checks `v` and writes in one step.
//! Every command is bounded by [`OP_TIMEOUT`]; the connection manager's own connect and
//! response timeouts are the same, so a store that is down answers "unavailable" within it.

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::future::BoxFuture;
use redis::AsyncCommands;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::{Backend, Saved, SessionMeta, StoreError, StoredSession, redact};

/// How long one store operation may take before the request fails.
const OP_TIMEOUT: Duration = Duration::from_secs(1);

/// Renews the TTL and returns the states' version, or -1 when the session is gone.
const TOUCH: &str = r"
if redis.call('PEXPIRE', KEYS[1], ARGV[1]) == 1 then
  return tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
end
return -1
";

/// Writes states if `v` is still ARGV[1]: returns the new version, -1 on conflict, -2 gone.
const SAVE_STATES: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return -2 end
local v = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if v ~= tonumber(ARGV[1]) then return -1 end
for i = 3, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('HSET', KEYS[1], 'v', v + 1)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return v + 1
";

/// Writes the meta (and `v` = 0 for a new session) and renews the TTL.
const SAVE_META: &str = r"
redis.call('HSET', KEYS[1], 'meta', ARGV[1])
redis.call('HSETNX', KEYS[1], 'v', 0)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
";

pub(super) struct RedisBackend {
    describe: String,
    prefix: String,
    connection: ConnectionManager,
    touch: redis::Script,
    save_states: redis::Script,
    save_meta: redis::Script,
}

impl RedisBackend {
    pub(super) async fn connect(url: &str, namespace: &str) -> Result<Self, StoreError> {
        let describe = redact(url);
        let config_error = |reason: String| StoreError::Config {
            store: describe.clone(),
            reason,
        };
        if namespace.is_empty() || namespace.contains(['{', '}', ' ']) {
            return Err(config_error(format!(
                "the namespace `{namespace}` must be non-empty, without spaces or braces"
            )));
        }
        let client = redis::Client::open(url).map_err(|err| config_error(err.to_string()))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(OP_TIMEOUT))
            .set_response_timeout(Some(OP_TIMEOUT))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(500));
        let connection = ConnectionManager::new_lazy_with_config(client, config)
            .map_err(|err| config_error(err.to_string()))?;
        let backend = Self {
            describe,
            prefix: format!("mcpm:{namespace}:session:"),
            connection,
            touch: redis::Script::new(TOUCH),
            save_states: redis::Script::new(SAVE_STATES),
            save_meta: redis::Script::new(SAVE_META),
        };
        backend.ping().await?;
        Ok(backend)
    }

    fn key(&self, id: &str) -> String {
        format!("{}{id}", self.prefix)
    }

    /// Runs `op` within [`OP_TIMEOUT`], turning every failure into [`StoreError::Unavailable`].
    async fn bounded<T>(
        &self,
        op: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(OP_TIMEOUT, op).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(err)) => Err(self.unavailable(err.to_string())),
            Err(_) => Err(self.unavailable(format!(
                "no answer within {} ms",
                OP_TIMEOUT.as_millis()
            ))),
        }
    }

    fn unavailable(&self, reason: String) -> StoreError {
        StoreError::Unavailable {
            store: self.describe.clone(),
            reason,
        }
    }

    fn corrupt(&self, reason: String) -> StoreError {
        StoreError::Corrupt {
            store: self.describe.clone(),
            reason,
        }
    }
}

fn millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

impl Backend for RedisBackend {
    fn describe(&self) -> &str {
        &self.describe
    }

    fn ping(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            let mut connection = self.connection.clone();
            let _: String = self
                .bounded(redis::cmd("PING").query_async(&mut connection))
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
            let mut connection = self.connection.clone();
            let (fields, _): (BTreeMap<String, String>, i64) = self
                .bounded(
                    redis::pipe()
                        .atomic()
                        .hgetall(&key)
                        .pexpire(&key, millis(ttl) as i64)
                        .query_async(&mut connection),
                )
                .await?;
            let Some(meta) = fields.get("meta") else {
                return Ok(None);
            };
            let meta: SessionMeta = serde_json::from_str(meta)
                .map_err(|err| self.corrupt(format!("`meta`: {err}")))?;
            let version = match fields.get("v") {
                Some(v) => v
                    .parse()
                    .map_err(|err| self.corrupt(format!("`v`: {err}")))?,
                None => 0,
            };
            let mut states = BTreeMap::new();
            for (field, value) in &fields {
                if let Some(name) = field.strip_prefix("s:") {
                    let value = serde_json::from_str(value)
                        .map_err(|err| self.corrupt(format!("`{field}`: {err}")))?;
                    states.insert(name.to_owned(), value);
                }
            }
            Ok(Some(StoredSession {
                meta,
                version,
                states,
            }))
        })
    }

    fn touch<'a>(
        &'a self,
        id: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Option<u64>, StoreError>> {
        Box::pin(async move {
            let mut connection = self.connection.clone();
            let mut invocation = self.touch.key(self.key(id));
            invocation.arg(millis(ttl));
            let version: i64 = self
                .bounded(invocation.invoke_async(&mut connection))
                .await?;
            Ok(u64::try_from(version).ok())
        })
    }

    fn save_meta<'a>(
        &'a self,
        id: &'a str,
        meta: &'a SessionMeta,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let json = serde_json::to_string(meta).map_err(|err| self.corrupt(err.to_string()))?;
            let mut connection = self.connection.clone();
            let mut invocation = self.save_meta.key(self.key(id));
            invocation.arg(json).arg(millis(ttl));
            let _: i64 = self
                .bounded(invocation.invoke_async(&mut connection))
                .await?;
            Ok(())
        })
    }

    fn save_states<'a>(
        &'a self,
        id: &'a str,
        expected: u64,
        states: Vec<(String, String)>,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Saved, StoreError>> {
        Box::pin(async move {
            let mut connection = self.connection.clone();
            let mut invocation = self.save_states.key(self.key(id));
            invocation.arg(expected).arg(millis(ttl));
            for (name, json) in states {
                invocation.arg(format!("s:{name}")).arg(json);
            }
            let answer: i64 = self
                .bounded(invocation.invoke_async(&mut connection))
                .await?;
            Ok(match answer {
                -2 => Saved::Gone,
                -1 => Saved::Conflict,
                version => Saved::Version(u64::try_from(version).unwrap_or_default()),
            })
        })
    }

    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let mut connection = self.connection.clone();
            let removed: i64 = self
                .bounded(connection.del(self.key(id)))
                .await?;
            Ok(removed > 0)
        })
    }
}
