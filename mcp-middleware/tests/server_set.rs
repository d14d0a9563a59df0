//! Several servers served as one: namespaced tools, routing, a server that does not
//! start, a server that dies and comes back, `${env:VAR}` resolved only at start.

#![allow(missing_docs, unreachable_pub)]

mod support;

use mcp_middleware::Proxy;
use mcp_middleware::upstream::{ServerSet, StdioServer};
use serde_json::{Value, json};
use support::{Client, scripted_upstream};

fn named(name: &str) -> StdioServer {
    scripted_upstream().env("SCRIPTED_NAME", name)
}

fn tool_names(listed: &Value) -> Vec<String> {
    listed["result"]["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn tools_are_namespaced_and_calls_reach_their_server() {
    let set = ServerSet::new()
        .server("alpha", named("alpha"))
        .server("beta", named("beta"));
    let mut client = Client::initialized(Proxy::new(set)).await;
    let listed = client.request("tools/list", json!({})).await;
    assert_eq!(tool_names(&listed), ["alpha__t", "beta__t"], "{listed}");
    let tool = &listed["result"]["tools"][0];
    assert_eq!(
        tool["execution"],
        json!({"taskSupport": "optional"}),
        "members pass through"
    );

    let answer = client.call_tool("beta__t", json!({})).await;
    assert_eq!(Client::texts(&answer), ["called t by beta"], "{answer}");
    let answer = client.call_tool("alpha__t", json!({})).await;
    assert_eq!(Client::texts(&answer), ["called t by alpha"], "{answer}");

    let unknown = client.call_tool("gamma__t", json!({})).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let message = unknown["error"]["message"].as_str().unwrap();
    assert!(message.contains("alpha, beta"), "{message}");
    client.close().await.unwrap();
}

#[tokio::test]
async fn the_separator_is_configurable_and_initialize_merges_the_servers() {
    let set = ServerSet::new()
        .server("a", named("a"))
        .server("b", named("b"))
        .separator(".");
    let mut client = Client::connect(Proxy::new(set));
    let init = client
        .request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
        )
        .await;
    let result = &init["result"];
    assert_eq!(result["protocolVersion"], "2025-11-25");
    assert_eq!(
        result["serverInfo"]["name"],
        "scripted-upstream + scripted-upstream"
    );
    assert!(result["capabilities"]["tools"].is_object(), "{result}");
    assert!(
        result["instructions"]
            .as_str()
            .unwrap()
            .contains("Server `a`"),
        "{result}"
    );
    client.notify("notifications/initialized", None).await;
    let listed = client.request("tools/list", json!({})).await;
    assert_eq!(tool_names(&listed), ["a.t", "b.t"]);
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_server_that_does_not_start_is_reported_and_the_others_work() {
    let status =
        std::env::temp_dir().join(format!("server-set-status-{}.json", std::process::id()));
    let set = ServerSet::new()
        .server("broken", StdioServer::new("/nonexistent/mcp-server"))
        .server("good", named("good"))
        .status_file(&status);
    let mut client = Client::initialized(Proxy::new(set)).await;
    let listed = client.request("tools/list", json!({})).await;
    assert_eq!(tool_names(&listed), ["good__t"], "{listed}");
    let answer = client.call_tool("good__t", json!({})).await;
    assert_eq!(Client::texts(&answer), ["called t by good"]);
    let broken = client.call_tool("broken__t", json!({})).await;
    assert_eq!(broken["error"]["code"], -32001, "{broken}");
    assert!(
        broken["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`broken`"),
        "{broken}"
    );
    let states: Value = serde_json::from_str(&std::fs::read_to_string(&status).unwrap()).unwrap();
    assert_eq!(states[0]["name"], "broken");
    assert_eq!(states[0]["state"], "down");
    assert!(
        states[0]["reason"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/mcp-server")
    );
    assert_eq!(states[1]["state"], "running");
    client.close().await.unwrap();
    let _ = std::fs::remove_file(status);
}

#[tokio::test]
async fn a_server_that_dies_fails_its_call_and_starts_again_on_the_next() {
    let set = ServerSet::new()
        .server("a", named("a"))
        .server("b", named("b"));
    let mut client = Client::initialized(Proxy::new(set)).await;
    let died = client.call_tool("b__die", json!({})).await;
    assert_eq!(died["error"]["code"], -32001, "{died}");
    let other = client.call_tool("a__t", json!({})).await;
    assert_eq!(
        Client::texts(&other),
        ["called t by a"],
        "the other server is unharmed"
    );
    let again = client.call_tool("b__t", json!({})).await;
    assert_eq!(
        Client::texts(&again),
        ["called t by b"],
        "b started again: {again}"
    );
    client.close().await.unwrap();
}

#[tokio::test]
async fn env_references_are_resolved_at_start_and_shown_as_written() {
    let server = scripted_upstream().env("SCRIPTED_NAME", "${env:HOME}");
    assert!(server.to_string().starts_with("python3 "));
    let set = ServerSet::new()
        .server("home", server)
        .server("plain", named("plain"));
    // Descriptions show the reference, never the value.
    assert!(format!("{set:?}").contains("${env:HOME}"));
    let mut client = Client::initialized(Proxy::new(set)).await;
    let answer = client.call_tool("home__t", json!({})).await;
    let home = std::env::var("HOME").unwrap_or_default();
    assert_eq!(Client::texts(&answer), [format!("called t by {home}")]);

    let missing = ServerSet::new()
        .server(
            "x",
            scripted_upstream().env("SCRIPTED_NAME", "${env:MCP_MIDDLEWARE_SURELY_UNSET}"),
        )
        .server("plain", named("plain"));
    let mut client2 = Client::initialized(Proxy::new(missing)).await;
    let refused = client2.call_tool("x__t", json!({})).await;
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("MCP_MIDDLEWARE_SURELY_UNSET"), "{message}");
    client.close().await.unwrap();
    client2.close().await.unwrap();
}

/// A scripted server with `count` more tools than `t`, listed `page` a page.
fn paging(name: &str, count: usize, page: usize) -> StdioServer {
    named(name)
        .env("SCRIPTED_TOOL_COUNT", count.to_string())
        .env("SCRIPTED_PAGE_SIZE", page.to_string())
}

/// Every page of `method` from the first, each page's item names and its cursor (if any).
async fn walk(client: &mut Client, method: &str) -> Vec<(Vec<String>, Option<String>)> {
    let member = match method {
        "tools/list" => "tools",
        "prompts/list" => "prompts",
        _ => "resources",
    };
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let params = match &cursor {
            Some(cursor) => json!({"cursor": cursor}),
            None => json!({}),
        };
        let listed = client.request(method, params).await;
        let names = listed["result"][member]
            .as_array()
            .unwrap_or_else(|| panic!("a page: {listed}"))
            .iter()
            .map(|item| item["name"].as_str().unwrap_or_default().to_owned())
            .collect();
        cursor = listed["result"]["nextCursor"].as_str().map(str::to_owned);
        pages.push((names, cursor.clone()));
        assert!(pages.len() < 100, "the pages never end: {pages:?}");
        if cursor.is_none() {
            return pages;
        }
    }
}

fn expected(server: &str, count: usize) -> Vec<String> {
    std::iter::once(format!("{server}__t"))
        .chain((0..count).map(|i| format!("{server}__tool-{i}")))
        .collect()
}

#[tokio::test]
async fn merged_tools_page_server_after_server_and_every_tool_comes_once() {
    // alpha: 1 + 24 tools, 10 a page; beta: 1 + 9, 4 a page. Pages end at 12 items or more.
    let set = ServerSet::new()
        .server("alpha", paging("alpha", 24, 10))
        .server("beta", paging("beta", 9, 4))
        .page_size(12);
    let mut client = Client::initialized(Proxy::new(set)).await;
    let pages = walk(&mut client, "tools/list").await;
    let sizes: Vec<usize> = pages.iter().map(|(names, _)| names.len()).collect();
    // alpha 10+10 | alpha 5 + beta 4+4 | beta 2: whole upstream pages, across servers.
    assert_eq!(sizes, [20, 13, 2], "{pages:?}");
    let all: Vec<String> = pages.into_iter().flat_map(|(names, _)| names).collect();
    let mut want = expected("alpha", 24);
    want.extend(expected("beta", 9));
    assert_eq!(all, want, "every tool once, in the servers' order");

    // A tool from a later page is called on its server.
    let answer = client.call_tool("beta__tool-8", json!({})).await;
    assert_eq!(
        Client::texts(&answer),
        ["called tool-8 by beta"],
        "{answer}"
    );
    client.close().await.unwrap();
}

#[tokio::test]
async fn with_page_size_zero_each_page_is_one_upstream_page() {
    let set = ServerSet::new()
        .server("alpha", paging("alpha", 4, 2))
        .server("beta", named("beta"))
        .page_size(0);
    let mut client = Client::initialized(Proxy::new(set)).await;
    let pages = walk(&mut client, "tools/list").await;
    let names: Vec<Vec<String>> = pages.into_iter().map(|(names, _)| names).collect();
    assert_eq!(
        names,
        [
            vec!["alpha__t", "alpha__tool-0"],
            vec!["alpha__tool-1", "alpha__tool-2"],
            vec!["alpha__tool-3"],
            vec!["beta__t"],
        ]
    );
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_forged_or_misplaced_cursor_is_refused_and_never_reaches_a_server() {
    let set = ServerSet::new()
        .server("alpha", paging("alpha", 4, 2))
        .server("beta", paging("beta", 4, 2))
        .page_size(0);
    let mut client = Client::initialized(Proxy::new(set)).await;
    let first = client.request("tools/list", json!({})).await;
    let cursor = first["result"]["nextCursor"].as_str().unwrap().to_owned();
    assert!(
        !cursor.contains("page-"),
        "the server's cursor is not shown as it is: {cursor}"
    );

    // The server's own cursor, one made up, the proxy's with a byte changed, not a string.
    let mut changed = cursor.clone().into_bytes();
    let last = changed.len() - 3;
    changed[last] = if changed[last] == b'A' { b'B' } else { b'A' };
    let changed = String::from_utf8(changed).unwrap();
    for bad in [
        json!("page-2"),
        json!("eyJzIjoiYmV0YSJ9"),
        json!(changed),
        json!(7),
    ] {
        let refused = client.request("tools/list", json!({"cursor": bad})).await;
        assert_eq!(refused["error"]["code"], -32602, "{bad}: {refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(message.contains("invalid cursor"), "{message}");
        if let Some(text) = bad.as_str() {
            assert!(message.contains(&text[..6]), "names the cursor: {message}");
        }
    }
    // A tools/list cursor is not a prompts/list one.
    let moved = client
        .request("prompts/list", json!({"cursor": cursor}))
        .await;
    assert_eq!(moved["error"]["code"], -32602, "{moved}");

    // The real one still works, and no server ever saw a cursor it did not hand out.
    let second = client
        .request("tools/list", json!({"cursor": cursor}))
        .await;
    assert_eq!(
        tool_names(&second),
        ["alpha__tool-1", "alpha__tool-2"],
        "{second}"
    );
    for server in ["alpha", "beta"] {
        let state = client
            .request("state", json!({"name": format!("{server}__state")}))
            .await;
        assert_eq!(
            state["result"]["bad_cursors"],
            json!([]),
            "{server}: {state}"
        );
    }
    client.close().await.unwrap();
}

#[tokio::test]
async fn an_unknown_method_goes_where_its_params_say_or_is_refused() {
    let set = ServerSet::new()
        .server(
            "alpha",
            named("alpha").env("SCRIPTED_RESOURCES", "file:///a/one"),
        )
        .server(
            "beta",
            named("beta").env("SCRIPTED_RESOURCES", "file:///b/two"),
        );
    let mut client = Client::initialized(Proxy::new(set)).await;

    // No name or URI that picks a server: refused, naming the method and the servers.
    let refused = client.request("custom/echo", json!({"x": 1})).await;
    assert_eq!(refused["error"]["code"], -32601, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("`custom/echo`") && message.contains("alpha, beta"),
        "{message}"
    );

    // A prefixed name: that server, the prefix removed.
    let echoed = client
        .request("custom/echo", json!({"name": "beta__thing", "x": 1}))
        .await;
    assert_eq!(
        echoed["result"]["echo"],
        json!({"name": "thing", "x": 1}),
        "{echoed}"
    );
    let beta = client.request("state", json!({"name": "beta__x"})).await;
    let alpha = client.request("state", json!({"name": "alpha__x"})).await;
    let (beta_pid, alpha_pid) = (&beta["result"]["pid"], &alpha["result"]["pid"]);
    assert!(beta_pid.is_number() && alpha_pid.is_number() && beta_pid != alpha_pid);

    // A URI a server listed: that server.
    let resources = walk(&mut client, "resources/list").await;
    assert_eq!(resources.len(), 1, "{resources:?}");
    let by_uri = client
        .request("state", json!({"uri": "file:///b/two"}))
        .await;
    assert_eq!(&by_uri["result"]["pid"], beta_pid, "{by_uri}");
    let unlisted = client
        .request("state", json!({"uri": "file:///c/three"}))
        .await;
    assert_eq!(unlisted["error"]["code"], -32601, "{unlisted}");
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_vendor_method_cannot_reach_what_routes_hide() {
    let set = ServerSet::new().server("alpha", named("alpha")).server(
        "beta",
        named("beta").env("SCRIPTED_RESOURCES", "file:///b/secret"),
    );
    let routes = mcp_middleware::routing::Routes::new()
        .hide("beta__secret*")
        .hide("file:///b/*");
    let mut client = Client::initialized(Proxy::new(set).routes(routes)).await;

    for params in [
        json!({"name": "beta__secret"}),
        json!({"name": "beta__secret_two", "x": 1}),
        json!({"uri": "file:///b/secret"}),
        json!({"uri": "file:///b/./x/../secret"}),
    ] {
        let refused = client.request("custom/echo", params.clone()).await;
        assert_eq!(refused["error"]["code"], -32602, "{params}: {refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(message.contains("hidden"), "{message}");
    }
    // What is not hidden still goes where its params say.
    let echoed = client
        .request("custom/echo", json!({"name": "beta__thing"}))
        .await;
    assert_eq!(
        echoed["result"]["echo"],
        json!({"name": "thing"}),
        "{echoed}"
    );
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_restarted_server_gets_the_handshake_log_level_and_its_subscriptions_again() {
    let set = ServerSet::new()
        .server("a", named("a").env("SCRIPTED_RESOURCES", "file:///a/one"))
        .server("b", named("b").env("SCRIPTED_RESOURCES", "file:///b/two"));
    let mut client = Client::initialized(Proxy::new(set)).await;
    let level = client
        .request("logging/setLevel", json!({"level": "debug"}))
        .await;
    assert!(level["result"].is_object(), "{level}");
    // Listed first, so the set knows which server each resource belongs to.
    let resources = walk(&mut client, "resources/list").await;
    assert_eq!(resources.len(), 1, "{resources:?}");
    for uri in ["file:///a/one", "file:///b/two"] {
        let subscribed = client
            .request("resources/subscribe", json!({"uri": uri}))
            .await;
        assert!(subscribed["result"].is_object(), "{uri}: {subscribed}");
    }
    let before = client.request("state", json!({"name": "b__x"})).await;
    let died = client.call_tool("b__die", json!({})).await;
    assert_eq!(died["error"]["code"], -32001, "{died}");

    // The next request for b starts it again; the replay goes first.
    let after = client.request("state", json!({"name": "b__x"})).await;
    let state = &after["result"];
    assert_ne!(
        state["pid"], before["result"]["pid"],
        "a new process: {after}"
    );
    assert_eq!(state["initializes"], 1, "{after}");
    assert_eq!(state["initialized"], 1, "{after}");
    assert_eq!(state["log_levels"], json!(["debug"]), "{after}");
    assert_eq!(
        state["subscriptions"],
        json!(["file:///b/two"]),
        "b's own subscription, not a's: {after}"
    );
    client.close().await.unwrap();
}
