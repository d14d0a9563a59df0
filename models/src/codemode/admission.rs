//! The process-wide bound on code mode: how many sandboxes run at once, and how much memory
//! their limits add up to.
//!
//! Each `execute` runs a QuickJS runtime on a thread of its own, limited to `memoryBytes`; one
//! session's limits say nothing of how many sessions run snippets together. Before a sandbox
//! starts, its execute takes a [`Permit`] from one pool shared by the whole process: a turn
//! (at most `maxConcurrentExecutes` sandboxes at once) and its `memoryBytes` (the limits of the
//! sandboxes running add up to at most `totalMemoryBytes`). An execute that finds neither waits
//! its turn for at most `executeQueueMs`, then is refused with a message naming the limit and
//! the config field to raise. The permit goes with the sandbox's thread and is given back when
//! its run has ended (its runtime and memory freed), not when the execute stops waiting: a
//! cancelled execute's sandbox still counts until it has really stopped.
//!
//! Each execute is checked against the limits of its own model config; several projects in one
//! process share the one pool.

use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// What one execute asks of the pool, and the limits it is checked against.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ask {
    /// The execute's own memory limit (`memoryBytes`).
    pub(crate) memory_bytes: usize,
    /// The most sandboxes running at once (`maxConcurrentExecutes`).
    pub(crate) max_concurrent: usize,
    /// The most memory the running sandboxes' limits may add up to (`totalMemoryBytes`).
    pub(crate) total_memory_bytes: usize,
    /// How long to wait for a turn (`executeQueueMs`).
    pub(crate) queue: Duration,
}

/// What the pool holds now, and the most sandboxes it ever held at once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Usage {
    pub(crate) running: usize,
    pub(crate) reserved_bytes: usize,
    pub(crate) peak_running: usize,
    pub(crate) refused: usize,
}

struct Pool {
    usage: Mutex<Usage>,
    /// Woken whenever a permit is given back.
    freed: Notify,
}

static POOL: Pool = Pool {
    usage: Mutex::new(Usage {
        running: 0,
        reserved_bytes: 0,
        peak_running: 0,
        refused: 0,
    }),
    freed: Notify::const_new(),
};

fn usage() -> std::sync::MutexGuard<'static, Usage> {
    // A panic while holding the lock leaves plain counters behind: still usable.
    POOL.usage
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The pool's counters now (for `overview` and tests).
pub(crate) fn snapshot() -> Usage {
    *usage()
}

/// One running sandbox's share of the pool; given back when dropped.
#[derive(Debug)]
pub(crate) struct Permit {
    memory_bytes: usize,
}

impl Drop for Permit {
    fn drop(&mut self) {
        {
            let mut usage = usage();
            usage.running = usage.running.saturating_sub(1);
            usage.reserved_bytes = usage.reserved_bytes.saturating_sub(self.memory_bytes);
        }
        POOL.freed.notify_waiters();
    }
}

/// Which limit kept an execute waiting.
#[derive(Debug, Clone, Copy)]
enum Full {
    Concurrency,
    Memory,
}

/// A turn in the pool for `ask`, waiting at most `ask.queue`; the refusal says which limit was
/// reached and which config field raises it.
pub(crate) async fn admit(ask: Ask) -> Result<Permit, String> {
    let max_concurrent = ask.max_concurrent.max(1);
    if ask.memory_bytes > ask.total_memory_bytes {
        usage().refused += 1;
        return Err(format!(
            "Refused: memoryBytes ({}) is more than totalMemoryBytes ({}), so no execute can \
             ever start; raise `totalMemoryBytes` in the codemode model's config (or lower \
             `memoryBytes`)",
            ask.memory_bytes, ask.total_memory_bytes
        ));
    }
    // A queue time too large to add is as good as forever (a year).
    let now = Instant::now();
    let deadline = now
        .checked_add(ask.queue)
        .unwrap_or_else(|| now + Duration::from_secs(365 * 24 * 3600));
    loop {
        // Registered before looking, so a permit given back in between still wakes this.
        let freed = POOL.freed.notified();
        tokio::pin!(freed);
        freed.as_mut().enable();
        let full = {
            let mut usage = usage();
            let full = if usage.running >= max_concurrent {
                Some(Full::Concurrency)
            } else if usage.reserved_bytes + ask.memory_bytes > ask.total_memory_bytes {
                Some(Full::Memory)
            } else {
                None
            };
            match full {
                None => {
                    usage.running += 1;
                    usage.reserved_bytes += ask.memory_bytes;
                    usage.peak_running = usage.peak_running.max(usage.running);
                    return Ok(Permit {
                        memory_bytes: ask.memory_bytes,
                    });
                }
                Some(full) => full,
            }
        };
        if tokio::time::timeout_at(deadline, freed).await.is_err() {
            usage().refused += 1;
            return Err(refusal(full, ask, max_concurrent));
        }
    }
}

fn refusal(full: Full, ask: Ask, max_concurrent: usize) -> String {
    let waited = ask.queue.as_millis();
    match full {
        Full::Concurrency => format!(
            "Busy: this proxy already runs maxConcurrentExecutes ({max_concurrent}) code mode \
             executes at once, and this one waited executeQueueMs ({waited} ms) for a turn; \
             nothing ran. Try again later, or raise `maxConcurrentExecutes` (or \
             `executeQueueMs`) in the codemode model's config"
        ),
        Full::Memory => format!(
            "Busy: the code mode executes running now hold totalMemoryBytes ({} bytes) of \
             memory limits, and this one (memoryBytes {}) waited executeQueueMs ({waited} ms) \
             for room; nothing ran. Try again later, or raise `totalMemoryBytes` (or \
             `executeQueueMs`) in the codemode model's config",
            ask.total_memory_bytes, ask.memory_bytes
        ),
    }
}
