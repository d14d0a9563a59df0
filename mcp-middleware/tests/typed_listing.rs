//! A typed `tools/list` hook in front of a large listing: what the client gets
//! is the upstream's listing as the hook changed it, with every schema the hook left alone in
//! the upstream's own spelling and the members rmcp's types do not know kept, on the first list
//! and on the ones after it (which reuse what the first one read).
//!
//! Driven through the library's public API (`Proxy::serve`) over pipes, in front of the scripted
//! upstream as a real child process over stdio.

mod support;

use mcp_middleware::Proxy;
use serde_json::{Value, json};
use support::{Client, scripted_upstream};

/// Drops `tool_1` from every listing, by name only.
#[mcp_middleware::proxy_model]
mod by_name {
    pub(crate) async fn on_tools_list(
        ctx: &Context,
        params: Option<PaginatedRequestParams>,
        next: Next<'_, hooks::ToolsList>,
    ) -> HookResult<ListToolsResult> {
        let mut listed = next.run(ctx, params).await?;
        listed.tools.retain(|tool| tool.name != "tool_1");
        Ok(listed)
    }
}

/// Reorders every listing, drops `tool_1`, adds a tool of its own in the middle and changes
/// `tool_2`'s description when its config says `change: true`.
#[mcp_middleware::proxy_model]
mod reshaping {
    use std::sync::Arc;

    /// Whether `tool_2` is changed too.
    #[allow(unreachable_pub)]
    #[derive(Debug, Default, Deserialize, JsonSchema)]
    #[serde(default, deny_unknown_fields)]
    pub struct Config {
        /// Change `tool_2`'s description.
        pub change: bool,
    }

    pub(crate) async fn on_tools_list(
        ctx: &Context,
        params: Option<PaginatedRequestParams>,
        next: Next<'_, hooks::ToolsList>,
    ) -> HookResult<ListToolsResult> {
        let mut listed = next.run(ctx, params).await?;
        listed.tools.retain(|tool| tool.name != "tool_1");
        listed.tools.reverse();
        let mut added = Tool::default();
        added.name = "added".into();
        added.input_schema = Arc::new(JsonObject::new());
        listed.tools.insert(5, added);
        if ctx.config::<Config>()?.change
            && let Some(tool) = listed.tools.iter_mut().find(|tool| tool.name == "tool_2")
        {
            tool.description = Some("changed".into());
        }
        Ok(listed)
    }
}

/// A listing of `count` tools as an upstream might spell it: spaces and `\u` escapes in the
/// schemas, output schemas on some tools, members rmcp's `Tool` has no field for
/// (`execution`), and an unknown top-level member.
fn upstream_listing(count: usize) -> String {
    let tools: Vec<String> = (0..count)
        .map(|i| {
            let output = if i % 2 == 0 {
                r#", "outputSchema" : {"type": "obj\u0065ct", "required": ["y"]}"#
            } else {
                ""
            };
            format!(
                r#"{{"name": "tool_{i}", "description": "Tool number {i}, described at some length so that the listing is large", "inputSchema" : {{"type": "obj\u0065ct", "properties": {{"x": {{"type": "string", "description": "the x \u00e9 of {i}"}}}}}}{output}, "execution": {{"taskSupport": "optional"}}}}"#
            )
        })
        .collect();
    format!(
        r#"{{"tools": [{}], "x-vendor": {{"kept": true}}}}"#,
        tools.join(", ")
    )
}

/// Lists the tools and returns the answer's line as the proxy wrote it.
async fn list_line(client: &mut Client) -> String {
    let id = client.start("tools/list", json!({})).await;
    loop {
        let line = client.next_line().await;
        let message: Value = serde_json::from_str(&line).expect("the proxy wrote JSON");
        if message.get("method").is_none() && message["id"] == json!(id) {
            return line;
        }
    }
}

#[tokio::test]
async fn a_hook_that_filters_by_name_leaves_the_rest_of_a_large_listing_as_the_upstream_wrote_it() {
    let raw = upstream_listing(300);
    assert!(
        raw.len() > 32 * 1024,
        "large enough to be kept: {}",
        raw.len()
    );
    let proxy = Proxy::new(scripted_upstream().env("SCRIPTED_TOOLS_LIST_RAW", &raw))
        .model::<by_name::Model>();
    let mut client = Client::initialized(proxy).await;

    let mut expected: Value = serde_json::from_str(&raw).expect("the listing is JSON");
    expected["tools"]
        .as_array_mut()
        .expect("tools")
        .retain(|tool| tool["name"] != "tool_1");

    for round in 0..3 {
        let line = list_line(&mut client).await;
        let answer: Value = serde_json::from_str(&line).expect("JSON");
        assert_eq!(answer["result"], expected, "round {round}");
        // The schemas are the upstream's text, escapes and spaces included, not re-encoded.
        assert!(
            line.contains(r#"{"type": "obj\u0065ct", "properties": {"x": {"type": "string", "description": "the x \u00e9 of 2"}}}"#),
            "round {round}: {}",
            &line[..400.min(line.len())]
        );
        assert!(!line.contains("tool_1\""), "round {round}");
    }
    client.close().await.expect("the proxy ends cleanly");
}

/// What `reshaping` makes of `raw`, as JSON.
fn reshaped(raw: &str, change: bool) -> Value {
    let mut expected: Value = serde_json::from_str(raw).expect("the listing is JSON");
    let tools = expected["tools"].as_array_mut().expect("tools");
    tools.retain(|tool| tool["name"] != "tool_1");
    tools.reverse();
    tools.insert(5, json!({"name": "added", "inputSchema": {}}));
    if change {
        for tool in tools.iter_mut().filter(|tool| tool["name"] == "tool_2") {
            tool["description"] = json!("changed");
        }
    }
    expected
}

#[tokio::test]
async fn a_hook_that_reorders_adds_removes_or_changes_tools_sees_it_written_on_every_list() {
    let raw = upstream_listing(300);
    for change in [false, true] {
        let proxy = Proxy::new(scripted_upstream().env("SCRIPTED_TOOLS_LIST_RAW", &raw))
            .model::<reshaping::Model>()
            .config("reshaping", json!({ "change": change }));
        let mut client = Client::initialized(proxy).await;
        let expected = reshaped(&raw, change);
        for round in 0..3 {
            let line = list_line(&mut client).await;
            let answer: Value = serde_json::from_str(&line).expect("JSON");
            assert_eq!(answer["result"], expected, "change {change}, round {round}");
            // Kept schemas are the upstream's text, whichever way the listing is written.
            assert!(
                line.contains(r#"{"type": "obj\u0065ct", "properties": {"x": {"type": "string", "description": "the x \u00e9 of 2"}}}"#),
                "change {change}, round {round}"
            );
        }
        client.close().await.expect("the proxy ends cleanly");
    }
}
