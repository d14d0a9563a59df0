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
    items: Vec<(&'static str, String, Map<String, Value>)>,
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
                    for (index, raw_item) in raw_items.iter().enumerate() {
                        let Value::Object(raw_item) = raw_item else {
                            continue;
                        };
                        let id = identity(raw_item, index);
                        let typed_item = typed_items
                            .iter()
                            .enumerate()
                            .filter_map(|(i, item)| item.as_object().map(|o| (i, o)))
                            .find(|(i, item)| identity(item, *i) == id);
                        let Some((_, typed_item)) = typed_item else {
                            continue;
                        };
                        let missing: Map<String, Value> = raw_item
                            .iter()
                            .filter(|(k, _)| !typed_item.contains_key(*k))
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect();
                        if !missing.is_empty() {
                            lost.items.push((list, id, missing));
                        }
                    }
                }
                Some(_) => {}
            }
        }
        (!lost.top.is_empty() || !lost.items.is_empty()).then_some(lost)
    }

    /// Puts the lost members back into `value` where it has none of its own.
    pub(crate) fn restore(&self, value: &mut Value) {
        let Value::Object(map) = value else { return };
        for (key, lost) in &self.top {
            map.entry(key.clone()).or_insert_with(|| lost.clone());
        }
        for (list, id, lost) in &self.items {
            let Some(Value::Array(items)) = map.get_mut(*list) else {
                continue;
            };
            let found = items
                .iter_mut()
                .enumerate()
                .filter_map(|(i, item)| item.as_object_mut().map(|o| (i, o)))
                .find(|(i, item)| identity(item, *i) == *id);
            if let Some((_, item)) = found {
                for (key, value) in lost {
                    item.entry(key.clone()).or_insert_with(|| value.clone());
                }
            }
        }
    }
}

/// How an item is recognised after hooks reorder or filter its list.
fn identity(item: &Map<String, Value>, index: usize) -> String {
    for key in ["name", "uri", "uriTemplate"] {
        if let Some(Value::String(id)) = item.get(key) {
            return format!("{key}:{id}");
        }
    }
    format!("#{index}")
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
