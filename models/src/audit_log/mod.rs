//! The tamper-evident log the [`audit`](crate::audit) model writes, and its verification
//! (`mcpctl audit verify`).
//!
//! **Format.** One JSON object per line (a record), members in this order: `seq` (1, 2, ...),
//! `time` (RFC 3339, UTC, milliseconds), `session`, `identity` (the subject, as a person reads
//! it), `principal` (the full, unambiguous principal: `Identity::principal`), `method`,
//! `target` (the tool, prompt or resource URI, when there is one), `outcome` (`ok`, `error`,
//! `rejected` or `cancelled`), `durationMs`, `error` (its message, when there is one),
//! `arguments` (only when configured, secrets redacted), `prev` and `mac`:
//!
//! ```text
//! {"seq":1,"time":"2026-11-30T09:15:02.114Z","session":"4242-1","identity":"alice","principal":"local:alice","method":"tools/call","target":"echo","outcome":"ok","durationMs":1.82,"prev":"0000…0000","mac":"5f1c…"}
//! ```
//!
//! **The chain.** `mac` is HMAC-SHA256 (the `hmac` crate), under the log's key, of the
//! record's line without its `mac` member (the exact bytes: the line up to `,"mac":`, closed
//! with `}`), written as 64 lower-case hex digits; MACs are checked in constant time. `prev` is
//! the previous record's `mac`; the first record's is [`GENESIS`]. So a record changed,
//! inserted, removed or moved breaks the chain at that line, and only a holder of the key could
//! write a record that fits.
//!
//! **Restarts.** A writer that finds the log not as it left it (truncated, emptied, replaced or
//! rotated while it ran, or, at start, ending before its anchor's record) logs a warning and
//! writes a *restart record* before its next record:
//!
//! ```text
//! {"seq":6,"time":"…","event":"restart","reason":"the log was truncated…","previousSeq":10,"previousMac":"9a0e…","prev":"…","mac":"…"}
//! ```
//!
//! It continues the chain found in the file (so the file still verifies) and names, under the
//! MAC, the head the writer had before: record 10 and its MAC, here, where the file now ends at
//! record 5. [`verify`] reports every restart ([`Restart`]).
//!
//! **Anchors.** What a chain alone cannot show is records cut off its end. With an anchor file
//! (the model's `anchorPath`), the writer records the last record's `seq` and `mac` there after
//! every record (`{"seq":10,"mac":"9a0e…"}`, written to a temporary file and renamed over the
//! anchor, so it is always whole); [`verify_with_anchor`] then fails when the log ends before
//! the anchor's record ([`Verdict::Truncated`]). Keep the anchor where the log's readers
//! cannot write (another directory, another machine's copy).
//!
//! **Writing.** Every session of a process that logs to one file shares one writer (a
//! process-wide lock per file); each record is one `write` of a whole line to a file opened
//! with `O_APPEND` (created with mode 0600), under an advisory lock (`flock`) so that several
//! processes can append to one file too: a writer that finds the file grown since its last
//! record checks that its last record is still where it wrote it and reads the chain's new end
//! before it writes. A writer opening an existing log continues its chain from the last
//! record, after checking that record's MAC with its key (a log written with another key is
//! refused, not mixed). A last line cut short (a crash in the middle of a write) is closed with
//! a newline and stays in the log as a broken line, which `verify` reports.

mod anchor;
mod key;
mod verify;
mod writer;

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use anchor::Anchor;
pub use key::AuditKey;
pub use verify::{Restart, Verdict, verify, verify_with_anchor};
pub(crate) use writer::Writer;

/// What the first record's `prev` is: 64 zeros.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The suffix every record ends with after its MAC's hex digits.
const MAC_MEMBER: &str = ",\"mac\":\"";

/// Why a log could not be written or checked (not what a check found: see [`Verdict`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuditError {
    /// The key could not be had.
    #[error("{0}")]
    Key(String),
    /// The file could not be opened, read or written.
    #[error("audit log {}: {what}: {cause}", path.display())]
    Io {
        /// The log.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// The operating system's error.
        cause: std::io::Error,
    },
    /// An existing log cannot be continued.
    #[error("audit log {}: {reason}", path.display())]
    Unusable {
        /// The log.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// One record as written, without its MAC.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Record<'a> {
    pub(crate) seq: u64,
    pub(crate) time: &'a str,
    pub(crate) session: &'a str,
    pub(crate) identity: &'a str,
    pub(crate) principal: &'a str,
    pub(crate) method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) target: Option<&'a str>,
    pub(crate) outcome: &'a str,
    pub(crate) duration_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) arguments: Option<&'a Value>,
    pub(crate) prev: &'a str,
}

/// A restart record as written, without its MAC.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RestartRecord<'a> {
    seq: u64,
    time: &'a str,
    /// Always [`RESTART`].
    event: &'a str,
    reason: &'a str,
    previous_seq: u64,
    previous_mac: &'a str,
    prev: &'a str,
}

/// The `event` of a restart record.
const RESTART: &str = "restart";

/// The members `verify` and the writer read back.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Link {
    seq: u64,
    prev: String,
    #[serde(default)]
    event: Option<String>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    previous_seq: Option<u64>,
    #[serde(default)]
    previous_mac: Option<String>,
}

/// The line of a record whose MAC'd body is `body`: its `mac` member spliced in before the
/// closing `}`, and a line break.
fn line_of(mut body: String, mac: &str) -> String {
    body.pop(); // the closing `}`
    body.push_str(MAC_MEMBER);
    body.push_str(mac);
    body.push_str("\"}\n");
    body
}

/// Splits a record's line into its MAC'd body (closed with `}`) and its MAC.
fn split_line(line: &str) -> Option<(String, &str)> {
    let without = line.strip_suffix("\"}")?;
    let at = without.len().checked_sub(64 + MAC_MEMBER.len())?;
    let (head, tail) = without.split_at_checked(at)?;
    let mac = tail.strip_prefix(MAC_MEMBER)?;
    if !mac.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    Some((format!("{head}}}"), mac))
}

/// The time as RFC 3339 in UTC with milliseconds: `2026-11-30T09:15:02.114Z`.
pub(crate) fn rfc3339(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    let secs = since.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil-from-days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3_600,
        rest / 60 % 60,
        rest % 60,
        since.subsec_millis()
    )
}
