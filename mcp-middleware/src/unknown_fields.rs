//! Fields rmcp's types do not know, carried across a typed hook (SPEC P1).
//!
//! A typed hook sees rmcp's structs, which drop members they have no field for (seen on real
//! servers: `tools[].execution`, `capabilities.tasks`; on requests: a task-augmented call's
//! `params.task`). So that a model hooking `tools/list` does not make those disappear, the proxy
//! notes what the typed value lost when it was read ([`UnknownFields::lost`]: the JSON against
//! the typed value written back) and puts it back into what the hooks return
//! ([`UnknownFields::restore`]), unless the hooks set that member themselves.
//!
//! Members are matched at the top level and one level down, in the lists MCP results and params
//! carry (tools, prompts, resources, templates, content, contents, messages), by the item's
//! `name`, `uri` or `uriTemplate`, else by position. Only hooked messages pay for this; the
//! forwarding path never parses a payload.

use std::collections::HashMap;

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
    for key in ["name", "uri", "uriTemplate"] {
        if let Some(Value::String(id)) = item.get(key) {
            return Identity::Key(key, id);
        }
    }
    Identity::Index(index)
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

    #[test]
    fn nothing_lost_is_none() {
        let value = json!({"content": [{"type": "text", "text": "hi"}]});
        assert_eq!(UnknownFields::lost(&value, &value), None);
    }
}
