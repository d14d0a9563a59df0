//! What the admin API reads out of a request, as pure functions of its bytes: the login form
//! and query parameters ([`form_value`]) and `POST /api/apply`'s documents
//! ([`parse_apply_body`]). Kept apart from the listener so the `admin_request` fuzz target can
//! drive them with any bytes (they are re-exported at the crate's root for it).

use serde_json::{Value, json};

use crate::store::{AnyResource, parse_every_document};

/// The value of `name` in an `a=1&b=2` string (a query, a login form), percent- and
/// `+`-decoded, invalid UTF-8 replaced; `Some("")` for a bare `name`; `None` when absent.
pub fn form_value(text: &str, name: &str) -> Option<String> {
    text.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (key == name).then(|| {
            let value = value.replace('+', " ");
            percent_encoding::percent_decode_str(&value)
                .decode_utf8_lossy()
                .into_owned()
        })
    })
}

/// Why an apply body was refused before anything was written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApplyBodyError {
    /// The `Content-Type` is neither YAML nor JSON (`415`).
    #[error("send resource documents as `Content-Type: application/yaml` or `application/json`")]
    UnsupportedMediaType,
    /// The documents are wrong (`400`): one `{"document", "line", "field", "message"}` object
    /// for each problem, as the API answers them.
    #[error("{} problem(s) in the documents", .0.len())]
    Documents(Vec<Value>),
}

/// The resources of a `POST /api/apply` body: YAML (`application/yaml`, `application/x-yaml`,
/// `text/yaml`) or JSON (`application/json`; an array holds several documents), as
/// `content_type` says (parameters such as `charset` ignored). Never empty on success.
pub fn parse_apply_body(
    content_type: &str,
    body: &[u8],
) -> Result<Vec<AnyResource>, ApplyBodyError> {
    let problem = |document: Value, line: Value, message: String| {
        ApplyBodyError::Documents(vec![
            json!({"document": document, "line": line, "field": null, "message": message}),
        ])
    };
    let mime = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let json = match mime.as_str() {
        "application/yaml" | "application/x-yaml" | "text/yaml" => false,
        "application/json" => true,
        _ => return Err(ApplyBodyError::UnsupportedMediaType),
    };
    let Ok(text) = std::str::from_utf8(body) else {
        return Err(problem(
            Value::Null,
            Value::Null,
            "the body is not UTF-8".into(),
        ));
    };
    let yaml = if json {
        // JSON is YAML; a JSON array holds several documents.
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Array(documents)) => documents
                .iter()
                .map(Value::to_string)
                .collect::<Vec<_>>()
                .join("\n---\n"),
            Ok(document) => document.to_string(),
            Err(err) => {
                return Err(problem(
                    json!(0),
                    json!(err.line()),
                    format!("not JSON: {err}"),
                ));
            }
        }
    } else {
        text.to_owned()
    };
    let resources = parse_every_document("request", &yaml).map_err(|wrong| {
        ApplyBodyError::Documents(
            wrong
                .iter()
                .map(|e| json!({"document": e.file, "line": e.line, "field": e.field, "message": e.message}))
                .collect(),
        )
    })?;
    if resources.is_empty() {
        return Err(problem(
            Value::Null,
            Value::Null,
            "no resources: expected documents with `kind: Server`, `kind: Prompt` or `kind: Project`"
                .into(),
        ));
    }
    Ok(resources)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_values_are_decoded() {
        assert_eq!(
            form_value("a=1&token=x%2By+z", "token").as_deref(),
            Some("x+y z")
        );
        assert_eq!(form_value("follow&tail=3", "follow").as_deref(), Some(""));
        assert_eq!(form_value("a=1", "token"), None);
        assert_eq!(
            form_value("token=%ff", "token").as_deref(),
            Some("\u{fffd}")
        );
    }

    #[test]
    fn apply_bodies_are_parsed_or_refused_with_a_reason() {
        let prompt = b"kind: Prompt\nmetadata: { name: p }\nspec: { content: hi }\n";
        assert_eq!(
            parse_apply_body("application/yaml", prompt).unwrap().len(),
            1
        );
        assert_eq!(
            parse_apply_body("text/plain", prompt),
            Err(ApplyBodyError::UnsupportedMediaType)
        );
        for (content_type, body) in [
            ("application/json", &b"[1"[..]),
            ("application/yaml", b"\xff"),
            ("application/yaml", b""),
            ("application/json; charset=utf-8", b"[]"),
        ] {
            match parse_apply_body(content_type, body) {
                Err(ApplyBodyError::Documents(problems)) => {
                    assert!(problems[0]["message"].is_string(), "{problems:?}")
                }
                other => panic!("{content_type} {body:?}: {other:?}"),
            }
        }
    }
}
