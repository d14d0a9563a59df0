//! Property tests for the routing decision, which fails closed: params spelled with duplicate keys,
//! escapes, lone surrogates, extreme numbers and odd whitespace. Whatever the router forwards,
//! neither a last-wins reading (serde_json's `Value`) nor a first-wins reading of it names a
//! hidden tool, prompt or resource, and both read the name the router checked.

use std::fmt;

use mcp_middleware::routing::{Routes, forwarded, listed};
use proptest::prelude::*;
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

const HIDDEN_DOC: &str = "demo://resource/static/document/architecture.md";

fn routes() -> Routes {
    Routes::new()
        .hide("get-env")
        .hide("args-prompt")
        .hide(HIDDEN_DOC)
        .hide("demo://resource/dynamic/text/{resourceId}")
        .pass_through("echo")
}

/// A reading of JSON that keeps the *first* of duplicate keys (as some parsers do).
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

fn first_wins(text: &str) -> Option<Value> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = FirstWins.deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(value)
}

fn last_wins(text: &str) -> Option<Value> {
    serde_json::from_str(text).ok()
}

/// What a lenient server could take for a hidden tool or prompt.
fn hidden_name(name: &str) -> bool {
    let name = name
        .trim_matches(|c: char| c.is_whitespace() || c.is_control())
        .to_lowercase();
    name == "get-env" || name == "args-prompt"
}

/// What a server resolving URIs could take for a hidden resource.
fn hidden_uri(uri: &str) -> bool {
    let Ok(parsed) = fluent_uri::Iri::parse(uri) else {
        return false;
    };
    let normalized = parsed.normalize().as_str().to_lowercase();
    normalized == HIDDEN_DOC || normalized.starts_with("demo://resource/dynamic/text/")
}

fn ws() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["", " ", "\n", "\t", "\r\n ", "  "])
}

fn key() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        r#""name""#,
        r#""n\u0061me""#,
        r#""\u006eame""#,
        r#""NAME""#,
        r#""arguments""#,
        r#""\ud800""#,
        r#""\udc00x""#,
        r#""x""#,
        r#""uri""#,
        r#""ur\u0069""#,
    ])
}

fn value() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        r#""get-env""#,
        r#""GET-ENV""#,
        r#"" get-env\n""#,
        r#""g\u0065t-env""#,
        r#""get\u002denv""#,
        r#""\u0000get-env""#,
        r#""get-env\ud800""#,
        r#""\ud800\u0041""#,
        r#""echo""#,
        r#""args-prompt""#,
        r#""simple-prompt""#,
        r#""demo://resource/static/document/architecture.md""#,
        r#""demo://resource/static/x/../document/architecture.md""#,
        r#""demo://resource/static/x/%2e%2E/document/architecture.md""#,
        r#""DEMO://resource/static/document/%61rchitecture.md""#,
        r#""demo://resource/static/document%2Farchitecture.md""#,
        r#""demo://resource/dynamic/text/1""#,
        r#""demo://resource/dynamic/text/%31""#,
        r#""demo://resource/static/document/extension.md""#,
        "1e999",
        "-1e400",
        "1e308",
        "-0",
        "123456789012345678901234567890",
        r#"["get-env"]"#,
        "null",
        r#"{"name":"get-env","name":"echo"}"#,
        r#"{"a":1e999}"#,
        "{}",
        "true",
    ])
}

/// An object of `members` spelled with whitespace between every token.
fn object() -> impl Strategy<Value = String> {
    prop::collection::vec((ws(), key(), ws(), ws(), value(), ws()), 0..6).prop_map(|members| {
        let body: Vec<String> = members
            .into_iter()
            .map(|(a, k, b, c, v, d)| format!("{a}{k}{b}:{c}{v}{d}"))
            .collect();
        format!("{{{}}}", body.join(","))
    })
}

fn method() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "tools/call",
        "prompts/get",
        "resources/read",
        "resources/subscribe",
        "resources/unsubscribe",
        "completion/complete",
    ])
}

/// The names a reading of `params` holds for `method`.
fn names(method: &str, params: &Value) -> Vec<(String, bool)> {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    let mut out = Vec::new();
    match method {
        "tools/call" | "prompts/get" => out.extend(text(params.get("name")).map(|n| (n, false))),
        "completion/complete" => {
            let reference = params.get("ref");
            out.extend(text(reference.and_then(|r| r.get("name"))).map(|n| (n, false)));
            out.extend(text(reference.and_then(|r| r.get("uri"))).map(|n| (n, true)));
        }
        _ => out.extend(text(params.get("uri")).map(|n| (n, true))),
    }
    out
}

fn check(method: &str, params: &str) -> Result<(), TestCaseError> {
    let Ok(sent) = forwarded(&routes(), method, Some(params)) else {
        return Ok(());
    };
    let sent = sent.unwrap_or_else(|| params.to_owned());
    let last = last_wins(&sent);
    let first = first_wins(&sent);
    prop_assert!(
        last.is_some() && first.is_some(),
        "forwarded text some parser cannot read: {sent}"
    );
    let (last, first) = (last.unwrap_or_default(), first.unwrap_or_default());
    prop_assert_eq!(&last, &first, "two readings of {}", sent);
    for (name, is_uri) in names(method, &last) {
        let hidden = if is_uri {
            hidden_uri(&name) || hidden_name(&name)
        } else {
            hidden_name(&name)
        };
        prop_assert!(
            !hidden,
            "{method} {params} forwarded as {sent}: hidden `{name}`"
        );
    }
    // Whatever the client's text meant to a lenient reader, what goes on is what was checked:
    // a second pass over the forwarded text changes nothing.
    let again = forwarded(&routes(), method, Some(&sent));
    prop_assert_eq!(again, Ok(Some(sent.clone())), "not a fixed point: {}", sent);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn nothing_hidden_is_forwarded(method in method(), params in object()) {
        check(method, &params)?;
    }

    #[test]
    fn nothing_hidden_is_forwarded_in_a_completion_ref(inner in object(), around in object()) {
        let params = format!("{{\"ref\":{inner}{}", &around[1..]);
        let params = params.replacen("}{", "},{", 1).replacen(",}", "}", 1);
        check("completion/complete", &params)?;
    }

    #[test]
    fn nothing_hidden_is_listed(entries in prop::collection::vec(object(), 0..5), tail in object()) {
        let raw = format!("{{\"tools\":[{}]{}", entries.join(","), if tail == "{}" { "}".to_owned() } else { format!(",{}", &tail[1..]) });
        for method in ["tools/list", "prompts/list"] {
            let raw = if method == "prompts/list" { raw.replacen("\"tools\"", "\"prompts\"", 1) } else { raw.clone() };
            let member = if method == "tools/list" { "tools" } else { "prompts" };
            let Ok(out) = listed(&routes(), method, &raw) else { continue };
            for reading in [last_wins(&out), first_wins(&out)] {
                prop_assert!(reading.is_some(), "unreadable listing passed: {out}");
                let reading = reading.unwrap_or_default();
                for entry in reading.get(member).and_then(Value::as_array).into_iter().flatten() {
                    if let Some(name) = entry.get("name").and_then(Value::as_str) {
                        prop_assert!(!hidden_name(name), "{raw} listed as {out}: `{name}`");
                    }
                }
            }
        }
    }
}
