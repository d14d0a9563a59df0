//! Appending to a log: one writer per file per process, the chain's head kept in memory and
//! checked against the file before every record, restart records when the file is not as the
//! writer left it, and the anchor rewritten after every record.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use super::{
    Anchor, AuditError, AuditKey, GENESIS, Link, RESTART, RestartRecord, line_of, rfc3339,
    split_line,
};

/// The writer of one log file, shared by every session of the process.
pub(crate) struct Writer {
    path: PathBuf,
    file: File,
    key: AuditKey,
    anchor: Option<PathBuf>,
    /// The next record's `seq` and `prev` (so the chain's head is record `seq - 1`, MAC `prev`).
    seq: u64,
    prev: String,
    /// Where the head record's line ends in the file (0: the file holds no record).
    head_end: u64,
    /// The file's length and modification time when this writer last wrote or read it: when
    /// either differs, someone else touched the file, and the chain's end is read again.
    len: u64,
    modified: Option<SystemTime>,
    /// A restart found before the next record could be written (a rotated log, or an anchor
    /// ahead of the log at start): written before that record.
    pending: Option<Found>,
}

/// A restart: why, and the head the writer had before.
struct Found {
    reason: String,
    previous_seq: u64,
    previous_mac: String,
}

impl Writer {
    /// The writer of the log at `path` for this process: opened (created 0600) on first use,
    /// with its anchor file when there is one.
    pub(crate) fn shared(
        path: &Path,
        key: &AuditKey,
        anchor: Option<&Path>,
    ) -> Result<Arc<Mutex<Writer>>, AuditError> {
        static WRITERS: OnceLock<Mutex<HashMap<PathBuf, Arc<Mutex<Writer>>>>> = OnceLock::new();
        let writers = WRITERS.get_or_init(Default::default);
        let mut writers = writers.lock().unwrap_or_else(|p| p.into_inner());
        let found = match writers.get(path) {
            Some(writer) => writer.clone(),
            None => {
                let writer = Writer::open(path, key, anchor)?;
                if let Some(found) = &writer.pending {
                    writer.warn(found);
                }
                let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
                // The same file by another spelling shares the writer.
                match writers.get(&canonical).cloned() {
                    Some(writer) => {
                        writers.insert(path.to_owned(), writer.clone());
                        writer
                    }
                    None => {
                        let writer = Arc::new(Mutex::new(writer));
                        writers.insert(canonical, writer.clone());
                        writers.insert(path.to_owned(), writer.clone());
                        writer
                    }
                }
            }
        };
        let same_anchor = found
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .anchor
            .as_deref()
            == anchor;
        if !same_anchor {
            return Err(AuditError::Unusable {
                path: path.to_owned(),
                reason: "another model in this process writes this log with a different anchor"
                    .to_owned(),
            });
        }
        Ok(found)
    }

    pub(super) fn open(
        path: &Path,
        key: &AuditKey,
        anchor: Option<&Path>,
    ) -> Result<Self, AuditError> {
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
            anchor: anchor.map(Path::to_owned),
            seq: 1,
            prev: GENESIS.to_owned(),
            head_end: 0,
            len: 0,
            modified: None,
            pending: None,
        };
        writer.with_lock(Writer::read_head)?;
        writer.pending = writer.behind_anchor()?;
        Ok(writer)
    }

    /// Appends one record: `record` is called with the `seq` and `prev` to write it with.
    /// A restart record goes first when the log is not as this writer left it.
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
            // Renamed, removed or replaced: the file now at the path continues its own chain
            // (or starts one), after a record naming the head this writer had.
            let previous = self.head();
            let anchor = self.anchor.clone();
            *self = Writer::open(&self.path, key, anchor.as_deref())?;
            if let Some((previous_seq, previous_mac)) = previous {
                let found = Found {
                    reason: "the log was replaced, removed or rotated while this proxy wrote it (the file at its path is not the one written)".to_owned(),
                    previous_seq,
                    previous_mac,
                };
                self.warn(&found);
                self.pending = Some(found);
            }
        }
        self.with_lock(|writer| {
            let previous = writer.head();
            if let (Some(reason), Some((previous_seq, previous_mac))) = (writer.resync()?, previous)
            {
                let found = Found {
                    reason,
                    previous_seq,
                    previous_mac,
                };
                writer.warn(&found);
                writer.pending = Some(found);
            }
            if let Some(found) = writer.pending.take() {
                let time = rfc3339(SystemTime::now());
                writer.write(|seq, prev| {
                    serde_json::to_string(&RestartRecord {
                        seq,
                        time: &time,
                        event: RESTART,
                        reason: &found.reason,
                        previous_seq: found.previous_seq,
                        previous_mac: &found.previous_mac,
                        prev,
                    })
                })?;
            }
            writer.write(record)?;
            writer.update_anchor();
            Ok(())
        })
    }

    /// The chain's head: the last record's `seq` and MAC, if there is one.
    fn head(&self) -> Option<(u64, String)> {
        (self.seq > 1).then(|| (self.seq - 1, self.prev.clone()))
    }

    fn warn(&self, found: &Found) {
        tracing::warn!(
            log = %self.path.display(),
            previous_seq = found.previous_seq,
            previous_mac = %found.previous_mac,
            "audit: {}; the chain restarts with a record naming the previous head",
            found.reason
        );
    }

    /// Writes one record's line and makes it the head.
    fn write(
        &mut self,
        record: impl FnOnce(u64, &str) -> Result<String, serde_json::Error>,
    ) -> Result<(), AuditError> {
        let body = record(self.seq, &self.prev).map_err(|err| AuditError::Unusable {
            path: self.path.clone(),
            reason: format!("a record could not be written as JSON: {err}"),
        })?;
        let mac = self.key.mac(body.as_bytes());
        self.file
            .write_all(line_of(body, &mac).as_bytes())
            .map_err(|cause| self.io("cannot be written", cause))?;
        self.seq += 1;
        self.prev = mac;
        self.stat()?;
        self.head_end = self.len;
        Ok(())
    }

    /// Records the head in the anchor file. A failure loses no record, so it is logged, not
    /// returned.
    fn update_anchor(&self) {
        let (Some(path), Some((seq, mac))) = (&self.anchor, self.head()) else {
            return;
        };
        if let Err(err) = (Anchor { seq, mac }).write(path) {
            tracing::error!(log = %self.path.display(), "audit: the anchor was not updated: {err}");
        }
    }

    /// At start: a restart when the anchor names a record past the log's end (or another record
    /// in the head's place), so records were cut off while no writer ran. A log further on than
    /// its anchor is accepted: another writer may log to it without one.
    fn behind_anchor(&self) -> Result<Option<Found>, AuditError> {
        let Some(path) = self.anchor.as_deref().filter(|path| path.exists()) else {
            return Ok(None);
        };
        let anchor = Anchor::read(path)?;
        let (seq, mac) = self.head().unwrap_or((0, GENESIS.to_owned()));
        let behind = seq < anchor.seq || (seq == anchor.seq && mac != anchor.mac);
        Ok(behind.then(|| Found {
            reason: format!(
                "the log ends at record {seq}, not at the record its anchor {} names (record {}): it was truncated or replaced while no writer ran",
                path.display(),
                anchor.seq
            ),
            previous_seq: anchor.seq,
            previous_mac: anchor.mac,
        }))
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

    fn unusable(&self, reason: String) -> AuditError {
        AuditError::Unusable {
            path: self.path.clone(),
            reason,
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

    /// The file's length and modification time now, remembered.
    fn stat(&mut self) -> Result<(u64, Option<SystemTime>), AuditError> {
        let metadata = self
            .file
            .metadata()
            .map_err(|cause| self.io("cannot be examined", cause))?;
        self.len = metadata.len();
        self.modified = metadata.modified().ok();
        Ok((self.len, self.modified))
    }

    /// If the file is not as this writer left it, reads the chain's end from it again, and says
    /// why the chain restarts when the file does not continue this writer's chain: shorter than
    /// it was (truncated or emptied), or its head record no longer where it was written
    /// (replaced in place). Grown past the head is another process's records, not a restart.
    fn resync(&mut self) -> Result<Option<String>, AuditError> {
        let (before, modified) = (self.len, self.modified);
        let metadata = self
            .file
            .metadata()
            .map_err(|cause| self.io("cannot be examined", cause))?;
        let len = metadata.len();
        if len == before && metadata.modified().ok() == modified {
            return Ok(None);
        }
        let reason = if len == 0 && before > 0 {
            Some("the log was emptied while this proxy wrote it".to_owned())
        } else if len < before {
            Some(format!(
                "the log was truncated while this proxy wrote it ({len} bytes, down from {before})"
            ))
        } else if !self.head_in_place()? {
            Some("the log was replaced while this proxy wrote it (its last record is no longer where it was written)".to_owned())
        } else {
            None
        };
        self.read_head()?;
        Ok(reason)
    }

    /// Whether the line ending at `head_end` is still the head record.
    fn head_in_place(&mut self) -> Result<bool, AuditError> {
        if self.head_end == 0 {
            return Ok(true);
        }
        let tail = self.read_tail(self.head_end)?;
        let Some(line) = tail.strip_suffix(b"\n") else {
            return Ok(false);
        };
        let last = line.rsplit(|b| *b == b'\n').next().unwrap_or_default();
        Ok(std::str::from_utf8(last)
            .ok()
            .and_then(split_line)
            .is_some_and(|(_, mac)| mac == self.prev))
    }

    /// Reads the chain's end from the file: the last complete line must be a record under this
    /// writer's key (or the file empty). A last line cut short is closed with a line break.
    fn read_head(&mut self) -> Result<(), AuditError> {
        let (len, _) = self.stat()?;
        let tail = self.read_tail(len)?;
        let tail_start = len - tail.len() as u64;
        // The complete lines (up to the last line break); anything after it was cut short.
        let complete = match tail.iter().rposition(|b| *b == b'\n') {
            Some(end) => &tail[..end],
            None => &[][..],
        };
        let head_end = tail_start + complete.len() as u64 + 1;
        if tail.last().is_some_and(|b| *b != b'\n') {
            // Close the cut line, so the next record starts a line of its own.
            self.file
                .write_all(b"\n")
                .map_err(|cause| self.io("cannot be written", cause))?;
        }
        if complete.is_empty() && !tail.starts_with(b"\n") {
            self.seq = 1;
            self.prev = GENESIS.to_owned();
            self.head_end = 0;
        } else {
            let last = complete.rsplit(|b| *b == b'\n').next().unwrap_or_default();
            let not_a_record = || self.unusable("its last line is not an audit record".into());
            let line = std::str::from_utf8(last).map_err(|_| not_a_record())?;
            let (body, mac) = split_line(line).ok_or_else(not_a_record)?;
            let link = serde_json::from_str::<Link>(&body).map_err(|_| not_a_record())?;
            if !self.key.verifies(body.as_bytes(), mac) {
                return Err(self.unusable(
                    "its last record does not match its MAC under this key (written with another key, or altered); use that key or another file".into(),
                ));
            }
            self.seq = link.seq + 1;
            self.prev = mac.to_owned();
            self.head_end = head_end;
        }
        self.stat()?;
        Ok(())
    }

    /// The end of the file up to `len`, back to the start of its last complete line (and any
    /// line cut short after it).
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
