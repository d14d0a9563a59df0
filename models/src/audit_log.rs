//! The tamper-evident log the [`audit`](crate::audit) model writes, and its verification
//! (`mcpctl audit verify`).
//!
//! **Format.** One JSON object per line (a record), members in this order: `seq` (1, 2, ...),
//! `time` (RFC 3339, UTC, milliseconds), `session`, `identity`, `method`, `target` (the tool,
//! prompt or resource URI, when there is one), `outcome` (`ok`, `error`, `rejected` or
//! `cancelled`), `durationMs`, `error` (its message, when there is one), `arguments` (only when
//! configured, secrets redacted), `prev` and `mac`:
//!
//! ```text
//! {"seq":1,"time":"2026-11-30T09:15:02.114Z","session":"4242-1","identity":"alice","method":"tools/call","target":"echo","outcome":"ok","durationMs":1.82,"prev":"0000…0000","mac":"5f1c…"}
//! ```
//!
//! **The chain.** `mac` is HMAC-SHA256, under the log's key, of the record's line without its
//! `mac` member (the exact bytes: the line up to `,"mac":`, closed with `}`), written as 64
//! lower-case hex digits. `prev` is the previous record's `mac`; the first record's is
//! [`GENESIS`]. So a record changed, inserted, removed or moved breaks the chain at that line,
//! and only a holder of the key could write a record that fits. What a chain cannot show is
//! records cut off the end: compare the last `seq` and `mac` ([`Verdict::Intact`]) with a
//! copy kept elsewhere to detect that.
//!
//! **Writing.** Every session of a process that logs to one file shares one writer (a
//! process-wide lock per file); each record is one `write` of a whole line to a file opened
//! with `O_APPEND` (created with mode 0600), under an advisory lock (`flock`) so that several
//! processes can append to one file too: a writer that finds the file grown since its last
//! record reads the last record again before it writes. A writer opening an existing log
//! continues its chain from the last record, after checking that record's MAC with its key (a
//! log written with another key is refused, not mixed). A last line cut short (a crash in the
//! middle of a write) is closed with a newline and stays in the log as a broken line, which
//! `verify` reports. A log rotated away (renamed or removed) is noticed at the next record,
//! which starts a new file and a new chain at that path; a log truncated in place starts a new
//! chain in it.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// What the first record's `prev` is: 64 zeros.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The suffix every record ends with after its MAC's hex digits.
const MAC_MEMBER: &str = ",\"mac\":\"";

/// An audit log's HMAC key. Its bytes are never shown (`Debug` prints its length only).
///
/// ```
/// use mcp_middleware_models::audit_log::AuditKey;
///
/// let key = AuditKey::new("correct horse battery staple").unwrap();
/// assert_eq!(format!("{key:?}"), "AuditKey(28 bytes)");
/// assert!(AuditKey::new("").is_err());
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct AuditKey(Vec<u8>);

impl std::fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AuditKey({} bytes)", self.0.len())
    }
}

impl AuditKey {
    /// A key of these bytes (a string's UTF-8 bytes); empty is refused.
    pub fn new(bytes: impl AsRef<[u8]>) -> Result<Self, AuditError> {
        let bytes = bytes.as_ref();
        if bytes.is_empty() {
            return Err(AuditError::Key("the key is empty".to_owned()));
        }
        Ok(Self(bytes.to_vec()))
    }

    /// The value of the environment variable `name`.
    pub fn from_env(name: &str) -> Result<Self, AuditError> {
        match std::env::var_os(name) {
            Some(value) if !value.is_empty() => Ok(Self(value.into_encoded_bytes())),
            Some(_) => Err(AuditError::Key(format!(
                "the environment variable `{name}` that holds the audit key is empty"
            ))),
            None => Err(AuditError::Key(format!(
                "the environment variable `{name}` that holds the audit key is not set"
            ))),
        }
    }

    /// The contents of the file at `path`, without trailing line breaks.
    pub fn from_file(path: &Path) -> Result<Self, AuditError> {
        let mut bytes = std::fs::read(path).map_err(|cause| {
            AuditError::Key(format!(
                "the audit key file {} cannot be read: {cause}",
                path.display()
            ))
        })?;
        while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            bytes.pop();
        }
        if bytes.is_empty() {
            return Err(AuditError::Key(format!(
                "the audit key file {} is empty",
                path.display()
            )));
        }
        Ok(Self(bytes))
    }

    /// HMAC-SHA256 of `message` under this key (RFC 2104), as lower-case hex.
    fn mac(&self, message: &[u8]) -> String {
        const BLOCK: usize = 64;
        let mut block = [0u8; BLOCK];
        if self.0.len() > BLOCK {
            block[..32].copy_from_slice(&Sha256::digest(&self.0));
        } else {
            block[..self.0.len()].copy_from_slice(&self.0);
        }
        let pad = |byte: u8| block.map(|b| b ^ byte);
        let inner = Sha256::new()
            .chain_update(pad(0x36))
            .chain_update(message)
            .finalize();
        let outer = Sha256::new()
            .chain_update(pad(0x5c))
            .chain_update(inner)
            .finalize();
        hex(&outer)
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

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

/// What checking a log found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// Every record is in place and unchanged.
    Intact {
        /// How many records the log holds.
        records: u64,
        /// The last record's MAC (`None` for an empty log): keep it elsewhere to detect records
        /// cut off the end later.
        last_mac: Option<String>,
    },
    /// The first line that is not where it should be, or not what was written.
    Broken {
        /// Its line number (1-based).
        line: u64,
        /// What is wrong with it, as a sentence.
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

/// The members `verify` reads back.
#[derive(Deserialize)]
struct Link {
    seq: u64,
    prev: String,
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

/// Checks the log at `path` with `key`: every line a record whose MAC matches and whose `prev`
/// and `seq` follow the line before.
///
/// ```
/// use mcp_middleware_models::audit_log::{AuditKey, Verdict, verify};
///
/// let path = std::env::temp_dir().join(format!("audit-doc-{}.log", std::process::id()));
/// std::fs::write(&path, "").unwrap();
/// let verdict = verify(&path, &AuditKey::new("k").unwrap()).unwrap();
/// assert_eq!(verdict, Verdict::Intact { records: 0, last_mac: None });
/// # std::fs::remove_file(&path).unwrap();
/// ```
pub fn verify(path: &Path, key: &AuditKey) -> Result<Verdict, AuditError> {
    let io = |what, cause| AuditError::Io {
        path: path.to_owned(),
        what,
        cause,
    };
    let file = File::open(path).map_err(|cause| io("cannot be opened", cause))?;
    let mut reader = BufReader::new(file);
    let mut prev = GENESIS.to_owned();
    let mut line_no = 0u64;
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
        let expected = line_no;
        if key.mac(body.as_bytes()) != mac {
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
        prev = mac.to_owned();
    }
    Ok(Verdict::Intact {
        records: line_no,
        last_mac: (line_no > 0).then_some(prev),
    })
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

/// The writer of one log file, shared by every session of the process.
pub(crate) struct Writer {
    path: PathBuf,
    file: File,
    key: AuditKey,
    /// The next record's `seq` and `prev`.
    seq: u64,
    prev: String,
    /// The file's length after this writer's last record: if it differs, another process
    /// wrote, and the chain is read again.
    len: u64,
}

impl Writer {
    /// The writer of the log at `path` for this process: opened (created 0600) on first use.
    pub(crate) fn shared(path: &Path, key: &AuditKey) -> Result<Arc<Mutex<Writer>>, AuditError> {
        static WRITERS: OnceLock<Mutex<HashMap<PathBuf, Arc<Mutex<Writer>>>>> = OnceLock::new();
        let writers = WRITERS.get_or_init(Default::default);
        let mut writers = writers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(writer) = writers.get(path) {
            return Ok(writer.clone());
        }
        let writer = Writer::open(path, key)?;
        let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
        // The same file by another spelling shares the writer.
        if let Some(writer) = writers.get(&canonical).cloned() {
            writers.insert(path.to_owned(), writer.clone());
            return Ok(writer);
        }
        let writer = Arc::new(Mutex::new(writer));
        writers.insert(canonical, writer.clone());
        writers.insert(path.to_owned(), writer.clone());
        Ok(writer)
    }

    fn open(path: &Path, key: &AuditKey) -> Result<Self, AuditError> {
        let mut options = OpenOptions::new();
        options.create(true).append(true).read(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options.open(path).map_err(|cause| AuditError::Io {
            path: path.to_owned(),
            what: "cannot be opened for appending",
            cause,
        })?;
        let mut writer = Writer {
            path: path.to_owned(),
            file,
            key: key.clone(),
            seq: 1,
            prev: GENESIS.to_owned(),
            len: u64::MAX,
        };
        writer.with_lock(Writer::resync)?;
        Ok(writer)
    }

    /// Appends one record: `record` is called with the `seq` and `prev` to write it with.
    pub(crate) fn append(
        &mut self,
        key: &AuditKey,
        record: impl FnOnce(u64, &str) -> Result<String, serde_json::Error>,
    ) -> Result<(), AuditError> {
        if *key != self.key {
            return Err(AuditError::Unusable {
                path: self.path.clone(),
                reason: "another model in this process writes this log with a different key"
                    .to_owned(),
            });
        }
        if self.moved() {
            // Rotated (renamed or removed): the file at the path starts a chain of its own.
            *self = Writer::open(&self.path, key)?;
        }
        self.with_lock(|writer| {
            writer.resync()?;
            let body = record(writer.seq, &writer.prev).map_err(|err| AuditError::Unusable {
                path: writer.path.clone(),
                reason: format!("a record could not be written as JSON: {err}"),
            })?;
            let mac = writer.key.mac(body.as_bytes());
            let mut line = body;
            line.pop(); // the closing `}`
            line.push_str(MAC_MEMBER);
            line.push_str(&mac);
            line.push_str("\"}\n");
            writer
                .file
                .write_all(line.as_bytes())
                .map_err(|cause| writer.io("cannot be written", cause))?;
            writer.seq += 1;
            writer.prev = mac;
            writer.len = writer.file.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
            Ok(())
        })
    }

    /// Whether the path no longer names the file this writer has open (a log rotated away).
    #[cfg(unix)]
    fn moved(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(&self.path), self.file.metadata()) {
            (Ok(at_path), Ok(open)) => at_path.dev() != open.dev() || at_path.ino() != open.ino(),
            (Err(_), _) => true,
            _ => false,
        }
    }

    #[cfg(not(unix))]
    fn moved(&self) -> bool {
        false
    }

    fn io(&self, what: &'static str, cause: std::io::Error) -> AuditError {
        AuditError::Io {
            path: self.path.clone(),
            what,
            cause,
        }
    }

    /// Runs `f` holding the file's advisory lock, so other processes' writers wait.
    fn with_lock<R>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<R, AuditError>,
    ) -> Result<R, AuditError> {
        self.file
            .lock()
            .map_err(|cause| self.io("cannot be locked", cause))?;
        let result = f(self);
        let _ = self.file.unlock();
        result
    }

    /// If the file is not as this writer left it, reads the chain's end from it again.
    fn resync(&mut self) -> Result<(), AuditError> {
        let len = self
            .file
            .metadata()
            .map_err(|cause| self.io("cannot be examined", cause))?
            .len();
        if len == self.len {
            return Ok(());
        }
        let tail = self.read_tail(len)?;
        // The complete lines (up to the last line break); anything after it was cut short.
        let complete = match tail.iter().rposition(|b| *b == b'\n') {
            Some(end) => &tail[..end],
            None => &[][..],
        };
        if tail.last().is_some_and(|b| *b != b'\n') {
            // Close the cut line, so the next record starts a line of its own.
            self.file
                .write_all(b"\n")
                .map_err(|cause| self.io("cannot be written", cause))?;
        }
        if complete.is_empty() && !tail.starts_with(b"\n") {
            self.seq = 1;
            self.prev = GENESIS.to_owned();
        } else {
            let last = complete.rsplit(|b| *b == b'\n').next().unwrap_or_default();
            let not_a_record = || self.unusable("its last line is not an audit record".into());
            let line = std::str::from_utf8(last).map_err(|_| not_a_record())?;
            let (body, mac) = split_line(line).ok_or_else(not_a_record)?;
            let link = serde_json::from_str::<Link>(&body).map_err(|_| not_a_record())?;
            if self.key.mac(body.as_bytes()) != mac {
                return Err(self.unusable(
                    "its last record does not match its MAC under this key (written with another key, or altered); use that key or another file".into(),
                ));
            }
            self.seq = link.seq + 1;
            self.prev = mac.to_owned();
        }
        self.len = self
            .file
            .metadata()
            .map_err(|cause| self.io("cannot be examined", cause))?
            .len();
        Ok(())
    }

    fn unusable(&self, reason: String) -> AuditError {
        AuditError::Unusable {
            path: self.path.clone(),
            reason,
        }
    }

    /// The end of the file, back to the start of its last complete line (and any line cut
    /// short after it).
    fn read_tail(&mut self, len: u64) -> Result<Vec<u8>, AuditError> {
        const CHUNK: u64 = 8 * 1024;
        let mut tail = Vec::new();
        let mut start = len;
        while start > 0 {
            let from = start.saturating_sub(CHUNK);
            let mut chunk = vec![0; (start - from) as usize];
            self.file
                .seek(SeekFrom::Start(from))
                .and_then(|_| self.file.read_exact(&mut chunk))
                .map_err(|cause| self.io("cannot be read", cause))?;
            chunk.extend_from_slice(&tail);
            tail = chunk;
            start = from;
            // Enough once the last complete line is preceded by a line break.
            if tail.iter().filter(|b| **b == b'\n').count() >= 2 {
                break;
            }
        }
        Ok(tail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_sha256_matches_rfc_4231() {
        // Test case 2.
        let key = AuditKey::new("Jefe").unwrap();
        assert_eq!(
            key.mac(b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // Test case 6: a key longer than the block is hashed first.
        let key = AuditKey::new([0xaa; 131]).unwrap();
        assert_eq!(
            key.mac(b"Test Using Larger Than Block-Size Key - Hash Key First"),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn times_are_rfc_3339_utc() {
        let at = |secs: u64, millis: u64| {
            rfc3339(UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(millis))
        };
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400, 7), "2000-02-29T00:00:00.007Z");
        assert_eq!(at(1_796_000_000, 999), "2026-11-30T00:53:20.999Z");
    }

    fn temp_log(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("audit-log-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        let _ = std::fs::remove_file(&path);
        path
    }

    fn write(path: &Path, key: &AuditKey, methods: &[&str]) {
        let mut writer = Writer::open(path, key).unwrap();
        for method in methods {
            writer
                .append(key, |seq, prev| {
                    serde_json::to_string(&Record {
                        seq,
                        time: "2026-11-30T00:00:00.000Z",
                        session: "s",
                        identity: "alice",
                        method,
                        target: None,
                        outcome: "ok",
                        duration_ms: 0.5,
                        error: None,
                        arguments: None,
                        prev,
                    })
                })
                .unwrap();
        }
    }

    fn lines(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn broken_at(path: &Path, key: &AuditKey) -> (u64, String) {
        match verify(path, key).unwrap() {
            Verdict::Broken { line, reason } => (line, reason),
            intact => panic!("expected a broken log, got {intact:?}"),
        }
    }

    #[test]
    fn the_chain_survives_restarts_and_breaks_where_the_log_was_touched() {
        let key = AuditKey::new("k3y").unwrap();
        let path = temp_log("chain.log");
        write(&path, &key, &["a", "b"]);
        write(&path, &key, &["c", "d", "e"]); // a restart continues the chain
        let Verdict::Intact { records, last_mac } = verify(&path, &key).unwrap() else {
            panic!("intact")
        };
        assert_eq!(records, 5);
        assert!(lines(&path)[4].ends_with(&format!("\"mac\":\"{}\"}}", last_mac.unwrap())));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let original = lines(&path);
        let rewrite = |lines: &[String]| {
            let tampered = temp_log("tampered.log");
            std::fs::write(&tampered, lines.join("\n") + "\n").unwrap();
            tampered
        };

        let mut edited = original.clone();
        edited[2] = edited[2].replace("\"method\":\"c\"", "\"method\":\"x\"");
        let (line, reason) = broken_at(&rewrite(&edited), &key);
        assert_eq!(line, 3);
        assert!(reason.contains("does not match its MAC"), "{reason}");

        let mut removed = original.clone();
        removed.remove(1);
        let (line, reason) = broken_at(&rewrite(&removed), &key);
        assert_eq!(line, 2);
        assert!(
            reason.contains("record 3, but record 2 was expected"),
            "{reason}"
        );

        let mut reordered = original.clone();
        reordered.swap(3, 4);
        let (line, reason) = broken_at(&rewrite(&reordered), &key);
        assert_eq!(line, 4);
        assert!(reason.contains("removed or reordered"), "{reason}");

        let mut repeated = original.clone();
        repeated.insert(3, original[1].clone());
        let (line, reason) = broken_at(&rewrite(&repeated), &key);
        assert_eq!(line, 4);
        assert!(reason.contains("reordered or repeated"), "{reason}");

        let mut first_gone = original.clone();
        first_gone.remove(0);
        assert_eq!(broken_at(&rewrite(&first_gone), &key).0, 1);

        let (line, reason) = broken_at(&path, &AuditKey::new("other").unwrap());
        assert_eq!(line, 1);
        assert!(reason.contains("not the key"), "{reason}");
    }

    #[test]
    fn a_line_cut_short_is_closed_and_reported_and_another_key_is_refused() {
        let key = AuditKey::new("k3y").unwrap();
        let path = temp_log("cut.log");
        write(&path, &key, &["a", "b"]);
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b"{\"seq\":3,\"ti").unwrap();
        assert_eq!(broken_at(&path, &key).0, 3);
        write(&path, &key, &["c"]);
        let all = lines(&path);
        assert_eq!(all.len(), 4);
        assert!(all[3].starts_with("{\"seq\":3,"), "{}", all[3]);
        assert_eq!(broken_at(&path, &key).0, 3);

        let fresh = temp_log("keyed.log");
        write(&fresh, &key, &["a"]);
        let refused = Writer::open(&fresh, &AuditKey::new("other").unwrap())
            .err()
            .unwrap()
            .to_string();
        assert!(refused.contains("another key"), "{refused}");
    }

    #[test]
    fn a_rotated_log_starts_a_new_chain_at_its_path() {
        let key = AuditKey::new("k3y").unwrap();
        let path = temp_log("rotated.log");
        let rotated = temp_log("rotated.log.1");
        let mut writer = Writer::open(&path, &key).unwrap();
        let append = |writer: &mut Writer| {
            writer
                .append(&key, |seq, prev| {
                    Ok(format!(r#"{{"seq":{seq},"prev":"{prev}"}}"#))
                })
                .unwrap()
        };
        append(&mut writer);
        append(&mut writer);
        std::fs::rename(&path, &rotated).unwrap();
        append(&mut writer);
        for (log, records) in [(&rotated, 2), (&path, 1)] {
            match verify(log, &key).unwrap() {
                Verdict::Intact { records: n, .. } => assert_eq!(n, records),
                broken => panic!("{broken:?}"),
            }
        }
        std::fs::write(&path, "").unwrap(); // truncated in place
        append(&mut writer);
        assert_eq!(lines(&path).len(), 1);
        assert!(matches!(
            verify(&path, &key).unwrap(),
            Verdict::Intact { records: 1, .. }
        ));
    }

    #[test]
    fn lines_split_into_body_and_mac() {
        let mac = "ab".repeat(32);
        let line = format!(r#"{{"seq":1,"prev":"{GENESIS}","mac":"{mac}"}}"#);
        let (body, found) = split_line(&line).unwrap();
        assert_eq!(body, format!(r#"{{"seq":1,"prev":"{GENESIS}"}}"#));
        assert_eq!(found, mac);
        assert!(split_line(r#"{"seq":1}"#).is_none());
        assert!(split_line(&line.replace("ab", "AB")).is_none());
    }
}
