//! The gate model through the real proxy, in front of the scripted upstream (a child
//! process over stdio), with a project's prompts.

#![allow(missing_docs)]

#[path = "../../mcp-middleware/tests/support/mod.rs"]
mod support;

use mcp_middleware::Proxy;
use mcp_middleware::project::{Project, ProjectPrompt};
use mcp_middleware_models::gate;
use serde_json::{Value, json};
use support::{Client, scripted_upstream};

fn project() -> Project {
    Project::new("demo")
        .prompt(
            ProjectPrompt::new(
                "deploy-checklist",
                "Before deploying: run the migrations dry.",
            )
            .tags(["deploy", "database"]),
        )
        .prompt(ProjectPrompt::new(
            "style-guide",
            "Write short sentences. Name things for what they are.",
        ))
        .prompt(ProjectPrompt::new("big-handbook", "deploy ".repeat(400)).tags(["deploy"]))
}

fn proxy() -> Proxy {
    Proxy::new(scripted_upstream())
        .model::<gate::Model>()
        .project(project())
}

fn names(listed: &Value) -> Vec<&str> {
    listed["result"]["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default()
}

async fn upstream_calls(client: &mut Client) -> usize {
    let state = client.request("state", json!({})).await;
    state["result"]["methods"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| *m == "tools/call").count())
}

#[tokio::test]
async fn a_session_is_gated_until_begin_session_then_open() {
    let mut client = Client::initialized(proxy()).await;
    let listed = client.request("tools/list", json!({})).await;
    assert_eq!(names(&listed), ["begin_session"], "{listed}");

    let refused = client.call_tool("t", json!({})).await;
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    let text = Client::texts(&refused).join("");
    assert!(text.contains("begin_session"), "{text}");
    assert_eq!(
        upstream_calls(&mut client).await,
        0,
        "the upstream was not called"
    );

    let opened = client
        .call_tool(
            "begin_session",
            json!({"intent": "Deploy the new database schema", "tags": ["deploy"]}),
        )
        .await;
    let text = Client::texts(&opened).join("");
    assert!(text.contains("## deploy-checklist"), "{text}");
    assert!(text.contains("run the migrations dry"), "{text}");
    assert!(
        text.contains("## big-handbook"),
        "2.8 KB fits the default 8 KiB budget: {text}"
    );
    assert!(
        client
            .received
            .iter()
            .any(|m| m["method"] == "notifications/tools/list_changed"),
        "{:?}",
        client.received
    );

    let listed = client.request("tools/list", json!({})).await;
    assert_eq!(names(&listed), ["t", "read_prompts"], "{listed}");
    let called = client.call_tool("t", json!({})).await;
    assert_eq!(Client::texts(&called), ["called t"]);
    assert_eq!(upstream_calls(&mut client).await, 1);

    let read = client
        .call_tool("read_prompts", json!({"names": ["style-guide"]}))
        .await;
    assert!(
        Client::texts(&read)[0].contains("Write short sentences"),
        "{read}"
    );
    let missing = client
        .call_tool("read_prompts", json!({"names": ["nope"]}))
        .await;
    assert_eq!(missing["result"]["isError"], true);
    assert!(
        Client::texts(&missing)[0].contains("deploy-checklist"),
        "{missing}"
    );
    client.close().await.unwrap();
}

#[tokio::test]
async fn the_budget_keeps_the_best_prompts_that_fit_and_names_the_rest() {
    let mut client = Client::initialized(proxy().config(
        "gate",
        json!({"promptBudgetBytes": 100, "alwaysVisible": ["t"]}),
    ))
    .await;
    let listed = client.request("tools/list", json!({})).await;
    assert_eq!(
        names(&listed),
        ["t", "begin_session"],
        "always visible: {listed}"
    );
    let called = client.call_tool("t", json!({})).await;
    assert_eq!(
        Client::texts(&called),
        ["called t"],
        "always visible is callable"
    );

    let opened = client
        .call_tool(
            "begin_session",
            json!({"intent": "deploy", "tags": ["deploy"]}),
        )
        .await;
    let text = Client::texts(&opened).join("");
    assert!(text.contains("## deploy-checklist"), "{text}");
    assert!(!text.contains("## big-handbook"), "{text}");
    assert!(
        text.contains("big-handbook") && text.contains("style-guide"),
        "the rest are named: {text}"
    );
    client.close().await.unwrap();
}

#[tokio::test]
async fn two_concurrent_sessions_gate_independently() {
    let mut first = Client::initialized(proxy()).await;
    let mut second = Client::initialized(proxy()).await;
    first
        .call_tool("begin_session", json!({"intent": "write the style guide"}))
        .await;
    let open = first.request("tools/list", json!({})).await;
    let gated = second.request("tools/list", json!({})).await;
    assert_eq!(names(&open), ["t", "read_prompts"]);
    assert_eq!(names(&gated), ["begin_session"]);
    let refused = second.call_tool("t", json!({})).await;
    assert_eq!(refused["result"]["isError"], true);
    first.close().await.unwrap();
    second.close().await.unwrap();
}

#[tokio::test]
async fn a_bad_gate_config_stops_the_start_naming_the_field() {
    let err = Client::connect(proxy().config("gate", json!({"promptBudgetBytes": "lots"})))
        .close()
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("`gate`") && text.contains("promptBudgetBytes"),
        "{text}"
    );
}
