//! Checking a log: the chain line by line, the restarts it records, and (with an anchor)
//! whether records were cut off its end.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use super::{Anchor, AuditError, AuditKey, GENESIS, Link, RESTART, split_line};

/// What checking a log found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// Every record is in place and unchanged (and, with an anchor, the anchor's record is
    /// among them).
    Intact {
        /// How many records the log holds (restart records included).
        records: u64,
        /// The last record's MAC (`None` for an empty log).
        last_mac: Option<String>,
        /// Every point where a writer found the log not as it left it, in order.
        restarts: Vec<Restart>,
    },
    /// The first line that is not where it should be, or not what was written.
    Broken {
        /// Its line number (1-based).
        line: u64,
        /// What is wrong with it, as a sentence.
        reason: String,
    },
    /// The chain is whole, but the log ends before the record the anchor names: records were
    /// cut off its end.
    Truncated {
        /// How many records the log holds.
        records: u64,
        /// The last record's `seq` (0 for an empty log).
        last_seq: u64,
        /// The record that should be there.
        anchor: Anchor,
    },
}

/// A restart record: where a writer found the log truncated, emptied, replaced or rotated,
/// and what the chain's head had been.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restart {
    /// Its line number (1-based).
    pub line: u64,
    /// Its `seq`.
    pub seq: u64,
    /// What the writer found, as it wrote it.
    pub reason: String,
    /// The `seq` of the last record the writer knew of before.
    pub previous_seq: u64,
    /// That record's MAC.
    pub previous_mac: String,
}

/// Checks the log at `path` with `key`: every line a record whose MAC matches and whose `prev`
/// and `seq` follow the line before; restart records are reported, not refused.
///
/// ```
/// use mcp_middleware_models::audit_log::{AuditKey, Verdict, verify};
///
/// let path = std::env::temp_dir().join(format!("audit-doc-{}.log", std::process::id()));
/// std::fs::write(&path, "").unwrap();
/// let verdict = verify(&path, &AuditKey::new("k").unwrap()).unwrap();
/// assert_eq!(verdict, Verdict::Intact { records: 0, last_mac: None, restarts: vec![] });
/// # std::fs::remove_file(&path).unwrap();
/// ```
pub fn verify(path: &Path, key: &AuditKey) -> Result<Verdict, AuditError> {
    check(path, key, None)
}

/// [`verify`], and then that the log holds the record `anchor` names: when it ends before
/// (its last `seq` is lower), [`Verdict::Truncated`]; when it holds another record in its
/// place, [`Verdict::Broken`] at that line (or at the end when no record has its `seq`).
/// Records after the anchor's are accepted (another writer may log to the file without one).
///
/// ```
/// use mcp_middleware_models::audit_log::{Anchor, AuditKey, Verdict, verify_with_anchor};
///
/// let path = std::env::temp_dir().join(format!("audit-anchored-doc-{}.log", std::process::id()));
/// std::fs::write(&path, "").unwrap();
/// let anchor = Anchor { seq: 3, mac: "ab".repeat(32) };
/// let verdict = verify_with_anchor(&path, &AuditKey::new("k").unwrap(), &anchor).unwrap();
/// assert!(matches!(verdict, Verdict::Truncated { records: 0, last_seq: 0, .. }));
/// # std::fs::remove_file(&path).unwrap();
/// ```
pub fn verify_with_anchor(
    path: &Path,
    key: &AuditKey,
    anchor: &Anchor,
) -> Result<Verdict, AuditError> {
    check(path, key, Some(anchor))
}

fn check(path: &Path, key: &AuditKey, anchor: Option<&Anchor>) -> Result<Verdict, AuditError> {
    let io = |what, cause| AuditError::Io {
        path: path.to_owned(),
        what,
        cause,
    };
    let file = File::open(path).map_err(|cause| io("cannot be opened", cause))?;
    let mut reader = BufReader::new(file);
    let mut prev = GENESIS.to_owned();
    let mut last_seq = 0u64;
    let mut line_no = 0u64;
    let mut restarts = Vec::new();
    // Whether the anchor's record was seen, and the line of a record with its `seq` if not.
    let mut anchor_found = false;
    let mut anchor_seq_line = None;
    let mut bytes = Vec::new();
    loop {
        bytes.clear();
        let read = reader
            .read_until(b'\n', &mut bytes)
            .map_err(|cause| io("cannot be read", cause))?;
        if read == 0 {
            break;
        }
        line_no += 1;
        let broken = |reason: String| {
            Ok(Verdict::Broken {
                line: line_no,
                reason,
            })
        };
        if bytes.last() != Some(&b'\n') {
            return broken(format!(
                "line {line_no} is cut short (no line break at the end of the file): a write was interrupted or the file was truncated"
            ));
        }
        bytes.pop();
        let Ok(line) = std::str::from_utf8(&bytes) else {
            return broken(format!("line {line_no} is not UTF-8 text, so not a record"));
        };
        let Some((body, mac)) = split_line(line) else {
            return broken(format!(
                "line {line_no} is not an audit record (it does not end with a `mac` member)"
            ));
        };
        let Ok(link) = serde_json::from_str::<Link>(&body) else {
            return broken(format!(
                "line {line_no} is not an audit record (not a JSON object with `seq` and `prev`)"
            ));
        };
        let expected = last_seq + 1;
        if !key.verifies(body.as_bytes(), mac) {
            let reason = if line_no == 1 {
                "line 1 does not match its MAC: it was altered, or this is not the key the log was written with".to_owned()
            } else {
                format!(
                    "line {line_no} (record {}) does not match its MAC: it was altered, or inserted by someone without the key",
                    link.seq
                )
            };
            return broken(reason);
        }
        if link.prev != prev || link.seq != expected {
            let reason = if link.seq > expected {
                format!(
                    "line {line_no} is record {}, but record {expected} was expected: records were removed or reordered before this line",
                    link.seq
                )
            } else if link.seq < expected {
                format!(
                    "line {line_no} is record {}, but record {expected} was expected: records were reordered or repeated",
                    link.seq
                )
            } else {
                format!(
                    "line {line_no} (record {}) does not follow the line before it (its `prev` is not that line's MAC): the records before it were replaced",
                    link.seq
                )
            };
            return broken(reason);
        }
        if link.event.as_deref() == Some(RESTART) {
            let (Some(previous_seq), Some(previous_mac)) = (link.previous_seq, link.previous_mac)
            else {
                return broken(format!(
                    "line {line_no} is a restart record without `previousSeq` and `previousMac`"
                ));
            };
            restarts.push(Restart {
                line: line_no,
                seq: link.seq,
                reason: link.reason.unwrap_or_default(),
                previous_seq,
                previous_mac,
            });
        }
        if let Some(anchor) = anchor.filter(|anchor| anchor.seq == link.seq) {
            if anchor.mac == mac {
                anchor_found = true;
            } else {
                anchor_seq_line.get_or_insert(line_no);
            }
        }
        prev = mac.to_owned();
        last_seq = link.seq;
    }
    if let Some(anchor) = anchor.filter(|_| !anchor_found) {
        if last_seq < anchor.seq {
            return Ok(Verdict::Truncated {
                records: line_no,
                last_seq,
                anchor: anchor.clone(),
            });
        }
        let reason = match anchor_seq_line {
            Some(line) => format!(
                "line {line} is record {}, but not the record the anchor names (its MAC is {}): the log was replaced",
                anchor.seq, anchor.mac
            ),
            None => format!(
                "no line is the record the anchor names (record {}, MAC {}): the log was replaced",
                anchor.seq, anchor.mac
            ),
        };
        return Ok(Verdict::Broken {
            line: anchor_seq_line.unwrap_or(line_no),
            reason,
        });
    }
    Ok(Verdict::Intact {
        records: line_no,
        last_mac: (line_no > 0).then_some(prev),
        restarts,
    })
}
