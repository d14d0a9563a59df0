//! A typed `tools/list` hook in front of a large listing (issue 13 item 5): what the client gets
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
