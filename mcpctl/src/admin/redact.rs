//! What the admin API hides in the documents it returns: a token for the admin API is not
//! meant to be a key to everything the project can reach. Secrets show as [`HIDDEN`]; a
//! `${env:VAR}` reference (the way secrets are meant to be written) shows as written, since it
//! names a variable and holds nothing.
//!
//! - a server's `env` and `headers` values, whatever their names (a literal value there is
//!   commonly a credential), its `auth.tokenExchange.clientSecret`, the password in its URL and
//!   query parameters with secret-like names, and arguments after (or `=`-joined to) a
//!   secret-like flag (`--token X`, `--api-key=X`);
//! - in a project, any string under a secret-like key, wherever it is (its model `config`
//!   included: the audit model's inline `key` is enough to forge a log that verifies), and
//!   `llm.apiKey`.
//!
//! A key is secret-like when its name holds `secret`, `password`, `token`, `key`, `credential`
//! and the like, and does not end in `file`, `path`, `env`, `url`, `uri`, `id`, `name`,
//! `endpoint` and the like (a path, a variable's name or an address is not the secret itself).
//! Inside a secret-like key's object every string is hidden but those under such names.

use serde_json::Value;

/// What a secret shows as.
pub(crate) const HIDDEN: &str = "***";

/// Words that make a key secret-like (compared lowercase, without `_` and `-`).
const SECRET_WORDS: &[&str] = &[
    "secret",
    "password",
    "passwd",
    "passphrase",
    "credential",
    "token",
    "key",
    "cookie",
    "authorization",
    "bearer",
    "signature",
    "hmac",
    "salt",
];

/// Endings that make a key name something other than a secret: where the secret is, or what
/// it is for (`keyFile`, `clientId`, `tokenEndpoint`).
const NOT_SECRET_ENDINGS: &[&str] = &[
    "file", "path", "env", "url", "uri", "id", "name", "claim", "dir", "endpoint", "audience",
    "scope", "resource", "issuer",
];

/// `name` lowercase, without `_`, `-` and other punctuation.
fn normalised(name: &str) -> String {
    name.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// Whether a key named `name` names something other than a secret (see
/// [`NOT_SECRET_ENDINGS`]).
fn not_secret(name: &str) -> bool {
    let name = normalised(name);
    NOT_SECRET_ENDINGS.iter().any(|end| name.ends_with(end))
}

/// Whether a key (or flag, or query parameter) named `name` holds a secret.
pub(crate) fn secret_like(name: &str) -> bool {
    let name = normalised(name);
    !not_secret(&name) && SECRET_WORDS.iter().any(|word| name.contains(word))
}

/// Whether `value` holds nothing secret: one or more `${env:VAR}` references, and at most one
/// short word besides them (an authentication scheme: `Bearer ${env:TOKEN}`).
pub(crate) fn only_references(value: &str) -> bool {
    let mut rest = String::new();
    let mut text = value;
    let mut found = false;
    while let Some(start) = text.find("${env:") {
        let Some(end) = text[start..].find('}') else {
            break;
        };
        rest.push_str(&text[..start]);
        rest.push(' ');
        text = &text[start + end + 1..];
        found = true;
    }
    rest.push_str(text);
    let rest = rest.trim();
    found
        && (rest.is_empty() || (rest.len() <= 16 && rest.chars().all(|c| c.is_ascii_alphabetic())))
}

/// `value` hidden unless it holds only references.
fn hide(value: &mut Value) {
    if let Value::String(text) = value
        && !only_references(text)
    {
        *text = HIDDEN.to_owned();
    }
}

/// Hides every string under a secret-like key in `value`, at any depth (inside a secret-like
/// key's object too, but for the keys that name something else: `clientId`, `endpoint`).
fn hide_secret_keys(value: &mut Value, secret: bool) {
    match value {
        Value::Object(object) => {
            for (key, inner) in object.iter_mut() {
                hide_secret_keys(inner, secret_like(key) || (secret && !not_secret(key)));
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| hide_secret_keys(v, secret)),
        Value::String(_) if secret => hide(value),
        _ => {}
    }
}

/// A project document (`kind: Project`) as the admin API shows it.
pub(crate) fn project(document: &mut Value) {
    hide_secret_keys(document, false);
}

/// A server document (`kind: Server`) as the admin API shows it.
pub(crate) fn server(document: &mut Value) {
    hide_secret_keys(document, false);
    let Some(spec) = document.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for map in ["env", "headers"] {
        if let Some(Value::Object(values)) = spec.get_mut(map) {
            values.values_mut().for_each(hide);
        }
    }
    if let Some(Value::Array(args)) = spec.get_mut("args") {
        let mut after_flag = false;
        for arg in args.iter_mut() {
            let Value::String(text) = arg else { continue };
            if after_flag {
                after_flag = false;
                if !text.starts_with('-') {
                    hide(arg);
                    continue;
                }
            }
            if let Some(flag) = text.strip_prefix('-') {
                match flag.split_once('=') {
                    Some((name, value)) if secret_like(name) && !only_references(value) => {
                        *text = format!("-{name}={HIDDEN}");
                    }
                    Some(_) => {}
                    None => after_flag = secret_like(flag),
                }
            }
        }
    }
    if let Some(Value::String(url)) = spec.get_mut("url") {
        *url = hide_in_url(url);
    }
}

/// `url` with the password of its user info and the values of secret-like query parameters
/// hidden.
fn hide_in_url(url: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let mut out = match base.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            match authority.rsplit_once('@') {
                Some((user, host)) => {
                    let user = user.split(':').next().unwrap_or_default();
                    format!("{scheme}://{user}:{HIDDEN}@{host}{path}")
                }
                None => base.to_owned(),
            }
        }
        None => base.to_owned(),
    };
    if let Some(query) = query {
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, value)) if secret_like(name) && !only_references(value) => {
                    format!("{name}={HIDDEN}")
                }
                _ => pair.to_owned(),
            })
            .collect();
        out.push('?');
        out.push_str(&pairs.join("&"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secret_like_names() {
        for name in [
            "key",
            "apiKey",
            "clientSecret",
            "password",
            "GITHUB_TOKEN",
            "api-key",
        ] {
            assert!(secret_like(name), "{name}");
        }
        for name in [
            "keyEnv",
            "keyFile",
            "secretFile",
            "clientId",
            "path",
            "jwksUri",
            "model",
        ] {
            assert!(!secret_like(name), "{name}");
        }
    }

    #[test]
    fn references_show_and_literals_do_not() {
        assert!(only_references("${env:X}"));
        assert!(only_references("Bearer ${env:X}"));
        assert!(!only_references("Bearer abc"));
        assert!(!only_references("abc${env:X}def-ghi"));
        assert!(!only_references("${env:X"));
    }

    #[test]
    fn server_documents_hide_their_secrets() {
        let mut doc = json!({"kind": "Server", "metadata": {"name": "s"}, "spec": {
            "command": "srv",
            "args": ["--token", "abc", "--api-key=def", "--verbose", "--password", "${env:P}", "x"],
            "env": {"DEBUG": "1", "REF": "${env:R}"},
        }});
        server(&mut doc);
        assert_eq!(
            doc["spec"]["args"],
            json!([
                "--token",
                "***",
                "--api-key=***",
                "--verbose",
                "--password",
                "${env:P}",
                "x"
            ])
        );
        assert_eq!(
            doc["spec"]["env"],
            json!({"DEBUG": "***", "REF": "${env:R}"})
        );
        let mut doc = json!({"spec": {
            "url": "https://u:pw@h.example/mcp?apiKey=k&x=1",
            "headers": {"Authorization": "Bearer lit", "X-Ref": "Bearer ${env:T}"},
            "auth": {"tokenExchange": {"endpoint": "https://l/t", "clientId": "c", "clientSecret": "s3"}},
        }});
        server(&mut doc);
        assert_eq!(
            doc["spec"]["url"],
            "https://u:***@h.example/mcp?apiKey=***&x=1"
        );
        assert_eq!(doc["spec"]["headers"]["Authorization"], "***");
        assert_eq!(doc["spec"]["headers"]["X-Ref"], "Bearer ${env:T}");
        assert_eq!(doc["spec"]["auth"]["tokenExchange"]["clientSecret"], "***");
        assert_eq!(doc["spec"]["auth"]["tokenExchange"]["clientId"], "c");
        assert_eq!(
            doc["spec"]["auth"]["tokenExchange"]["endpoint"],
            "https://l/t"
        );
    }

    #[test]
    fn project_documents_hide_keys_at_any_depth() {
        let mut doc = json!({"spec": {
            "config": {"audit": {"path": "/a", "key": "k"}, "other": {"keyEnv": "K"}},
            "llm": {"url": "u", "model": "m", "apiKey": "lit"},
            "auth": {"jwt": {"issuer": "i", "secretFile": "/s"}},
        }});
        project(&mut doc);
        assert_eq!(
            doc["spec"]["config"]["audit"],
            json!({"path": "/a", "key": "***"})
        );
        assert_eq!(doc["spec"]["config"]["other"]["keyEnv"], "K");
        assert_eq!(doc["spec"]["llm"]["apiKey"], "***");
        assert_eq!(doc["spec"]["auth"]["jwt"]["secretFile"], "/s");
    }
}
