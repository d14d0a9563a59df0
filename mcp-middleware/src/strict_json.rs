//! Strict JSON: the one reading of a text that a security decision is made on, for
//! a request's params that routing checks and for a credential's parts (a JWT's header and
//! claims, a JWK set) that identity checks.
//!
//! JSON leaves room for two parsers to read one text differently: a duplicate key (serde_json
//! keeps the last value, others the first), a lone surrogate escape (`"\ud800"`: Node's
//! `JSON.parse` and Python's `json` accept it, serde_json does not), a number out of the f64
//! range (`1e999`: infinity in JavaScript, an error here). [`parse`] refuses all of these, at
//! any depth, so that the value it returns is the only reading the text has; routing checks
//! that value and forwards its serialisation ([`serde_json::to_string`]), which any parser
//! reads the same way.

use std::collections::HashSet;
use std::fmt;

use serde::de::{DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Reads `text` as one JSON value with a single meaning: no duplicate keys at any depth, no lone
/// surrogates, no invalid escapes, no number outside the f64 range, nothing after the value.
/// The error says what was wrong and where (line and column).
pub(crate) fn parse(text: &str) -> Result<Value, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value = Strict.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// [`parse`] for bytes: `None` for anything that is not one strict JSON value (invalid UTF-8
/// included).
pub(crate) fn parse_slice(bytes: &[u8]) -> Option<Value> {
    parse(std::str::from_utf8(bytes).ok()?).ok()
}

/// [`parse_slice`], for a JSON object.
pub(crate) fn object(bytes: &[u8]) -> Option<Map<String, Value>> {
    match parse_slice(bytes)? {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

/// A [`Value`] read strictly.
#[derive(Clone, Copy)]
struct Strict;

impl<'de> DeserializeSeed<'de> for Strict {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        // serde_json already refuses overflow; a non-finite value from any other source too.
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom(format_args!("number {v} is out of range")))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Strict)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(A::Error::custom(format_args!(
                    "duplicate key {}",
                    Value::String(key)
                )));
            }
            let value = map.next_value_seed(Strict)?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_meaning_or_an_error() {
        assert_eq!(
            parse(r#" {"a" : [1, -2, 2.5e3, "x\u0041"], "b": {"c": null}} "#).unwrap(),
            serde_json::json!({"a": [1, -2, 2500.0, "xA"], "b": {"c": null}})
        );
        for (text, says) in [
            (r#"{"a":1,"a":2}"#, "duplicate key \"a\""),
            (r#"{"x":{"a":1,"\u0061":2}}"#, "duplicate key \"a\""),
            (r#"{"\ud800":0,"name":"x"}"#, "hex escape"),
            (r#"{"name":"\udc00"}"#, "surrogate"),
            (r#"{"name":1e999,"name":"x"}"#, "out of range"),
            (r#"{"name":-1e400}"#, "out of range"),
            (r#"{"name":"\q"}"#, "escape"),
            (r#"{"name":"x"} {}"#, "trailing"),
        ] {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains(says), "{text}: {err}");
        }
    }

    #[test]
    fn credential_parts_with_a_member_twice_are_refused_at_any_depth() {
        assert!(object(br#"{"alg":"none","alg":"HS256"}"#).is_none());
        assert!(object(br#"{"a":{"b":1,"b":2}}"#).is_none());
        assert!(object(br#"{"a":[{"b":1,"b":1}]}"#).is_none());
        // The same name spelled with an escape is the same name.
        assert!(object(br#"{"alg":1,"\u0061lg":2}"#).is_none());
        let fine = object(br#"{"a":{"b":1},"b":[1,2.5,"x",null,true]}"#).unwrap();
        assert_eq!(fine["b"][1], 2.5);
        assert!(parse_slice(br#"{"a":"\ud800"}"#).is_none());
        assert!(parse_slice(b"{\"a\":\xff}").is_none());
        assert!(object(b"[1]").is_none());
    }

    #[test]
    fn its_serialisation_reads_back_the_same() {
        let text = r#"{"name" : "\u0067et-env", "z": 1, "a": [true, 1.5]}"#;
        let value = parse(text).unwrap();
        let canonical = serde_json::to_string(&value).unwrap();
        assert_eq!(canonical, r#"{"name":"get-env","z":1,"a":[true,1.5]}"#);
        assert_eq!(parse(&canonical).unwrap(), value);
    }
}
