//! Which generation of the shared configuration each replica has in force: the fence that
//! lets the replica where a change was applied answer only once every other live replica runs
//! it too.
//!
//! With Redis, beside the configuration's hash: the sorted set `mcpm:{namespace}:config-replicas`
//! (each live replica, scored by when it stops counting as live: [`ALIVE_FOR`] after it last
//! said anything) and the hash `mcpm:{namespace}:config-acks` (per replica, what it has in
//! force and what it last refused, as a record authenticated with the replicas' key and bound
//! to the replica's field, so no one without the key can make a replica look up to date).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::SharedConfig;
use crate::shared_store::StoreError;

/// How long a replica counts as live after it last acknowledged: replicas say so at least
/// every [`SharedConfig::ACK_EVERY`].
const ALIVE_FOR: Duration = Duration::from_secs(15);

/// How often a waiting replica looks again.
const POLL: Duration = Duration::from_millis(20);

/// What one replica says of the shared configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Ack {
    /// The generation it runs.
    in_force: u64,
    /// A later generation it refused (it could not build it), and why.
    refused: Option<(u64, String)>,
}

/// A live replica without a generation in force.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Lagging {
    /// The replica's name, as it acknowledges.
    pub replica: String,
    /// The generation it runs.
    pub in_force: u64,
    /// Why it refused the generation waited for; `None`: it had not taken it when the wait
    /// ended.
    pub refused: Option<String>,
}

impl std::fmt::Display for Lagging {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.refused {
            Some(why) => write!(
                f,
                "replica `{}` refused it and runs generation {}: {why}",
                self.replica, self.in_force
            ),
            None => write!(
                f,
                "replica `{}` still runs generation {}",
                self.replica, self.in_force
            ),
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl SharedConfig {
    /// How often a replica must [`acknowledge`](Self::acknowledge) to keep counting as live.
    pub const ACK_EVERY: Duration = Duration::from_secs(5);

    /// Says that `replica` (a name unique to this process) runs generation `in_force`, and,
    /// with `refused`, which later generation it could not take and why. Also what keeps it
    /// counted as live: call it after every generation taken or refused, and every
    /// [`ACK_EVERY`](Self::ACK_EVERY).
    pub async fn acknowledge(
        &self,
        replica: &str,
        in_force: u64,
        refused: Option<(u64, &str)>,
    ) -> Result<(), StoreError> {
        let ack = Ack {
            in_force,
            refused: refused.map(|(generation, why)| (generation, why.to_owned())),
        };
        let (replicas, acks) = self.ack_keys();
        let record = self.trust.seal(
            &acks,
            replica,
            &serde_json::to_string(&ack).unwrap_or_default(),
        );
        let mut connection = self.connection.clone();
        let mut write = redis::pipe();
        write
            .atomic()
            .cmd("HSET")
            .arg(&acks)
            .arg(replica)
            .arg(record)
            .ignore()
            .cmd("ZADD")
            .arg(&replicas)
            .arg(now_ms().saturating_add(ALIVE_FOR.as_millis() as u64))
            .arg(replica)
            .ignore();
        self.bounded(write.query_async::<()>(&mut connection)).await
    }

    /// Says that `replica` stops: it is no longer waited for.
    pub async fn leave(&self, replica: &str) -> Result<(), StoreError> {
        let (replicas, acks) = self.ack_keys();
        let mut connection = self.connection.clone();
        let mut write = redis::pipe();
        write
            .atomic()
            .cmd("ZREM")
            .arg(&replicas)
            .arg(replica)
            .ignore()
            .cmd("HDEL")
            .arg(&acks)
            .arg(replica)
            .ignore();
        self.bounded(write.query_async::<()>(&mut connection)).await
    }

    /// Waits, at most `limit`, until every live replica runs `generation` or a later one;
    /// returns those that do not: that refused it, or had not taken it when the time was up.
    /// An acknowledgement that does not verify counts as not having taken it (and is logged).
    pub async fn await_in_force(
        &self,
        generation: u64,
        limit: Duration,
    ) -> Result<Vec<Lagging>, StoreError> {
        let deadline = Instant::now() + limit;
        loop {
            let lagging = self.lagging(generation).await?;
            let waiting = lagging.iter().any(|l| l.refused.is_none());
            if !waiting || Instant::now() >= deadline {
                return Ok(lagging);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The live replicas without `generation` in force.
    async fn lagging(&self, generation: u64) -> Result<Vec<Lagging>, StoreError> {
        let (replicas, acks) = self.ack_keys();
        let now = now_ms();
        let mut connection = self.connection.clone();
        let mut read = redis::pipe();
        read.cmd("ZREMRANGEBYSCORE")
            .arg(&replicas)
            .arg("-inf")
            .arg(now)
            .ignore()
            .cmd("ZRANGEBYSCORE")
            .arg(&replicas)
            .arg(now)
            .arg("+inf");
        let (live,): (Vec<String>,) = self.bounded(read.query_async(&mut connection)).await?;
        if live.is_empty() {
            return Ok(Vec::new());
        }
        let mut get = redis::cmd("HMGET");
        get.arg(&acks).arg(&live);
        let records: Vec<Option<String>> = self.bounded(get.query_async(&mut connection)).await?;
        let mut lagging = Vec::new();
        for (replica, record) in live.into_iter().zip(records) {
            let ack = match record
                .as_deref()
                .map(|r| self.trust.open(&acks, &replica, r))
            {
                Some(Ok(json)) => serde_json::from_str::<Ack>(json).unwrap_or_default(),
                Some(Err(err)) => {
                    tracing::error!(
                        key = %acks,
                        %replica,
                        "a replica's acknowledgement of the shared configuration was refused: {err}"
                    );
                    Ack::default()
                }
                None => Ack::default(),
            };
            if ack.in_force >= generation {
                continue;
            }
            let refused = ack
                .refused
                .filter(|(refused, _)| *refused >= generation)
                .map(|(_, why)| why);
            lagging.push(Lagging {
                replica,
                in_force: ack.in_force,
                refused,
            });
        }
        Ok(lagging)
    }

    /// The sorted set of live replicas and the hash of their acknowledgements.
    fn ack_keys(&self) -> (String, String) {
        (
            format!("{}-replicas", self.key),
            format!("{}-acks", self.key),
        )
    }
}
