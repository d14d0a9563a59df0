//! Trace context in `params._meta`: what MCP carries instead of HTTP headers.
//!
//! MCP has no headers of its own (stdio has none at all), so W3C trace context (`traceparent`,
//! `tracestate`) travels as members of a request's `params._meta`. This module owns the two
//! sides of that carrier: reading `_meta`'s members from a request a client sent
//! ([`meta_of`]), and writing members into the `_meta` of a line about to be forwarded
//! ([`inject_meta`]). Parsing and formatting the W3C values themselves is the job of whoever
//! installs the [`RequestTap`](crate::request_tap::RequestTap) (mcpctl uses OpenTelemetry's
//! propagator); this module only moves strings in and out of JSON.
//!
//! [`inject_meta`] splices: only `_meta`'s bytes change (or are added); the rest of the line,
//! `arguments` included, is forwarded byte for byte, as [`jsonrpc`](crate::jsonrpc) does for
//! ids. It runs only when a tap asked for entries, so without one nothing here touches a
//! forwarded message.

use std::collections::HashMap;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::jsonrpc::{Message, range_in, splice};

/// The members of `params._meta` of a request's raw `params`, or an empty map when there are
/// none (no params, params that are not an object, or a `_meta` that is not an object).
///
/// ```
/// use mcp_middleware::trace_context::meta_of;
///
/// let meta = meta_of(Some(r#"{"name":"echo","_meta":{"traceparent":"00-ab-cd-01"}}"#));
/// assert_eq!(meta["traceparent"], "00-ab-cd-01");
/// assert!(meta_of(None).is_empty());
/// ```
pub fn meta_of(params: Option<&str>) -> Map<String, Value> {
    #[derive(serde::Deserialize)]
    struct WithMeta {
        #[serde(rename = "_meta", default)]
        meta: Option<Value>,
    }
    let meta = params.and_then(|params| serde_json::from_str::<WithMeta>(params).ok());
    match meta.and_then(|with| with.meta) {
        Some(Value::Object(meta)) => meta,
        _ => Map::new(),
    }
}

/// `line` (a JSON-RPC request) with `entries` set as string members of its `params._meta`:
/// added when absent, replaced when present, every other member kept.
///
/// Only the bytes of `_meta` change: an existing `_meta` object is rewritten in place, a
/// missing one is inserted at the start of `params`, and a request without `params` gets
/// `"params":{"_meta":{...}}`. `None` when nothing can be set without changing the request's
/// meaning: the line is not a request, or its `params` or `_meta` is not an object. The caller
/// then forwards the line as it was.
///
/// ```
/// use mcp_middleware::trace_context::inject_meta;
///
/// let line = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#;
/// let entries = [("traceparent".to_owned(), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".to_owned())];
/// assert_eq!(
///     inject_meta(line, &entries).as_deref(),
///     Some(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},"name":"echo"}}"#)
/// );
/// ```
pub fn inject_meta(line: &str, entries: &[(String, String)]) -> Option<String> {
    let Ok(Message::Request { params, .. }) = Message::parse(line) else {
        return None;
    };
    let Some(params) = params else {
        return with_params(line, entries);
    };
    // Reading the members raw proves `params` is an object without materialising them.
    let raw: HashMap<String, &RawValue> = serde_json::from_str(params).ok()?;
    match raw.get("_meta") {
        Some(meta) => {
            let Ok(Value::Object(mut map)) = serde_json::from_str::<Value>(meta.get()) else {
                return None;
            };
            for (key, value) in entries {
                map.insert(key.clone(), Value::String(value.clone()));
            }
            let text = serde_json::to_string(&map).ok()?;
            Some(splice(line, &[(range_in(line, meta.get()), text.as_str())]))
        }
        None => {
            let open = range_in(line, params).start + params.find('{')?;
            let mut text = String::from("\"_meta\":");
            text.push_str(&entries_object(entries)?);
            if !raw.is_empty() {
                text.push(',');
            }
            let mut out = String::with_capacity(line.len() + text.len());
            out.push_str(&line[..=open]);
            out.push_str(&text);
            out.push_str(&line[open + 1..]);
            Some(out)
        }
    }
}

/// `{"key":"value",...}` for `entries`.
fn entries_object(entries: &[(String, String)]) -> Option<String> {
    let map: Map<String, Value> = entries
        .iter()
        .map(|(key, value)| (key.clone(), Value::String(value.clone())))
        .collect();
    serde_json::to_string(&map).ok()
}

/// A request without `params` gets `"params":{"_meta":{...}}` before its closing brace.
fn with_params(line: &str, entries: &[(String, String)]) -> Option<String> {
    let close = line.trim_end().len().checked_sub(1)?;
    if line.as_bytes().get(close) != Some(&b'}') {
        return None;
    }
    let mut out = String::with_capacity(line.len() + 64);
    out.push_str(&line[..close]);
    out.push_str(",\"params\":{\"_meta\":");
    out.push_str(&entries_object(entries)?);
    out.push('}');
    out.push_str(&line[close..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    fn entries() -> Vec<(String, String)> {
        vec![("traceparent".to_owned(), TRACEPARENT.to_owned())]
    }

    fn params_of(line: &str) -> Value {
        let value: Value = serde_json::from_str(line).expect("the result is JSON");
        value["params"].clone()
    }

    #[test]
    fn trace_context_is_added_to_params_without_meta_and_the_rest_is_kept_byte_for_byte() {
        let line = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{ "name" : "echo", "arguments":{"text":"a  b","n":1.50}}}"#;
        let out = inject_meta(line, &entries()).expect("a request with object params");
        assert_eq!(
            out,
            format!(
                r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"_meta":{{"traceparent":"{TRACEPARENT}"}}, "name" : "echo", "arguments":{{"text":"a  b","n":1.50}}}}}}"#
            )
        );
    }

    #[test]
    fn trace_context_goes_into_an_existing_meta_beside_its_members() {
        let line = r#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"_meta":{"progressToken":3,"traceparent":"00-old-old-00","tracestate":"a=b"},"name":"echo","arguments":{"k":[1, 2]}}}"#;
        let out = inject_meta(line, &entries()).expect("an object _meta");
        let params = params_of(&out);
        assert_eq!(params["_meta"]["traceparent"], TRACEPARENT);
        assert_eq!(params["_meta"]["progressToken"], 3);
        assert_eq!(params["_meta"]["tracestate"], "a=b");
        // Only `_meta` was rewritten: the arguments keep their spacing.
        assert!(
            out.ends_with(r#","name":"echo","arguments":{"k":[1, 2]}}}"#),
            "{out}"
        );
    }

    #[test]
    fn trace_context_into_empty_params_and_into_a_request_without_params() {
        let empty = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;
        let out = inject_meta(empty, &entries()).expect("empty params");
        assert_eq!(params_of(&out)["_meta"]["traceparent"], TRACEPARENT);
        assert!(out.contains(r#""params":{"_meta":{"traceparent""#), "{out}");

        let none = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        let out = inject_meta(none, &entries()).expect("no params");
        assert_eq!(
            out,
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"_meta":{{"traceparent":"{TRACEPARENT}"}}}}}}"#
            )
        );
    }

    #[test]
    fn trace_context_is_not_forced_into_what_is_not_an_object() {
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":[1,2]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":"text"}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            "not json",
        ] {
            assert_eq!(inject_meta(line, &entries()), None, "{line}");
        }
    }

    #[test]
    fn trace_context_meta_of_reads_strings_and_tolerates_anything() {
        let meta = meta_of(Some(
            r#"{"_meta":{"traceparent":"tp","tracestate":"ts","progressToken":1}}"#,
        ));
        assert_eq!(meta["traceparent"], "tp");
        assert_eq!(meta["tracestate"], "ts");
        for params in [None, Some("[]"), Some(r#"{"_meta":1}"#), Some("{")] {
            assert!(meta_of(params).is_empty(), "{params:?}");
        }
    }
}
