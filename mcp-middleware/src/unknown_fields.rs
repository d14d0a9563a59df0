//! Fields rmcp's types do not know, carried across a typed hook, so that the proxy
//! stays lossless.
//!
//! A typed hook sees rmcp's structs, which drop members they have no field for (seen on real
//! servers: `tools[].execution`, `capabilities.tasks`; on requests: a task-augmented call's
//! `params.task`). So that a model hooking `tools/list` does not make those disappear, the proxy
//! notes what the typed value lost when it was read ([`UnknownFields::lost`]: the JSON against
//! the typed value written back) and puts it back into what the hooks return
//! ([`UnknownFields::restore`]), unless the hooks set that member themselves. From the text,
//! [`UnknownFields::lost_in_text`] reads into a `Value` only the members that can be lost, not
//! the whole message a second time.
//!
//! Members are matched at the top level and one level down, in the lists MCP results and params
//! carry (tools, prompts, resources, templates, content, contents, messages), by the item's
//! `name`, `uri` or `uriTemplate`, else by position. Only hooked messages pay for this; the
//! forwarding path never parses a payload.

use std::collections::HashMap;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// The lists whose items are matched one level down.
const LISTS: &[&str] = &[
    "tools",
    "prompts",
    "resources",
    "resourceTemplates",
    "content",
    "contents",
    "messages",
];

/// The members that identify a list's item, in the order they are tried.
const IDENTITIES: [&str; 3] = ["name", "uri", "uriTemplate"];

/// What a typed value lost: top-level members, and members of list items by list and identity.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct UnknownFields {
    top: Map<String, Value>,
    items: Vec<(&'static str, OwnedIdentity, Map<String, Value>)>,
}

impl UnknownFields {
    /// The members of `raw` (as received) that `typed` (the same message read into rmcp's type
    /// and written back) lacks. `None` when nothing was lost.
    pub(crate) fn lost(raw: &Value, typed: &Value) -> Option<Self> {
        let (Value::Object(raw), Value::Object(typed)) = (raw, typed) else {
            return None;
        };
        let mut lost = UnknownFields::default();
        for (key, value) in raw {
            match typed.get(key) {
                None => {
                    lost.top.insert(key.clone(), value.clone());
                }
                Some(Value::Array(typed_items)) => {
                    let Some(list) = LISTS.iter().copied().find(|l| *l == key) else {
                        continue;
                    };
                    let Value::Array(raw_items) = value else {
                        continue;
                    };
                    // Indexed once: matching each item by a scan of the other list was
                    // quadratic (about 50 ms for a list of 1,000 tools).
                    let mut typed_by_id = HashMap::with_capacity(typed_items.len());
                    for (i, item) in typed_items.iter().enumerate() {
                        if let Value::Object(item) = item {
                            typed_by_id.entry(identity(item, i)).or_insert(item);
                        }
                    }
                    for (index, raw_item) in raw_items.iter().enumerate() {
                        let Value::Object(raw_item) = raw_item else {
                            continue;
                        };
                        let id = identity(raw_item, index);
                        let Some(typed_item) = typed_by_id.get(&id) else {
                            continue;
                        };
                        let missing: Map<String, Value> = raw_item
                            .iter()
                            .filter(|(k, _)| !typed_item.contains_key(*k))
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect();
                        if !missing.is_empty() {
                            lost.items.push((list, id.to_owned(), missing));
                        }
                    }
                }
                Some(_) => {}
            }
        }
        (!lost.top.is_empty() || !lost.items.is_empty()).then_some(lost)
    }

    /// [`lost`](Self::lost) for the text `raw` of a message, without reading all of it into a
    /// `Value`: only the members that can be lost are (see [`Pruned`]). `None` when nothing was
    /// lost or `raw` is not one JSON value.
    pub(crate) fn lost_in_text(raw: &str, typed: &Value) -> Option<Self> {
        let Value::Object(members) = typed else {
            return None;
        };
        let mut deserializer = serde_json::Deserializer::from_str(raw);
        let pruned = Pruned {
            level: Level::Top(members),
        }
        .deserialize(&mut deserializer)
        .ok()?;
        deserializer.end().ok()?;
        Self::lost(&pruned, typed)
    }

    /// The members lost at the top level, for a writer that puts them back without a `Value`.
    pub(crate) fn top(&self) -> &Map<String, Value> {
        &self.top
    }

    /// The members lost of the items of `list`, by the item's `name` (items known by another
    /// identity are left out), for a writer that puts them back without a `Value`.
    pub(crate) fn items_by_name(&self, list: &str) -> HashMap<&str, &Map<String, Value>> {
        self.items
            .iter()
            .filter(|(l, ..)| *l == list)
            .filter_map(|(_, id, lost)| match id {
                OwnedIdentity::Key("name", name) => Some((name.as_str(), lost)),
                _ => None,
            })
            .collect()
    }

    /// Puts the lost members back into `value` where it has none of its own.
    pub(crate) fn restore(&self, value: &mut Value) {
        let Value::Object(map) = value else { return };
        for (key, lost) in &self.top {
            map.entry(key.clone()).or_insert_with(|| lost.clone());
        }
        let mut lists = self
            .items
            .iter()
            .map(|(list, ..)| *list)
            .collect::<Vec<_>>();
        lists.sort_unstable();
        lists.dedup();
        for list in lists {
            let Some(Value::Array(items)) = map.get_mut(list) else {
                continue;
            };
            let mut by_id = HashMap::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                if let Value::Object(item) = item {
                    by_id.entry(identity(item, i).to_owned()).or_insert(i);
                }
            }
            for (_, id, lost) in self.items.iter().filter(|(l, ..)| *l == list) {
                let Some(Value::Object(item)) = by_id.get(id).and_then(|i| items.get_mut(*i))
                else {
                    continue;
                };
                for (key, value) in lost {
                    item.entry(key.clone()).or_insert_with(|| value.clone());
                }
            }
        }
    }
}

/// How an item is recognised after hooks reorder or filter its list: by its `name`, `uri` or
/// `uriTemplate`, else by its position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Identity<'a> {
    Key(&'static str, &'a str),
    Index(usize),
}

/// An [`Identity`] kept beyond the value it was read from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum OwnedIdentity {
    Key(&'static str, String),
    Index(usize),
}

impl Identity<'_> {
    fn to_owned(self) -> OwnedIdentity {
        match self {
            Identity::Key(key, id) => OwnedIdentity::Key(key, id.to_owned()),
            Identity::Index(index) => OwnedIdentity::Index(index),
        }
    }
}

fn identity(item: &Map<String, Value>, index: usize) -> Identity<'_> {
    for key in IDENTITIES {
        if let Some(Value::String(id)) = item.get(key) {
            return Identity::Key(key, id);
        }
    }
    Identity::Index(index)
}

/// The members of a message that [`UnknownFields::lost`] can need, read from its text: at the
/// top level, the whole value of each member `typed` lacks, and the items of the lists it
/// matches; in those items, the whole value of each member some typed item lacks, and the
/// identities. Every other value is skipped (`null` in its place), so a 1.25 MB listing is not
/// read into a `Value` only to compare its keys. Keys, their order and a duplicate's collapse
/// (the last value, in the first one's place) are those of a `Value` read from the same text.
#[derive(Clone, Copy)]
struct Pruned<'t> {
    /// Which members matter: `typed`'s own, at the top or in one list.
    level: Level<'t>,
}

#[derive(Clone, Copy)]
enum Level<'t> {
    /// The message: `typed`'s members.
    Top(&'t Map<String, Value>),
    /// A list's value (only an array of objects is read further), and the keys every typed
    /// item of the list has (a raw item's other members may be lost, so they are read whole).
    List(&'t [String]),
    /// One item of a list.
    Item(&'t [String]),
}

impl<'de> DeserializeSeed<'de> for Pruned<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Pruned<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    // Anything but the expected object (top level, item) or array (list) is never looked into.
    fn visit_bool<E>(self, _: bool) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_str<E>(self, _: &str) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let Level::List(common) = self.level else {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(Value::Null);
        };
        let mut items = Vec::new();
        let item = Pruned {
            level: Level::Item(common),
        };
        while let Some(value) = seq.next_element_seed(item)? {
            items.push(value);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        match self.level {
            Level::Top(typed) => {
                while let Some(key) = map.next_key::<String>()? {
                    let value = match typed.get(&key) {
                        None => map.next_value::<Value>()?,
                        Some(Value::Array(items)) if LISTS.contains(&key.as_str()) => {
                            let common = common_keys(items);
                            map.next_value_seed(Pruned {
                                level: Level::List(&common),
                            })?
                        }
                        Some(_) => {
                            map.next_value::<IgnoredAny>()?;
                            Value::Null
                        }
                    };
                    out.insert(key, value);
                }
            }
            Level::Item(common) => {
                while let Some(key) = map.next_key::<String>()? {
                    let value = if IDENTITIES.contains(&key.as_str()) || !common.contains(&key) {
                        map.next_value::<Value>()?
                    } else {
                        map.next_value::<IgnoredAny>()?;
                        Value::Null
                    };
                    out.insert(key, value);
                }
            }
            Level::List(_) => {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                return Ok(Value::Null);
            }
        }
        Ok(Value::Object(out))
    }
}

/// The keys every object among `items` has (none if an item is not an object).
fn common_keys(items: &[Value]) -> Vec<String> {
    let mut objects = items.iter().map(|item| match item {
        Value::Object(item) => Some(item),
        _ => None,
    });
    let Some(Some(first)) = objects.next() else {
        return Vec::new();
    };
    let mut common: Vec<String> = first.keys().cloned().collect();
    for item in objects {
        let Some(item) = item else {
            return Vec::new();
        };
        common.retain(|key| item.contains_key(key));
    }
    common
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn members_the_type_dropped_come_back_where_the_hooks_left_none() {
        let raw = json!({
            "tools": [
                {"name": "a", "inputSchema": {}, "execution": {"taskSupport": "optional"}},
                {"name": "b", "inputSchema": {}},
            ],
            "x-extra": 1,
        });
        let typed =
            json!({"tools": [{"name": "a", "inputSchema": {}}, {"name": "b", "inputSchema": {}}]});
        let lost = UnknownFields::lost(&raw, &typed).expect("something was lost");
        // A hook reordered the list, dropped `b`, added a tool, and set `x-extra` itself.
        let mut output = json!({
            "tools": [{"name": "new", "inputSchema": {}}, {"name": "a", "inputSchema": {}}],
            "x-extra": 2,
        });
        lost.restore(&mut output);
        assert_eq!(
            output,
            json!({
                "tools": [
                    {"name": "new", "inputSchema": {}},
                    {"name": "a", "inputSchema": {}, "execution": {"taskSupport": "optional"}},
                ],
                "x-extra": 2,
            })
        );
    }

    /// `lost_in_text` finds what `lost` finds on the text read into a `Value`.
    fn same_in_text(raw: &str, typed: &Value) -> Option<UnknownFields> {
        let parsed: Value = serde_json::from_str(raw).expect("json");
        let lost = UnknownFields::lost_in_text(raw, typed);
        assert_eq!(lost, UnknownFields::lost(&parsed, typed), "{raw}");
        lost
    }

    #[test]
    fn the_text_loses_what_its_value_loses() {
        let typed = json!({
            "tools": [
                {"name": "a", "inputSchema": {}, "outputSchema": {}},
                {"name": "b", "inputSchema": {}},
                {"name": "b", "inputSchema": {}, "title": "second b"},
            ],
            "content": [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}],
            "contents": [{"uri": "file:///a", "text": "a"}],
            "messages": "not a list here",
            "nextCursor": "n",
        });
        let raw = r#"{
            "x-top": {"deep": [1, 2.5, "é", {"k": null}]},
            "tools": [
                {"name": "a", "inputSchema": {"x": [1]}, "outputSchema": {"y": 2}, "execution": {"taskSupport": "optional"}},
                7,
                {"name": "b", "inputSchema": {}, "title": null, "title": "dup", "x-b": [true]},
                {"name": "b", "inputSchema": {}, "x-second": 1},
                {"name": "gone", "inputSchema": {}, "x-gone": 1}
            ],
            "content": [{"type": "text", "text": "x", "x-c": 1}, "odd", {"type": "text", "text": "y", "x-d": {}}],
            "contents": {"uri": "not a list"},
            "messages": [{"x-m": 1}],
            "resourceTemplates": [{"uriTemplate": "t", "x-t": 1}],
            "nextCursor": "n",
            "x-top": "the last one wins",
            "\u0078-escaped": 1
        }"#;
        let lost = same_in_text(raw, &typed).expect("lost");
        assert_eq!(lost.top()["x-top"], "the last one wins");
        assert_eq!(lost.top()["x-escaped"], 1);
        assert_eq!(lost.top()["resourceTemplates"][0]["x-t"], 1);
        let tools = lost.items_by_name("tools");
        assert_eq!(tools["a"]["execution"]["taskSupport"], "optional");
        assert!(!tools.contains_key("gone"));
        // Not objects, or nothing to compare with: nothing is lost, as before.
        for raw in [
            r#"[1, 2]"#,
            r#""text""#,
            r#"{}"#,
            r#"{"tools": [], "nextCursor": "n"}"#,
            r#"{"tools": {"name": "a"}}"#,
            r#"{"tools": [{"name": "a", "inputSchema": {"x-in-schema": 1}}]}"#,
        ] {
            assert_eq!(same_in_text(raw, &typed), None, "{raw}");
        }
        // Not one JSON value: nothing is read.
        assert_eq!(UnknownFields::lost_in_text(r#"{"a": 1} {}"#, &typed), None);
        assert_eq!(UnknownFields::lost_in_text(r#"{"a": "#, &typed), None);
    }

    #[test]
    fn nothing_lost_is_none() {
        let value = json!({"content": [{"type": "text", "text": "hi"}]});
        assert_eq!(UnknownFields::lost(&value, &value), None);
    }
}
