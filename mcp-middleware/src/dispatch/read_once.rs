//! Reading a typed hook's params, or an upstream's result, and what rmcp's type lost of it
//! ([`UnknownFields`]) from one parse of the text.
//!
//! Finding what the type lost needs the message as a `Value` beside the typed value. Reading
//! the typed value from the text and the `Value` from the text again parsed every typed message
//! twice (about 55 M instructions on a first listing of 1,000 tools). Here the text is parsed
//! once, strictly ([`crate::strict_json::parse`]), and the typed value is read from that
//! `Value` (borrowed: the text is not scanned again), which is then the `Value` compared with it.
//!
//! The typed read of the text refuses a second member for a field the type knows and ignores
//! one for a field it does not know; a plain `Value` would keep the last of either and hide the
//! first. The strict reading refuses every duplicate, so a text with one (or anything else it
//! refuses, or a `Value` that does not fit the type) is not read here: [`once`] gives `None` and
//! the caller reads the text as before, with the same refusals and the same errors.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::unknown_fields::UnknownFields;

/// `raw` read into `T`, and what `T` lost of it, from one parse; `None` when the text must be
/// read as before (see the module docs): a duplicate member, a lone surrogate, or anything that
/// does not fit `T`.
pub(super) fn once<T: Serialize + DeserializeOwned>(
    raw: &str,
) -> Option<(T, Option<UnknownFields>)> {
    let (value, typed) = parse::<T>(raw)?;
    let lost = super::lost_against(&value, &typed);
    Some((typed, lost))
}

/// `raw` as a `Value` and as `T` read from it, for a caller that compares them its own way
/// (a listing: without its schemas); `None` as for [`once`].
pub(super) fn parse<T: DeserializeOwned>(raw: &str) -> Option<(Value, T)> {
    let value = crate::strict_json::parse(raw).ok()?;
    let typed = T::deserialize(&value).ok()?;
    Some((value, typed))
}

#[cfg(test)]
mod tests {
    use rmcp::model::{CallToolRequestParams, CallToolResult, ListToolsResult};
    use serde_json::json;

    use super::*;

    /// What the old reading gave: the typed value from the text, what it lost from a second
    /// parse.
    fn twice<T: Serialize + DeserializeOwned>(raw: &str) -> (T, Option<UnknownFields>) {
        let typed: T = serde_json::from_str(raw).expect("fits the type");
        let lost = super::super::lost_in(raw, &typed);
        (typed, lost)
    }

    /// `once` reads `raw` as the old reading did, and returns what it lost.
    fn same_as_twice<T: Serialize + DeserializeOwned>(raw: &str) -> Option<UnknownFields> {
        let (typed, lost) = once::<T>(raw).expect("read once");
        let (old_typed, old_lost) = twice::<T>(raw);
        assert_eq!(
            serde_json::to_value(&typed).expect("value"),
            serde_json::to_value(&old_typed).expect("value"),
            "{raw}"
        );
        assert_eq!(lost, old_lost, "{raw}");
        lost
    }

    #[test]
    fn unknown_members_at_the_top_and_in_content_items_are_all_put_back() {
        let raw = json!({
            "content": [
                {"type": "text", "text": "a", "x-item": {"deep": [1, 2.5, "\u{e9}"]}},
                {"type": "image", "data": "AA==", "mimeType": "image/png", "x-other": null},
                {"type": "text", "text": "c"},
            ],
            "isError": false,
            "x-top": {"kept": true},
            "resultType": "complete",
        })
        .to_string();
        let lost = same_as_twice::<CallToolResult>(&raw).expect("something was lost");
        let (typed, _) = once::<CallToolResult>(&raw).expect("read once");
        let mut written = serde_json::to_value(&typed).expect("value");
        lost.restore(&mut written);
        let raw: Value = serde_json::from_str(&raw).expect("json");
        // Every member the upstream sent is in what is written, with its value.
        assert_eq!(written["x-top"], raw["x-top"]);
        assert_eq!(written["content"][0]["x-item"], raw["content"][0]["x-item"]);
        assert_eq!(written["content"][1]["x-other"], Value::Null);
        assert!(written["content"][1].get("x-other").is_some());
        for (at, item) in raw["content"].as_array().expect("items").iter().enumerate() {
            for (key, value) in item.as_object().expect("item") {
                assert_eq!(&written["content"][at][key], value, "content[{at}].{key}");
            }
        }
    }

    #[test]
    fn unknown_members_of_params_and_tools_are_all_put_back() {
        let params = r#"{"name":"echo","arguments":{"message":"hi"},"x-task":{"ttl":5}}"#;
        let lost = same_as_twice::<CallToolRequestParams>(params).expect("lost");
        assert_eq!(lost.top().get("x-task"), Some(&json!({"ttl": 5})));
        let listing = json!({
            "tools": [
                {"name": "a", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}},
                {"name": "b", "inputSchema": {"type": "object"}, "title": null},
            ],
            "nextCursor": "n",
            "x-extra": 1,
        })
        .to_string();
        let lost = same_as_twice::<ListToolsResult>(&listing).expect("lost");
        let items = lost.items_by_name("tools");
        assert_eq!(items["a"]["execution"], json!({"taskSupport": "optional"}));
        assert_eq!(items["b"]["title"], Value::Null);
        assert_eq!(lost.top()["x-extra"], 1);
    }

    #[test]
    fn nothing_lost_is_none_as_before() {
        for raw in [
            r#"{"content":[{"type":"text","text":"Echo: hi"}]}"#,
            r#"{"content":[{"type":"text","text":"x"}],"structuredContent":{"a":{"b":[1,{"c":2}]}}}"#,
            r#"{"content":[{"type":"text","text":"\u0041\ud83d\ude00"}],"isError":true}"#,
        ] {
            assert_eq!(same_as_twice::<CallToolResult>(raw), None, "{raw}");
        }
    }

    #[test]
    fn a_text_with_a_member_twice_is_left_to_the_typed_read_of_the_text() {
        for raw in [
            // A known field twice: the typed read refuses it.
            r#"{"name":"plain","arguments":{},"name":"admin-reset"}"#,
            // An unknown member twice, at any depth: the typed read keeps what it knows.
            r#"{"name":"a","x":1,"x":2}"#,
            r#"{"name":"a","arguments":{"k":1,"k":2}}"#,
            r#"{"name":"a","arguments":{},"\u0061rguments":{}}"#,
            // Also left to it: what the strict reading refuses, and what does not fit.
            r#"{"name":"\ud800"}"#,
            r#"{"name":1}"#,
            r#"{"name":"a"} x"#,
        ] {
            assert!(once::<CallToolRequestParams>(raw).is_none(), "{raw}");
        }
    }

    #[test]
    fn a_hooks_params_with_a_known_member_twice_are_still_refused() {
        use crate::model::hooks::ToolCall;
        let read = super::super::read_params::<ToolCall>;
        let refused = read(Some(
            r#"{"name":"plain","arguments":{},"name":"admin-reset"}"#,
        ));
        let err = refused.err().expect("refused");
        assert!(err.message.contains("duplicate field `name`"), "{}", err.message);
        // An unknown member twice is read as before: the last one is put back.
        let (typed, lost) = read(Some(r#"{"name":"a","x":1,"x":2}"#)).expect("read");
        assert_eq!(typed.name, "a");
        assert_eq!(lost.expect("lost").top()["x"], 2);
    }
}
