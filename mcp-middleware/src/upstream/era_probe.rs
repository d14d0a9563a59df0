//! Which protocol era an upstream speaks, as the proxy last saw it, and where that is recorded.
//!
//! The proxy learns an upstream's era when it connects it (the reverse bridge's era adapter): a
//! successful `initialize` makes it a handshake (2025-11-25) server, a successful
//! `server/discover` offering 2026-07-28 a stateless one. What it saw is written to an era
//! file ([`EraRecord`]) so that `mcpctl describe project` and the admin API can show it without
//! probing the server again. A restart probes again and overwrites the record.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

/// The protocol era of an upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// `initialize` and a stateful session (2025-11-25 and older).
    Handshake,
    /// Per-request `_meta` envelope, `server/discover` (2026-07-28).
    Stateless,
}

impl Era {
    /// The name written to the era file and shown by `describe`.
    pub fn as_str(self) -> &'static str {
        match self {
            Era::Handshake => "handshake",
            Era::Stateless => "stateless",
        }
    }
}

/// What the proxy saw when it connected an upstream.
#[derive(Debug, Clone, PartialEq)]
pub struct EraSeen {
    /// The upstream's era.
    pub era: Era,
    /// The protocol versions it offered (`supportedVersions`) or negotiated (`protocolVersion`).
    pub versions: Vec<String>,
    /// Whether the proxy translates between the client's era and this upstream's.
    pub bridged: bool,
    /// The upstream's `serverInfo`, if it gave one.
    pub server_info: Option<Value>,
}

/// Where one upstream's era is recorded: a JSON file holding an object keyed by server name,
/// shared by the servers of a project.
///
/// ```
/// use mcp_middleware::upstream::EraRecord;
/// let record = EraRecord::new("/tmp/eras.json", "everything");
/// assert_eq!(record.name(), "everything");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EraRecord {
    path: PathBuf,
    name: String,
}

/// Serialises writers of era files in this process; each write replaces the file atomically.
static WRITING: Mutex<()> = Mutex::new(());

impl EraRecord {
    /// Records server `name`'s era in the file at `path`.
    pub fn new(path: impl Into<PathBuf>, name: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            name: name.into(),
        }
    }

    /// The server's name in the file.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Writes what was seen, keeping the other servers' entries. A failure is logged: the
    /// record is for display, the session does not depend on it.
    pub(crate) fn write(&self, seen: &EraSeen) {
        let _guard = WRITING
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut all = read(&self.path).unwrap_or_default();
        let seen_at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut entry = json!({
            "era": seen.era.as_str(),
            "versions": seen.versions,
            "bridged": seen.bridged,
            "seenAt": seen_at,
        });
        if let Some(info) = &seen.server_info {
            entry["serverInfo"] = info.clone();
        }
        all.insert(self.name.clone(), entry);
        let tmp = self.path.with_extension("tmp-era");
        let written = std::fs::create_dir_all(self.path.parent().unwrap_or(Path::new(".")))
            .and_then(|()| std::fs::write(&tmp, Value::Object(all).to_string()))
            .and_then(|()| std::fs::rename(&tmp, &self.path));
        if let Err(err) = written {
            tracing::warn!(path = %self.path.display(), %err, "could not write the servers' era file");
        }
    }
}

/// The eras recorded in the file at `path`, by server name (empty when there is none).
pub fn read_era_file(path: &Path) -> Map<String, Value> {
    read(path).unwrap_or_default()
}

fn read(path: &Path) -> Option<Map<String, Value>> {
    let text = std::fs::read_to_string(path).ok()?;
    match serde_json::from_str(&text).ok()? {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

/// What a successful `initialize` result says about the upstream.
pub(crate) fn seen_from_initialize(result: &Value) -> EraSeen {
    EraSeen {
        era: Era::Handshake,
        versions: result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .map(|v| vec![v.to_owned()])
            .unwrap_or_default(),
        bridged: false,
        server_info: result.get("serverInfo").cloned(),
    }
}

/// What a successful `server/discover` result says, if it offers 2026-07-28.
pub(crate) fn seen_from_discover(result: &Value, bridged: bool) -> Option<EraSeen> {
    let versions: Vec<String> = result
        .get("supportedVersions")?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect();
    versions
        .iter()
        .any(|v| v == crate::era::STATELESS_VERSION)
        .then(|| EraSeen {
            era: Era::Stateless,
            versions,
            bridged,
            server_info: result
                .pointer("/_meta/io.modelcontextprotocol~1serverInfo")
                .cloned(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_each_server_beside_the_others() {
        let dir = std::env::temp_dir().join(format!("era-probe-{}", std::process::id()));
        let path = dir.join("p.eras.json");
        let discover = json!({"supportedVersions": ["2026-07-28"], "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "m"}}});
        let Some(seen) = seen_from_discover(&discover, true) else {
            panic!("2026-07-28 is offered");
        };
        EraRecord::new(&path, "modern").write(&seen);
        let init = json!({"protocolVersion": "2025-11-25", "serverInfo": {"name": "l"}});
        EraRecord::new(&path, "legacy").write(&seen_from_initialize(&init));
        let all = read_era_file(&path);
        assert_eq!(all["modern"]["era"], "stateless");
        assert_eq!(all["modern"]["bridged"], true);
        assert_eq!(all["modern"]["serverInfo"]["name"], "m");
        assert_eq!(all["legacy"]["era"], "handshake");
        assert_eq!(all["legacy"]["versions"], json!(["2025-11-25"]));
        assert!(seen_from_discover(&json!({"supportedVersions": ["2025-11-25"]}), false).is_none());
        let _ = std::fs::remove_dir_all(dir);
    }
}
