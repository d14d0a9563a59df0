//! The admin API's log tail: a `tracing` layer that keeps the last [`CAPACITY`] formatted events
//! in a ring buffer (`GET /api/logs`) and hands new ones to followers (`GET /api/logs?follow`,
//! as SSE). It sees what the process's log filter lets through (`--log`, `MCPCTL_LOG`).
//!
//! The layer is installed for the long-running commands whether or not an admin listener is
//! asked for (installing it later is not possible with a global subscriber); without a listener
//! it only keeps the last lines in memory.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, OnceLock};

use serde::Serialize;
use tokio::sync::broadcast;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::Context;

/// How many lines the ring buffer keeps.
pub(crate) const CAPACITY: usize = 1000;

/// One log event, as the API shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LogLine {
    /// RFC 3339, UTC.
    pub(crate) time: String,
    pub(crate) level: String,
    pub(crate) target: String,
    /// The message, then the event's other fields as `key=value`.
    pub(crate) message: String,
}

/// The ring buffer and the followers' channel.
pub(crate) struct LogBuffer {
    lines: Mutex<VecDeque<LogLine>>,
    follow: broadcast::Sender<LogLine>,
    restarts: std::sync::atomic::AtomicU64,
}

impl LogBuffer {
    /// The last `n` lines (all when `None`), oldest first.
    pub(crate) fn tail(&self, n: Option<usize>) -> Vec<LogLine> {
        let lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        let skip = n.map_or(0, |n| lines.len().saturating_sub(n));
        lines.iter().skip(skip).cloned().collect()
    }

    /// New lines from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<LogLine> {
        self.follow.subscribe()
    }

    /// How many times a session restarted its upstream (counted from the session's
    /// "restarting the upstream" event: the one place that says so).
    pub(crate) fn upstream_restarts(&self) -> u64 {
        self.restarts.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn push(&self, line: LogLine) {
        if line.message.starts_with("restarting the upstream") {
            self.restarts
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let _ = self.follow.send(line.clone());
        let mut lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        if lines.len() == CAPACITY {
            lines.pop_front();
        }
        lines.push_back(line);
    }
}

/// The process's buffer (one per process, like the subscriber it belongs to).
pub(crate) fn buffer() -> &'static Arc<LogBuffer> {
    static BUFFER: OnceLock<Arc<LogBuffer>> = OnceLock::new();
    BUFFER.get_or_init(|| {
        Arc::new(LogBuffer {
            lines: Mutex::new(VecDeque::with_capacity(CAPACITY)),
            follow: broadcast::channel(256).0,
            restarts: std::sync::atomic::AtomicU64::new(0),
        })
    })
}

/// The layer that feeds [`buffer`].
pub(crate) struct RingLayer;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for RingLayer {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let meta = event.metadata();
        buffer().push(LogLine {
            time: chrono::DateTime::<chrono::Utc>::from(std::time::SystemTime::now())
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            level: meta.level().to_string(),
            target: meta.target().to_owned(),
            message: fields.text,
        });
    }
}

#[derive(Default)]
struct Fields {
    text: String,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let rest = std::mem::take(&mut self.text);
            let _ = write!(self.text, "{value:?}");
            self.text.push_str(&rest);
        } else {
            let _ = write!(self.text, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.text.insert_str(0, value);
        } else {
            let _ = write!(self.text, " {}={value}", field.name());
        }
    }
}
