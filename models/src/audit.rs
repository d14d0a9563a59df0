//! `audit`: a tamper-evident log of every request, as an observer.

use std::time::SystemTime;

use mcp_middleware::prelude::{Context, Observation};
use mcp_middleware::proxy_model;
use serde_json::Value;

use crate::audit_log::{AuditKey, Record, Writer, rfc3339};

/// Appends one JSON line per request to a log file, each chained to the one before by an
/// HMAC, so that a record changed, removed, inserted or moved is detected
/// (`mcpctl audit verify FILE`).
///
/// Every request a client sends is recorded once it ends, whatever path it took (through the
/// models, pass-through, or refused by a hidden route): the time (RFC 3339, UTC), the session,
/// the identity's subject and its full principal, the method, the tool, prompt or resource URI, the outcome (`ok`,
/// `error`, `rejected` or `cancelled`), the duration in milliseconds and the error message.
/// Arguments only with `logArguments: true`, and even then the value of every member whose
/// name contains `token`, `secret`, `password`, `passwd`, `key`, `auth`, `credential`,
/// `cookie` or `private` is written as `"[redacted]"`. The key is never written anywhere.
///
/// Config: `path` (the log, appended to, created with mode 0600), the key as `keyEnv` (the
/// name of an environment variable holding it), `keyFile` (a file holding it) or `key` (the
/// key itself; it is then stored in plain text wherever the config is), `logArguments`, and
/// `anchorPath` (a file the last record's `seq` and MAC are written to after every record,
/// atomically, so that `mcpctl audit verify FILE --anchor ANCHOR` detects records cut off the
/// log's end; keep it where the log's readers cannot write). A log truncated, emptied, replaced
/// or rotated while the proxy writes it is noticed at the next record: a warning, and a restart
/// record naming the previous head. The record format and the chain are described in
/// `mcp_middleware_models::audit_log`.
///
/// The model only observes, so it never changes or delays an answer: a record is written
/// after the answer went out, with one `write` of a whole line. A log that cannot be written
/// (a missing key, a full disk) loses the record and says so in the proxy's log, at error
/// level, once for each record lost.
#[proxy_model]
pub mod audit {
    use std::path::PathBuf;

    use mcp_middleware::prelude::*;

    /// Where the log goes and how it is keyed.
    #[derive(Debug, Clone, Deserialize, JsonSchema)]
    #[serde(try_from = "Fields")]
    pub struct Config {
        /// The log file.
        pub path: PathBuf,
        /// Where the HMAC key comes from.
        pub key: KeySource,
        /// Whether tool and prompt arguments are recorded (secrets redacted).
        pub log_arguments: bool,
        /// Where the last record's `seq` and MAC are kept, if anywhere.
        pub anchor_path: Option<PathBuf>,
    }

    /// Where the HMAC key comes from.
    #[derive(Clone, JsonSchema)]
    pub enum KeySource {
        /// The key itself.
        Inline(String),
        /// An environment variable that holds it.
        Env(String),
        /// A file that holds it (trailing line breaks dropped).
        File(PathBuf),
    }

    impl std::fmt::Debug for KeySource {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            match self {
                KeySource::Inline(_) => f.write_str("Inline([redacted])"),
                KeySource::Env(name) => write!(f, "Env({name:?})"),
                KeySource::File(path) => write!(f, "File({path:?})"),
            }
        }
    }

    /// The config as written.
    #[derive(Debug, Default, Deserialize, JsonSchema)]
    #[serde(default, rename_all = "camelCase", deny_unknown_fields)]
    pub struct Fields {
        /// The log file (required).
        pub path: Option<PathBuf>,
        /// The HMAC key itself.
        pub key: Option<String>,
        /// The name of an environment variable holding the HMAC key.
        pub key_env: Option<String>,
        /// A file holding the HMAC key.
        pub key_file: Option<PathBuf>,
        /// Whether arguments are recorded (default false).
        pub log_arguments: bool,
        /// A file holding the last record's `seq` and MAC, rewritten after every record.
        pub anchor_path: Option<PathBuf>,
    }

    impl TryFrom<Fields> for Config {
        type Error = String;

        fn try_from(fields: Fields) -> Result<Self, String> {
            let path = match fields.path {
                Some(path) if !path.as_os_str().is_empty() => path,
                _ => {
                    return Err(
                        "`path` is required: the file the audit records are appended to".to_owned(),
                    );
                }
            };
            let key = match (fields.key, fields.key_env, fields.key_file) {
                (Some(key), None, None) if !key.is_empty() => KeySource::Inline(key),
                (None, Some(name), None) if !name.is_empty() => KeySource::Env(name),
                (None, None, Some(file)) => KeySource::File(file),
                (None, None, None) => {
                    return Err(
                        "the HMAC key is required: set `keyEnv` (an environment variable's name), `keyFile` or `key`"
                            .to_owned(),
                    );
                }
                (Some(_), None, None) | (None, Some(_), None) => {
                    return Err("`key` and `keyEnv` must not be empty".to_owned());
                }
                _ => {
                    return Err("set only one of `key`, `keyEnv` and `keyFile`".to_owned());
                }
            };
            let anchor_path = match fields.anchor_path {
                Some(anchor) if anchor.as_os_str().is_empty() => {
                    return Err("`anchorPath` must not be empty".to_owned());
                }
                Some(anchor) if anchor == path => {
                    return Err(
                        "`anchorPath` must be another file than the log's `path`".to_owned()
                    );
                }
                anchor => anchor,
            };
            Ok(Config {
                path,
                key,
                log_arguments: fields.log_arguments,
                anchor_path,
            })
        }
    }

    /// Writes the request's record.
    #[observer]
    pub fn record(ctx: &Context, observation: &Observation) {
        super::record(ctx, observation);
    }
}

/// Member names whose values are never recorded.
const SECRET_WORDS: [&str; 9] = [
    "token",
    "secret",
    "password",
    "passwd",
    "key",
    "auth",
    "credential",
    "cookie",
    "private",
];

/// `value` with the value of every member named like a secret replaced, at any depth.
fn redacted(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(name, value)| {
                    let lower = name.to_lowercase();
                    let value = if SECRET_WORDS.iter().any(|word| lower.contains(word)) {
                        Value::String("[redacted]".to_owned())
                    } else {
                        redacted(value)
                    };
                    (name.clone(), value)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(redacted).collect()),
        other => other.clone(),
    }
}

fn key_of(source: &audit::KeySource) -> Result<AuditKey, crate::audit_log::AuditError> {
    match source {
        audit::KeySource::Inline(key) => AuditKey::new(key),
        audit::KeySource::Env(name) => AuditKey::from_env(name),
        audit::KeySource::File(path) => AuditKey::from_file(path),
    }
}

fn record(ctx: &Context, observation: &Observation) {
    let Ok(config) = ctx.config::<audit::Config>() else {
        tracing::error!("audit: the model's config is missing; the record is lost");
        return;
    };
    let written = key_of(&config.key).and_then(|key| {
        let writer = Writer::shared(&config.path, &key, config.anchor_path.as_deref())?;
        let time = rfc3339(SystemTime::now());
        let arguments = if config.log_arguments {
            observation.arguments.as_ref().map(redacted)
        } else {
            None
        };
        let principal = ctx.identity().principal();
        let duration_ms = (observation.duration.as_secs_f64() * 1_000_000.0).round() / 1_000.0;
        let mut writer = writer.lock().unwrap_or_else(|p| p.into_inner());
        writer.append(&key, |seq, prev| {
            serde_json::to_string(&Record {
                seq,
                time: &time,
                session: ctx.session_id(),
                identity: ctx.identity().subject(),
                principal: &principal,
                method: &observation.method,
                target: observation.target.as_deref(),
                outcome: observation.outcome.as_str(),
                duration_ms,
                error: observation.error.as_deref(),
                arguments: arguments.as_ref(),
                prev,
            })
        })
    });
    if let Err(err) = written {
        tracing::error!(
            method = %observation.method,
            "audit: a record was lost: {err}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_are_redacted_at_any_depth() {
        let arguments = json!({
            "query": "x",
            "apiKey": "k",
            "nested": {"Authorization": "Bearer t", "list": [{"password": "p", "ok": 1}]},
            "access_token": "t",
        });
        assert_eq!(
            redacted(&arguments),
            json!({
                "query": "x",
                "apiKey": "[redacted]",
                "nested": {"Authorization": "[redacted]", "list": [{"password": "[redacted]", "ok": 1}]},
                "access_token": "[redacted]",
            })
        );
    }

    #[test]
    fn config_needs_a_path_and_exactly_one_key() {
        let load = |value: Value| serde_json::from_value::<audit::Config>(value);
        assert!(load(json!({"path": "a.log", "keyEnv": "K"})).is_ok());
        let err = |value| load(value).unwrap_err().to_string();
        assert!(err(json!({"keyEnv": "K"})).contains("`path` is required"));
        assert!(err(json!({"path": "a.log"})).contains("key is required"));
        assert!(err(json!({"path": "a.log", "key": "k", "keyEnv": "K"})).contains("only one"));
        assert!(err(json!({"path": "a.log", "keyEnv": "K", "colour": 1})).contains("colour"));
        assert!(
            err(json!({"path": "a.log", "keyEnv": "K", "anchorPath": "a.log"}))
                .contains("another file")
        );
        let anchored = load(json!({"path": "a.log", "keyEnv": "K", "anchorPath": "a.anchor"}));
        assert_eq!(
            anchored.unwrap().anchor_path.as_deref(),
            Some(std::path::Path::new("a.anchor"))
        );
        let config = load(json!({"path": "a.log", "key": "hunter2"})).unwrap();
        assert!(!format!("{config:?}").contains("hunter2"));
    }
}
