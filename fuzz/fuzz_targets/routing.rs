//! The routing decision, which fails closed: the first byte picks a request method (or a
//! listing), the rest is its params (or the upstream's listing result). Checks, for any input:
//! - nothing panics;
//! - what the router forwards is read alike by a last-wins and a first-wins parser, names
//!   nothing hidden under either reading, and is a fixed point (forwarding it again changes
//!   nothing);
//! - a listing that passes holds no hidden entry under either reading.
#![no_main]

use std::fmt;

use libfuzzer_sys::fuzz_target;
use mcp_middleware::routing::{Routes, forwarded, listed};
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

const METHODS: [&str; 7] = [
    "tools/call",
    "prompts/get",
    "resources/read",
    "resources/subscribe",
    "completion/complete",
    "subscriptions/listen",
    "tools/list",
];

fn routes() -> Routes {
    Routes::new()
        .hide("get-env")
        .hide("demo://resource/static/document/architecture.md")
        .hide("demo://resource/dynamic/text/{id}")
        .pass_through("echo")
}

fn hidden((text, is_uri): &(String, bool)) -> bool {
    let name = text
        .trim_matches(|c: char| c.is_whitespace() || c.is_control())
        .to_lowercase();
    if name == "get-env" {
        return true;
    }
    if !is_uri {
        return false;
    }
    let Ok(uri) = fluent_uri::Iri::parse(text.as_str()) else {
        return false;
    };
    let uri = uri.normalize().as_str().to_lowercase();
    uri == "demo://resource/static/document/architecture.md"
        || uri.starts_with("demo://resource/dynamic/text/")
}

/// The names `method`'s params hold where a server reads them, each with whether it is a URI.
fn named(method: &str, params: &Value) -> Vec<(String, bool)> {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    let uri = |n: String| (n, true);
    let name = |n: String| (n, false);
    match method {
        "tools/call" | "prompts/get" => text(params.get("name")).map(name).into_iter().collect(),
        "completion/complete" => {
            let reference = params.get("ref");
            text(reference.and_then(|r| r.get("name")))
                .map(name)
                .into_iter()
                .chain(text(reference.and_then(|r| r.get("uri"))).map(uri))
                .collect()
        }
        "subscriptions/listen" => params
            .get("notifications")
            .and_then(|n| n.get("resourceSubscriptions"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|n| uri(n.to_owned()))
            .collect(),
        "tools/list" => params
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|entry| text(entry.get("name")).map(name))
            .collect(),
        _ => text(params.get("uri")).map(uri).into_iter().collect(),
    }
}

struct FirstWins;

impl<'de> DeserializeSeed<'de> for FirstWins {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FirstWins {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(FirstWins)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(FirstWins)?;
            out.entry(key).or_insert(value);
        }
        Ok(Value::Object(out))
    }
}

fn readings(text: &str) -> (Value, Value) {
    let last: Value = serde_json::from_str(text).expect("a last-wins parser reads what passed");
    let mut de = serde_json::Deserializer::from_str(text);
    let first = FirstWins
        .deserialize(&mut de)
        .expect("a first-wins parser reads what passed");
    assert_eq!(last, first, "two readings of what passed: {text}");
    (last, first)
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let method = METHODS[usize::from(selector) % METHODS.len()];
    let routes = routes();
    if method == "tools/list" {
        let Ok(out) = listed(&routes, method, text) else {
            return;
        };
        let (last, _) = readings(&out);
        let names = named(method, &last);
        assert!(!names.iter().any(|n| hidden(n)), "listed hidden: {out}");
        return;
    }
    let Ok(sent) = forwarded(&routes, method, Some(text)) else {
        return;
    };
    let sent = sent.unwrap_or_else(|| text.to_owned());
    let (last, _) = readings(&sent);
    let names = named(method, &last);
    assert!(
        !names.iter().any(|n| hidden(n)),
        "{method} {text} forwarded as {sent}"
    );
    assert_eq!(
        forwarded(&routes, method, Some(&sent)),
        Ok(Some(sent.clone())),
        "not a fixed point"
    );
});
