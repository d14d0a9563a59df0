//! [`StrictValue`]: JSON read so that no two parsers could disagree on it, for the parts of a
//! credential a decision is made on (a JWT's header and claims, a JWK).
//!
//! serde_json's `Value` keeps the last of two members with the same name, another library may
//! keep the first: `{"alg":"none","alg":"HS256"}` means different things to each. Reading
//! through [`StrictValue`] refuses a duplicate member name at any depth; serde_json itself
//! already refuses lone surrogate escapes in strings, numbers out of `f64` range and nesting
//! deeper than 128.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// A JSON value with no duplicate member names anywhere in it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StrictValue(pub(crate) Value);

impl StrictValue {
    /// Reads `bytes` as one strict JSON value; `None` for anything else.
    pub(crate) fn parse(bytes: &[u8]) -> Option<Value> {
        serde_json::from_slice::<StrictValue>(bytes)
            .ok()
            .map(|v| v.0)
    }

    /// Reads `bytes` as a strict JSON object.
    pub(crate) fn object(bytes: &[u8]) -> Option<Map<String, Value>> {
        match Self::parse(bytes)? {
            Value::Object(map) => Some(map),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value without duplicate member names")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("a number that is not finite"))
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
        let mut out = Vec::new();
        while let Some(StrictValue(value)) = seq.next_element()? {
            out.push(value);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let StrictValue(value) = map.next_value()?;
            // The name itself is the sender's: not repeated in the error.
            if out.insert(key, value).is_some() {
                return Err(de::Error::custom("a member name appears twice"));
            }
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_refused_at_any_depth() {
        assert!(StrictValue::object(br#"{"alg":"none","alg":"HS256"}"#).is_none());
        assert!(StrictValue::object(br#"{"a":{"b":1,"b":2}}"#).is_none());
        assert!(StrictValue::object(br#"{"a":[{"b":1,"b":1}]}"#).is_none());
        // The same name spelled with an escape is the same name.
        assert!(StrictValue::object(br#"{"alg":1,"\u0061lg":2}"#).is_none());
        let fine = StrictValue::object(br#"{"a":{"b":1},"b":[1,2.5,"x",null,true]}"#).unwrap();
        assert_eq!(fine["b"][1], 2.5);
    }

    #[test]
    fn what_serde_json_refuses_stays_refused() {
        assert!(StrictValue::parse(br#"{"a":"\ud800"}"#).is_none());
        assert!(StrictValue::parse(br#"{"a":1e999}"#).is_none());
        assert!(StrictValue::parse(br#"{"a":1} x"#).is_none());
        assert!(StrictValue::object(b"[1]").is_none());
    }
}
