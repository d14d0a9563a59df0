//! The protocol era each server of a project was last seen speaking, for `describe project` and
//! the admin API: where the proxy records it and how it reads back. Reading never contacts a
//! server; the record is what the last proxy of the project saw when it connected each one.

use std::path::PathBuf;

use mcp_middleware::upstream::{EraRecord, read_era_file};
use mcpctl::store::Store;
use serde_json::{Value, json};

/// `$MCPCTL_HOME/status/PROJECT.eras.json`: an object keyed by server name.
pub(crate) fn era_file(store: &Store, project: &str) -> PathBuf {
    store
        .root()
        .join("status")
        .join(format!("{project}.eras.json"))
}

/// Where the proxy of `project` records server `server`'s era.
pub(crate) fn record_for(store: &Store, project: &str, server: &str) -> EraRecord {
    EraRecord::new(era_file(store, project), server)
}

/// The recorded eras of `servers` (those the project has now), in the project's order, or
/// `None` when none was recorded yet.
pub(crate) fn server_eras(store: &Store, project: &str, servers: &[String]) -> Option<Value> {
    let recorded = read_era_file(&era_file(store, project));
    let eras: Vec<Value> = servers
        .iter()
        .filter_map(|name| {
            let seen = recorded.get(name)?;
            let mut entry = json!({ "name": name });
            for key in ["era", "versions", "bridged", "seenAt", "serverInfo"] {
                if let Some(value) = seen.get(key) {
                    entry[key] = value.clone();
                }
            }
            Some(entry)
        })
        .collect();
    (!eras.is_empty()).then_some(Value::Array(eras))
}

/// One line about one server's era: `stateless (2026-07-28), bridged for 2025-11-25 clients`.
pub(crate) fn describe(seen: &Value) -> String {
    let era = seen.get("era").and_then(Value::as_str).unwrap_or("unknown");
    let versions: Vec<&str> = seen
        .get("versions")
        .and_then(Value::as_array)
        .map(|v| v.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut line = era.to_owned();
    if !versions.is_empty() {
        line.push_str(&format!(" ({})", versions.join(", ")));
    }
    if seen.get("bridged") == Some(&Value::Bool(true)) {
        line.push_str(", bridged for 2025-11-25 clients");
    }
    line
}
