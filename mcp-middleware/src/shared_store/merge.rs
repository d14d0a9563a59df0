//! The three-way merge that settles concurrent updates of one model state by two replicas.
//!
//! A replica knows the state it last read from or wrote to the store (`base`), its own current
//! state (`ours`) and, after a conflicting write, the store's (`theirs`). Hooks are never run
//! again (that could repeat their upstream calls); instead, the fields `ours` changed since
//! `base` are laid over `theirs`, member by member for JSON objects and recursively, so two
//! requests that touched different fields both keep their change. Where both changed the same
//! field (or a value that is not an object), the replica writing now wins: its request is the
//! later one to finish, and its change is what its client was just told.

use serde_json::Value;

/// `theirs` with every change `ours` made since `base`.
pub(crate) fn merge(base: &Value, ours: &Value, theirs: &Value) -> Value {
    if ours == base {
        return theirs.clone();
    }
    match (base, ours, theirs) {
        (Value::Object(base), Value::Object(ours), Value::Object(theirs)) => {
            let mut merged = theirs.clone();
            for (key, mine) in ours {
                match base.get(key) {
                    Some(old) if old == mine => {}
                    Some(old) => {
                        let value = match theirs.get(key) {
                            Some(current) => merge(old, mine, current),
                            None => mine.clone(),
                        };
                        merged.insert(key.clone(), value);
                    }
                    None => {
                        merged.insert(key.clone(), mine.clone());
                    }
                }
            }
            // A member `ours` removed is removed, unless `theirs` changed it meanwhile.
            for (key, old) in base {
                if !ours.contains_key(key) && theirs.get(key) == Some(old) {
                    merged.remove(key);
                }
            }
            Value::Object(merged)
        }
        _ => ours.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::merge;
    use serde_json::json;

    #[test]
    fn unchanged_takes_theirs() {
        let base = json!({ "open": false });
        assert_eq!(
            merge(&base, &base, &json!({ "open": true })),
            json!({ "open": true })
        );
    }

    #[test]
    fn different_fields_both_survive() {
        let base = json!({ "open": false, "intent": null, "n": 1 });
        let ours = json!({ "open": true, "intent": null, "n": 1 });
        let theirs = json!({ "open": false, "intent": "x", "n": 1 });
        assert_eq!(
            merge(&base, &ours, &theirs),
            json!({ "open": true, "intent": "x", "n": 1 })
        );
    }

    #[test]
    fn nested_objects_merge_member_by_member() {
        let base = json!({ "store": { "a": 1, "b": 1 } });
        let ours = json!({ "store": { "a": 2, "b": 1 } });
        let theirs = json!({ "store": { "a": 1, "b": 3 } });
        assert_eq!(
            merge(&base, &ours, &theirs),
            json!({ "store": { "a": 2, "b": 3 } })
        );
    }

    #[test]
    fn the_same_field_goes_to_the_writer() {
        let base = json!({ "n": 1 });
        assert_eq!(
            merge(&base, &json!({ "n": 2 }), &json!({ "n": 3 })),
            json!({ "n": 2 })
        );
        assert_eq!(merge(&json!(1), &json!(2), &json!(3)), json!(2));
    }

    #[test]
    fn removals_are_kept_unless_changed_meanwhile() {
        let base = json!({ "a": 1, "b": 1 });
        assert_eq!(
            merge(&base, &json!({ "b": 1 }), &json!({ "a": 1, "b": 2 })),
            json!({ "b": 2 })
        );
        assert_eq!(
            merge(&base, &json!({ "b": 1 }), &json!({ "a": 5, "b": 1 })),
            json!({ "a": 5, "b": 1 })
        );
    }
}
