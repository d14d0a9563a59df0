//! Large parts of a model state kept under fields of their own: paginate's and section-split's
//! documents.
//!
//! A state marks an object of documents by naming its member [`DOCUMENTS`] (`"$documents"`).
//! Before a state is written, each document in such an object is replaced by the digest of its
//! JSON (the state's *skeleton* keeps only digests) and written once under a field of its own,
//! `d:{digest}`, beside the session's states: reading a page changes the skeleton's small order
//! map, never rewrites a document, and two replicas that each add a document change different
//! members of the skeleton, which the three-way merge keeps both of. A document is read back
//! (by digest) only by a replica that does not already hold it, and removed from the store once
//! no skeleton refers to it.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// The member name that marks an object of documents in a model's `State` (its members are
/// stored each under a key of its own, see the module docs).
///
/// ```
/// #[derive(serde::Serialize)]
/// struct Pages {
///     #[serde(rename = "$documents")]
///     documents: std::collections::BTreeMap<String, String>,
/// }
/// assert_eq!(mcp_middleware::shared_store::DOCUMENTS, "$documents");
/// ```
pub const DOCUMENTS: &str = "$documents";

/// A state as the store keeps it: the skeleton and the documents it refers to, by digest.
pub(crate) struct Split {
    pub(crate) skeleton: Value,
    /// Each document's JSON, by digest.
    pub(crate) documents: BTreeMap<String, String>,
}

/// Splits `state` into its skeleton and documents.
pub(crate) fn split(state: Value) -> Split {
    let mut documents = BTreeMap::new();
    let skeleton = strip(state, &mut documents);
    Split {
        skeleton,
        documents,
    }
}

fn strip(value: Value, documents: &mut BTreeMap<String, String>) -> Value {
    match value {
        Value::Object(members) => Value::Object(
            members
                .into_iter()
                .map(|(name, member)| match (name == DOCUMENTS, member) {
                    (true, Value::Object(entries)) => {
                        let entries = entries
                            .into_iter()
                            .map(|(key, document)| {
                                let json = document.to_string();
                                let digest = digest(&json);
                                documents.insert(digest.clone(), json);
                                (key, Value::String(digest))
                            })
                            .collect();
                        (name, Value::Object(entries))
                    }
                    (_, member) => (name, strip(member, documents)),
                })
                .collect(),
        ),
        Value::Array(items) => {
            Value::Array(items.into_iter().map(|v| strip(v, documents)).collect())
        }
        other => other,
    }
}

/// Adds the digest of every document `skeleton` refers to to `out`.
pub(crate) fn digests(skeleton: &Value, out: &mut BTreeSet<String>) {
    match skeleton {
        Value::Object(members) => {
            for (name, member) in members {
                match (name == DOCUMENTS, member) {
                    (true, Value::Object(entries)) => {
                        out.extend(
                            entries
                                .values()
                                .filter_map(|v| v.as_str().map(str::to_owned)),
                        );
                    }
                    (_, member) => digests(member, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| digests(v, out)),
        _ => {}
    }
}

/// The state `skeleton` describes, each digest replaced by its document from `documents`. A
/// document that cannot be found (or read) is left out: its entry reads as evicted.
pub(crate) fn join(skeleton: &Value, documents: &BTreeMap<String, String>) -> Value {
    match skeleton {
        Value::Object(members) => Value::Object(
            members
                .iter()
                .map(|(name, member)| match (name == DOCUMENTS, member) {
                    (true, Value::Object(entries)) => {
                        let entries = entries
                            .iter()
                            .filter_map(|(key, digest)| {
                                let json = documents.get(digest.as_str()?)?;
                                let document = serde_json::from_str(json).ok()?;
                                Some((key.clone(), document))
                            })
                            .collect();
                        (name.clone(), Value::Object(entries))
                    }
                    (_, member) => (name.clone(), join(member, documents)),
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| join(v, documents)).collect()),
        other => other.clone(),
    }
}

/// 128 bits of the SHA-256 of `json`, in hex: the same document gets the same field.
fn digest(json: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, json.as_bytes());
    digest.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn documents_leave_the_skeleton_and_come_back() {
        let state = json!({ "tag": 7, "store": {
            "$documents": { "1": { "text": "long" }, "2": { "text": "longer" } },
            "order": { "1": [0, 4], "2": [1, 6] } } });
        let Split {
            skeleton,
            documents,
        } = split(state.clone());
        assert_eq!(documents.len(), 2);
        assert!(!skeleton.to_string().contains("long"), "{skeleton}");
        let mut referred = BTreeSet::new();
        digests(&skeleton, &mut referred);
        assert_eq!(referred, documents.keys().cloned().collect());
        assert_eq!(join(&skeleton, &documents), state);
    }

    #[test]
    fn a_missing_document_reads_as_evicted() {
        let Split { skeleton, .. } = split(json!({ "$documents": { "1": "x" } }));
        assert_eq!(
            join(&skeleton, &BTreeMap::new()),
            json!({ "$documents": {} })
        );
    }
}
