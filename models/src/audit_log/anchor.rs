//! The anchor: a small file holding the last record's `seq` and `mac`, so that records cut off
//! the end of a log can be detected.

use std::io::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::AuditError;

/// The record an anchor names: the last one a writer appended (`{"seq":10,"mac":"9a0e…"}`).
///
/// ```
/// use mcp_middleware_models::audit_log::Anchor;
///
/// let path = std::env::temp_dir().join(format!("audit-anchor-doc-{}.json", std::process::id()));
/// std::fs::write(&path, format!(r#"{{"seq":10,"mac":"{}"}}"#, "ab".repeat(32))).unwrap();
/// let anchor = Anchor::read(&path).unwrap();
/// assert_eq!(anchor.seq, 10);
/// std::fs::write(&path, "{}").unwrap();
/// assert!(Anchor::read(&path).unwrap_err().to_string().contains("not an audit anchor"));
/// # std::fs::remove_file(&path).unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Anchor {
    /// The record's `seq`.
    pub seq: u64,
    /// The record's `mac` (64 lower-case hex digits).
    pub mac: String,
}

impl Anchor {
    /// Reads the anchor at `path`.
    pub fn read(path: &Path) -> Result<Self, AuditError> {
        let text = std::fs::read_to_string(path).map_err(|cause| AuditError::Io {
            path: path.to_owned(),
            what: "cannot be read as an audit anchor",
            cause,
        })?;
        let anchor: Anchor = serde_json::from_str(&text).map_err(|err| AuditError::Unusable {
            path: path.to_owned(),
            reason: format!("not an audit anchor (a JSON object with `seq` and `mac`): {err}"),
        })?;
        let hex = |b: u8| matches!(b, b'0'..=b'9' | b'a'..=b'f');
        if anchor.mac.len() != 64 || !anchor.mac.bytes().all(hex) {
            return Err(AuditError::Unusable {
                path: path.to_owned(),
                reason: "not an audit anchor: its `mac` is not 64 lower-case hex digits".into(),
            });
        }
        Ok(anchor)
    }

    /// Replaces the anchor at `path` with this one, atomically: written to a temporary file
    /// beside it (mode 0600) and renamed over it, so a reader sees the old anchor or the new
    /// one, never a part.
    pub(super) fn write(&self, path: &Path) -> Result<(), AuditError> {
        let io = |what, cause| AuditError::Io {
            path: path.to_owned(),
            what,
            cause,
        };
        let mut name = path.file_name().unwrap_or_default().to_owned();
        name.push(format!(".tmp-{}", std::process::id()));
        let temp = path.with_file_name(name);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut line = serde_json::to_string(self).map_err(|err| AuditError::Unusable {
            path: path.to_owned(),
            reason: format!("the anchor could not be written as JSON: {err}"),
        })?;
        line.push('\n');
        let written = options
            .open(&temp)
            .and_then(|mut file| file.write_all(line.as_bytes()))
            .map_err(|cause| io("cannot be written (its temporary file)", cause))
            .and_then(|()| {
                std::fs::rename(&temp, path).map_err(|cause| io("cannot be replaced", cause))
            });
        if written.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        written
    }
}
