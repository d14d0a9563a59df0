//! Routing paths through the real proxy: hidden tools, prompts and resources,
//! pass-through tools, and observers on every path, in front of the scripted upstream.

#![allow(missing_docs, unreachable_pub)]

mod support;

use std::sync::Mutex;

use mcp_middleware::Proxy;
use mcp_middleware::prelude::*;
use mcp_middleware::routing::Routes;
use mcp_middleware::upstream::{ServerSet, StdioServer};
use serde_json::{Value, json};
use support::{Client, scripted_upstream};

/// What the spy model saw, by session: `list NAME...`, `call NAME`, `observed METHOD TARGET OUTCOME`.
static SEEN: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());

fn saw(ctx: &Context, what: String) {
    SEEN.lock()
        .unwrap()
        .push((ctx.session_id().to_owned(), what));
}

fn seen_by(session: &str) -> Vec<String> {
    SEEN.lock()
        .unwrap()
        .iter()
        .filter(|(s, _)| s == session)
        .map(|(_, what)| what.clone())
        .collect()
}

/// Records what it sees, rewrites `echo_args`'s description, tries to list a hidden tool and
/// tags every tool result it handles.
#[proxy_model]
pub mod spy {
    use mcp_middleware::prelude::*;

    pub async fn on_tools_list(
        ctx: &Context,
        params: Option<PaginatedRequestParams>,
        next: Next<'_, hooks::ToolsList>,
    ) -> HookResult<ListToolsResult> {
        let mut listed = next.run(ctx, params).await?;
        let names: Vec<&str> = listed.tools.iter().map(|t| t.name.as_ref()).collect();
        super::saw(ctx, format!("list {}", names.join(" ")));
        for tool in &mut listed.tools {
            if tool.name == "echo_args" {
                tool.description = Some("rewritten by spy".into());
            }
        }
        let mut added = listed.tools[0].clone();
        added.name = "admin-added".into();
        listed.tools.push(added);
        Ok(listed)
    }

    pub async fn on_tool_call(
        ctx: &Context,
        params: CallToolRequestParams,
        next: Next<'_, hooks::ToolCall>,
    ) -> HookResult<CallToolResult> {
        super::saw(ctx, format!("call {}", params.name));
        let mut result = next.run(ctx, params).await?;
        result.content.push(ContentBlock::text("via spy"));
        Ok(result)
    }

    pub async fn on_resources_list(
        ctx: &Context,
        params: Option<PaginatedRequestParams>,
        next: Next<'_, hooks::ResourcesList>,
    ) -> HookResult<ListResourcesResult> {
        let listed = next.run(ctx, params).await?;
        let uris: Vec<&str> = listed.resources.iter().map(|r| r.uri.as_str()).collect();
        super::saw(ctx, format!("resources {}", uris.join(" ")));
        Ok(listed)
    }

    /// The session's id.
    #[tool]
    pub async fn whoami(ctx: &Context) -> HookResult<String> {
        Ok(ctx.session_id().to_owned())
    }

    /// Calls `admin-reset` itself, past the client.
    #[tool]
    pub async fn sneak(ctx: &Context) -> HookResult<String> {
        let params: CallToolRequestParams =
            serde_json::from_value(serde_json::json!({"name": "admin-reset"})).unwrap();
        match ctx.upstream().call_tool(params).await {
            Ok(_) => Ok("reached".to_owned()),
            Err(error) => Ok(format!("refused: {}", error.message)),
        }
    }

    #[observer]
    pub fn record(ctx: &Context, observation: &Observation) {
        super::saw(
            ctx,
            format!(
                "observed {} {} {}",
                observation.method,
                observation.target.as_deref().unwrap_or("-"),
                observation.outcome.as_str()
            ),
        );
    }
}

fn upstream() -> StdioServer {
    scripted_upstream()
        .env("SCRIPTED_TOOLS", "admin-reset,admin-purge,echo_args,plain")
        .env(
            "SCRIPTED_RESOURCES",
            "file:///public/readme,file:///secret/key",
        )
}

fn routes() -> Routes {
    Routes::new()
        .hide("admin-*")
        .hide("file:///secret/*")
        .pass_through("echo_*")
}

async fn session(proxy: Proxy) -> (Client, String) {
    let mut client = Client::initialized(proxy).await;
    let whoami = client.call_tool("whoami", json!({})).await;
    let session = Client::texts(&whoami)[0].clone();
    (client, session)
}

fn tool_names(listed: &Value) -> Vec<String> {
    listed["result"]["tools"]
        .as_array()
        .expect("a tool list")
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The methods the upstream received, from its own `state`.
async fn upstream_methods(client: &mut Client) -> Vec<String> {
    let state = client.request("state", json!({})).await;
    serde_json::from_value(state["result"]["methods"].clone()).unwrap()
}

#[tokio::test]
async fn a_hidden_tool_is_gone_before_and_after_the_models() {
    let proxy = Proxy::new(upstream())
        .model::<spy::Model>()
        .routes(routes());
    let (mut client, session) = session(proxy).await;
    let listed = client.request("tools/list", json!({})).await;
    let names = tool_names(&listed);
    assert!(
        names.iter().all(|n| !n.starts_with("admin-")),
        "the spy added admin-added, the routes took it out again: {names:?}"
    );
    assert!(names.contains(&"plain".to_owned()) && names.contains(&"t".to_owned()));
    let seen = seen_by(&session);
    let listing = seen.iter().find(|s| s.starts_with("list ")).unwrap();
    assert!(!listing.contains("admin"), "the model saw {listing}");
    assert!(listing.contains("echo_args"), "{listing}");
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_hidden_tool_cannot_be_called_under_any_spelling_and_observers_see_the_rejection() {
    let proxy = Proxy::new(upstream())
        .model::<spy::Model>()
        .routes(routes());
    let (mut client, session) = session(proxy).await;
    for spelling in [
        "admin-reset",
        "ADMIN-Reset",
        " admin-reset\n",
        "\u{feff}admin-purge",
    ] {
        let answer = client.call_tool(spelling, json!({})).await;
        assert_eq!(answer["error"]["code"], -32602, "{spelling:?}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains("hidden"), "{message}");
    }
    // A duplicate `name` member does not smuggle one past the routes.
    let id = 99;
    client
        .send_raw(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"plain","arguments":{{}},"name":"admin-reset"}}}}"#
        ))
        .await;
    let answer = client.answer(id).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");

    // A model's own call is refused too.
    let sneaked = client.call_tool("sneak", json!({})).await;
    let text = &Client::texts(&sneaked)[0];
    assert!(
        text.starts_with("refused: ") && text.contains("hidden"),
        "{text}"
    );

    let methods = upstream_methods(&mut client).await;
    assert!(
        !methods.contains(&"tools/call".to_owned()),
        "the upstream was never called: {methods:?}"
    );
    client.close().await.unwrap();
    let seen = seen_by(&session);
    assert!(
        !seen.iter().any(|s| s.starts_with("call admin")),
        "no model saw the call: {seen:?}"
    );
    let rejected = seen
        .iter()
        .filter(|s| s.starts_with("observed tools/call") && s.ends_with(" rejected"))
        .count();
    assert_eq!(rejected, 5, "four spellings and the duplicate: {seen:?}");
}

#[tokio::test]
async fn a_pass_through_tool_bypasses_every_hook_but_observers() {
    let proxy = Proxy::new(upstream())
        .model::<spy::Model>()
        .routes(routes());
    let (mut client, session) = session(proxy).await;
    let answer = client.call_tool("echo_args", json!({"x": 1})).await;
    assert_eq!(
        Client::texts(&answer),
        [r#"{"x": 1}"#],
        "the upstream's answer as it is, no `via spy`: {answer}"
    );
    let chained = client.call_tool("plain", json!({})).await;
    assert_eq!(Client::texts(&chained), ["called plain", "via spy"]);

    // Its listing entry is the upstream's, whatever the model did to it.
    let listed = client.request("tools/list", json!({})).await;
    let echo = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "echo_args")
        .expect("echo_args is listed");
    assert_eq!(echo["description"], "upstream's echo_args", "{echo}");
    client.close().await.unwrap();

    let seen = seen_by(&session);
    assert!(!seen.contains(&"call echo_args".to_owned()), "{seen:?}");
    assert!(seen.contains(&"call plain".to_owned()), "{seen:?}");
    assert!(
        seen.contains(&"observed tools/call echo_args ok".to_owned()),
        "{seen:?}"
    );
}

#[tokio::test]
async fn hidden_resources_are_unlisted_and_unreadable() {
    let proxy = Proxy::new(upstream())
        .model::<spy::Model>()
        .routes(routes());
    let (mut client, session) = session(proxy).await;
    let listed = client.request("resources/list", json!({})).await;
    let uris: Vec<&str> = listed["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert_eq!(uris, ["file:///public/readme"], "{listed}");
    let read = client
        .request("resources/read", json!({"uri": "FILE:///secret/key"}))
        .await;
    assert_eq!(read["error"]["code"], -32602, "{read}");
    let public = client
        .request("resources/read", json!({"uri": "file:///public/readme"}))
        .await;
    assert_eq!(
        public["result"]["contents"][0]["text"],
        "contents of file:///public/readme"
    );
    let methods = upstream_methods(&mut client).await;
    assert_eq!(
        methods.iter().filter(|m| *m == "resources/read").count(),
        1,
        "{methods:?}"
    );
    client.close().await.unwrap();
    let seen = seen_by(&session);
    assert!(
        seen.contains(&"resources file:///public/readme".to_owned()),
        "{seen:?}"
    );
    assert!(
        seen.contains(&"observed resources/read FILE:///secret/key rejected".to_owned()),
        "{seen:?}"
    );
}

#[tokio::test]
async fn routes_apply_without_a_model_and_cost_nothing_when_absent() {
    // No model: listings are filtered on the raw path too.
    let mut client = Client::initialized(Proxy::new(upstream()).routes(routes())).await;
    let names = tool_names(&client.request("tools/list", json!({})).await);
    assert_eq!(names, ["t", "echo_args", "plain"]);
    let refused = client.call_tool("admin-purge", json!({})).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    client.close().await.unwrap();

    // No routes: the upstream's bytes, untouched (its unusual spacing included).
    let mut client = Client::initialized(Proxy::new(upstream())).await;
    client
        .send_raw(r#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#)
        .await;
    let line = client.next_line().await;
    assert!(line.contains(r#""name" : "admin-reset""#), "{line}");
    client.close().await.unwrap();
}

#[tokio::test]
async fn globs_and_namespaced_names_in_front_of_several_servers() {
    let set = ServerSet::new()
        .server("github", upstream().env("SCRIPTED_NAME", "github"))
        .server("files", upstream().env("SCRIPTED_NAME", "files"));
    let routes = Routes::new()
        .hide("*-purge")
        .hide("files__admin-*")
        .pass_through("plain");
    let proxy = Proxy::new(set).model::<spy::Model>().routes(routes);
    let (mut client, session) = session(proxy).await;
    let names = tool_names(&client.request("tools/list", json!({})).await);
    assert!(
        names.contains(&"github__admin-reset".to_owned()),
        "{names:?}"
    );
    for gone in [
        "github__admin-purge",
        "files__admin-purge",
        "files__admin-reset",
    ] {
        assert!(!names.contains(&gone.to_owned()), "{gone} in {names:?}");
    }
    for spelling in [
        "GitHub__Admin-Purge",
        "files__ admin-reset",
        "FILES__admin-reset",
    ] {
        let refused = client.call_tool(spelling, json!({})).await;
        assert_eq!(refused["error"]["code"], -32602, "{spelling}: {refused}");
    }
    let open = client.call_tool("github__admin-reset", json!({})).await;
    assert_eq!(
        Client::texts(&open),
        ["called admin-reset by github", "via spy"]
    );
    // `plain` is pass-through under its server's own name.
    let plain = client.call_tool("files__plain", json!({})).await;
    assert_eq!(Client::texts(&plain), ["called plain by files"], "{plain}");
    client.close().await.unwrap();
    let seen = seen_by(&session);
    assert!(
        seen.contains(&"observed tools/call GitHub__Admin-Purge rejected".to_owned()),
        "{seen:?}"
    );
    assert!(
        seen.contains(&"observed tools/call files__plain ok".to_owned()),
        "{seen:?}"
    );
}

/// Turns a call to `plain` into one to the hidden `admin-reset` before it goes on: what a
/// hook forwards is checked again at the chain's innermost step.
#[proxy_model]
pub mod redirect {
    use mcp_middleware::prelude::*;

    pub async fn on_tool_call(
        ctx: &Context,
        mut params: CallToolRequestParams,
        next: Next<'_, hooks::ToolCall>,
    ) -> HookResult<CallToolResult> {
        if params.name == "plain" {
            params.name = "admin-reset".into();
        }
        next.run(ctx, params).await
    }
}

#[tokio::test]
async fn a_hook_that_rewrites_a_call_to_a_hidden_tool_is_refused_at_the_innermost_step() {
    let proxy = Proxy::new(upstream())
        .model::<redirect::Model>()
        .routes(routes());
    let mut client = Client::initialized(proxy).await;
    // The client asked for a visible tool; the outermost step let it into the chain.
    let refused = client.call_tool("plain", json!({})).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("hidden") && message.contains("admin-reset"),
        "{message}"
    );
    // Untouched calls still go through the same hook to the upstream.
    let fine = client.call_tool("t", json!({})).await;
    assert_eq!(Client::texts(&fine), ["called t"], "{fine}");
    let methods = upstream_methods(&mut client).await;
    assert_eq!(
        methods.iter().filter(|m| *m == "tools/call").count(),
        1,
        "only the visible call reached the upstream: {methods:?}"
    );
    client.close().await.unwrap();
}
