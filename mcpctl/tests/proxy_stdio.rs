//! Focused end-to-end tests of `mcpctl proxy` on stdio: a real client over pipes, the real
//! binary, and a scripted upstream process that can do what real servers rarely do on demand
//! (custom methods, dying, hanging, garbage). The official SDK and reference server interop
//! suite lives in `tests/interop`.

mod support;

use serde_json::{Value, json};
use support::Client;

const ENVELOPE: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/clientInfo":{"name":"stateless-test","version":"1"}}"#;

fn envelope() -> Value {
    serde_json::from_str(ENVELOPE).expect("envelope is JSON")
}

fn state(client: &mut Client, id: i64) -> Value {
    client.request(json!(id), "state", json!({}))["result"].clone()
}

#[test]
fn unknown_methods_and_custom_notifications_pass_both_ways() {
    let mut client = Client::scripted(&[], &[]);
    client.initialize();

    let params = json!({"nested": {"list": [1, "two", null], "unicode": "żółw 🐢"}, "n": 1.5e300});
    let response = client.request(json!("custom-1"), "custom/echo", params.clone());
    assert_eq!(response["result"]["echo"], params);

    client.notify("notifications/custom", json!({"hello": "upstream"}));
    let echoed = client.recv();
    assert_eq!(echoed["method"], "notifications/custom_echo");
    assert_eq!(echoed["params"], json!({"hello": "upstream"}));

    // A request the upstream sends to the client, with a method nobody knows.
    client.send(&json!({"jsonrpc": "2.0", "id": 77, "method": "ask", "params": {"q": "colour?"}}));
    let question = client.recv();
    assert_eq!(question["method"], "custom/question");
    assert_eq!(question["params"], json!({"q": "colour?"}));
    let question_id = question["id"].clone();
    assert!(
        question_id.is_number(),
        "the proxy gives upstream requests its own ids: {question}"
    );
    client.send(&json!({"jsonrpc": "2.0", "id": question_id, "result": {"colour": "green"}}));
    let answer = client.request_response(json!(77));
    assert_eq!(answer["result"]["answer"], json!({"colour": "green"}));
}

#[test]
fn responses_keep_every_byte_but_the_id() {
    let mut client = Client::scripted(&[], &[]);
    client.initialize();
    client.send_line(r#"{"jsonrpc":"2.0","id":"raw","method":"custom/echo","params":{"a":[1,2]}}"#);
    let line = client.response_line(&json!("raw"));
    // The scripted upstream writes with `, ` and ` : ` separators and an unknown member: the proxy
    // must hand that over exactly, with only the id swapped back.
    assert_eq!(
        line,
        r#"{"jsonrpc" : "2.0", "id" : "raw", "result" : {"echo" : {"a" : [1, 2]}}, "x-extra" : {"kept" : true}}"#
    );

    let init = client.request(
        json!(2),
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    assert_eq!(
        init["result"]["capabilities"]["futureCapability"],
        json!({"x": 1})
    );
    let tools = client.request(json!(3), "tools/list", json!({}));
    assert_eq!(
        tools["result"]["tools"][0]["execution"],
        json!({"taskSupport": "optional"})
    );
}

#[test]
fn progress_tokens_are_remapped_per_hop_and_restored() {
    let mut client = Client::scripted(&[], &[]);
    client.initialize();
    let response = client.request(
        json!(5),
        "progress",
        json!({"_meta": {"progressToken": "client-token"}}),
    );
    let progress: Vec<&Value> = client
        .inbox
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    let steps: Vec<i64> = progress
        .iter()
        .map(|m| m["params"]["progress"].as_i64().unwrap_or(-1))
        .collect();
    assert_eq!(
        steps,
        vec![1, 2, 3],
        "progress relayed in order: {progress:?}"
    );
    assert!(
        progress
            .iter()
            .all(|m| m["params"]["progressToken"] == "client-token")
    );
    let upstream_token = &response["result"]["token_seen"];
    assert_ne!(
        upstream_token, "client-token",
        "the upstream sees the proxy's own token"
    );
}

#[test]
fn cancellation_reaches_the_upstream_with_its_id_and_no_late_reply_arrives() {
    let mut client = Client::scripted(&[], &[]);
    client.initialize();
    client.send(&json!({"jsonrpc": "2.0", "id": "long", "method": "slow", "params": {}}));
    client.notify(
        "notifications/cancelled",
        json!({"requestId": "long", "reason": "user pressed stop"}),
    );
    let seen = state(&mut client, 6);
    let cancelled = seen["cancelled"].as_array().cloned().unwrap_or_default();
    assert_eq!(cancelled.len(), 1, "{seen}");
    assert!(
        cancelled[0].is_number(),
        "cancelled with the upstream's id, not the client's: {seen}"
    );
    assert!(
        client
            .inbox
            .iter()
            .all(|m| m.get("id") != Some(&json!("long"))),
        "no reply to a cancelled request: {:?}",
        client.inbox
    );
    // The session goes on.
    let echo = client.request(json!(7), "custom/echo", json!({"after": "cancel"}));
    assert_eq!(echo["result"]["echo"], json!({"after": "cancel"}));
}

#[test]
fn a_dying_upstream_fails_its_requests_and_restarts_with_the_session_state() {
    let mut client = Client::scripted(&["--log", "debug"], &[]);
    client.initialize();
    client.request(json!(1), "logging/setLevel", json!({"level": "debug"}));
    client.request(json!(2), "resources/subscribe", json!({"uri": "demo://a"}));
    let before = state(&mut client, 3);

    client.send(&json!({"jsonrpc": "2.0", "id": "pending", "method": "slow", "params": {}}));
    let died = client.request(json!(4), "die", json!({}));
    assert_eq!(died["error"]["code"], -32001, "{died}");
    let message = died["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("exited with status 3"), "{message}");
    let pending = client.response_line(&json!("pending"));
    assert!(
        pending.contains("-32001"),
        "the other pending request fails too: {pending}"
    );

    let after = state(&mut client, 5);
    assert_ne!(after["pid"], before["pid"], "a new upstream process");
    assert_eq!(
        after["initializes"], 1,
        "the client's initialize was replayed: {after}"
    );
    assert_eq!(after["initialized"], 1);
    assert_eq!(after["log_levels"], json!(["debug"]));
    assert_eq!(after["subscriptions"], json!(["demo://a"]));
    // With debug logging on, stdout still carried only protocol (every line parsed as JSON-RPC).
    assert!(
        client.stderr().contains("restarting the upstream"),
        "{}",
        client.stderr()
    );
}

#[test]
fn malformed_input_gets_a_clear_error_and_the_session_goes_on() {
    let mut client = Client::scripted(&["--max-message-bytes", "4096"], &[]);
    client.initialize();

    client.send_line("{this is not json");
    let parse = client.recv();
    assert_eq!(parse["error"]["code"], -32700);
    assert_eq!(parse["id"], Value::Null);
    assert!(
        parse["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("line 1 column 2"),
        "{parse}"
    );

    // A well-formed envelope around a broken payload (found by fuzzing): refused here, as a
    // server would refuse it, instead of reaching the upstream.
    client.send_line(r#"{"jsonrpc":"2.0","id":7,"method":"custom/echo","params":{"a" 1}}"#);
    let payload = client.recv();
    assert_eq!(payload["error"]["code"], -32700, "{payload}");
    assert_eq!(payload["id"], Value::Null);

    client.send_line(r#"{"jsonrpc":"2.0","id":{"no":1},"method":"custom/echo"}"#);
    assert_eq!(client.recv()["error"]["code"], -32600);
    client.send_line(r#"{"jsonrpc":"2.0","id":8,"method":42}"#);
    assert_eq!(client.recv()["error"]["code"], -32600);
    client.send_line(r#"{"jsonrpc":"2.0","id":9}"#);
    let shape = client.recv();
    assert_eq!(
        (shape["id"].clone(), shape["error"]["code"].clone()),
        (json!(9), json!(-32600))
    );

    client.send_line(&format!(
        r#"{{"jsonrpc":"2.0","id":10,"method":"custom/echo","params":{{"pad":"{}"}}}}"#,
        "x".repeat(5000)
    ));
    let big = client.recv();
    assert_eq!(big["error"]["code"], -32600);
    assert!(
        big["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("4096"),
        "{big}"
    );

    let echo = client.request(json!(11), "custom/echo", json!({"still": "here"}));
    assert_eq!(echo["result"]["echo"], json!({"still": "here"}));
}

#[test]
fn garbage_from_the_upstream_is_dropped_and_the_answer_still_arrives() {
    let mut client = Client::scripted(&[], &[]);
    client.initialize();
    let response = client.request(json!(1), "garbage", json!({}));
    assert_eq!(response["result"], json!({}));

    // An error the upstream could not tie to a request reaches the client as it is.
    let answered = client.request(json!(2), "null_error", json!({}));
    assert_eq!(answered["result"], json!({}));
    let orphan = client
        .inbox
        .iter()
        .find(|m| m.get("error").is_some())
        .cloned()
        .unwrap_or_default();
    assert_eq!(orphan["id"], Value::Null, "{:?}", client.inbox);
    assert_eq!(orphan["error"]["message"], "Parse error (scripted)");

    // The log line may trail the answer on stderr: read it once the proxy has exited.
    let (_, stderr) = client.close_with_stderr();
    assert!(
        stderr.contains("malformed message from the upstream"),
        "{stderr}"
    );
}

#[test]
fn a_hanging_upstream_times_out_with_an_error_and_a_cancellation() {
    // 3 s, not 1: the timeout covers every request, and on a loaded machine the Python
    // upstream can take longer than a second to answer `initialize` or the state query, which
    // would then be cancelled too.
    let mut client = Client::scripted(&["--request-timeout", "3"], &[]);
    client.initialize();
    let response = client.request(json!("hang"), "slow", json!({}));
    assert_eq!(response["error"]["code"], -32002, "{response}");
    let seen = state(&mut client, 2);
    assert_eq!(
        seen["cancelled"].as_array().map(Vec::len),
        Some(1),
        "{seen}"
    );
}

#[test]
fn big_results_pass_whole() {
    let mut client = Client::scripted(&[], &[]);
    client.initialize();
    let response = client.request(json!(1), "big", json!({"size": 3_000_000}));
    assert_eq!(
        response["result"]["text"].as_str().map(str::len),
        Some(3_000_000)
    );
}

#[test]
fn a_stateless_client_is_bridged_to_a_handshake_only_upstream() {
    let mut client = Client::scripted(&[], &[]);
    let mut meta = envelope();
    meta["io.modelcontextprotocol/logLevel"] = json!("info");
    meta["progressToken"] = json!("p1");
    let tools = client.request(json!(1), "tools/list", json!({"_meta": meta}));
    let result = &tools["result"];
    assert_eq!(result["resultType"], "complete", "{tools}");
    assert_eq!(
        (result["ttlMs"].clone(), result["cacheScope"].clone()),
        (json!(0), json!("private"))
    );
    assert_eq!(result["tools"][0]["name"], "t");

    let discover = client.request(json!(2), "server/discover", json!({"_meta": envelope()}));
    let discover = &discover["result"];
    assert_eq!(discover["supportedVersions"], json!(["2026-07-28"]));
    assert_eq!(
        discover["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "scripted-upstream"
    );
    assert_eq!(
        discover["capabilities"]["experimental"],
        json!({"scripted": {"v": 1}})
    );

    let call = client.request(
        json!(3),
        "tools/call",
        json!({"name": "x", "_meta": envelope()}),
    );
    assert_eq!(call["result"]["resultType"], "complete");
    assert_eq!(call["result"]["content"][0]["text"], "called x");
    // The upstream logs every call; a 2026-07-28 client gets logs only for requests that ask.
    let logs = |client: &Client| {
        client
            .inbox
            .iter()
            .filter(|m| m["method"] == "notifications/message")
            .count()
    };
    assert_eq!(logs(&client), 0, "{:?}", client.inbox);
    let mut asking = envelope();
    asking["io.modelcontextprotocol/logLevel"] = json!("info");
    client.request(
        json!(31),
        "tools/call",
        json!({"name": "x", "_meta": asking}),
    );
    assert_eq!(logs(&client), 1, "{:?}", client.inbox);
    let mut strict = envelope();
    strict["io.modelcontextprotocol/logLevel"] = json!("error");
    client.request(
        json!(32),
        "tools/call",
        json!({"name": "x", "_meta": strict}),
    );
    assert_eq!(
        logs(&client),
        1,
        "an info message is below `error`: {:?}",
        client.inbox
    );

    let seen = client.request(json!(4), "state", json!({"_meta": envelope()}))["result"].clone();
    assert_eq!(
        seen["initializes"], 1,
        "the proxy initialized the upstream once: {seen}"
    );
    assert_eq!(seen["initialized"], 1);
    assert_eq!(
        seen["log_levels"],
        json!(["info"]),
        "the envelope's logLevel became logging/setLevel"
    );
    // The first request the upstream saw is the proxy's probe, which carries the envelope on
    // purpose; none after it does.
    let metas = seen["metas"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        metas[0]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert!(
        metas[1..].iter().all(|m| m
            .as_object()
            .is_some_and(|m| m.keys().all(|k| !k.starts_with("io.modelcontextprotocol/")))),
        "the envelope is not sent to a handshake upstream: {metas:?}"
    );
    let methods = seen["methods"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        methods[..2],
        [json!("server/discover"), json!("initialize")],
        "{methods:?}"
    );
}

#[test]
fn a_bridged_client_answers_upstream_requests_in_input_rounds() {
    let mut client = Client::scripted(&[], &[]);
    let mut meta = envelope();
    meta["progressToken"] = json!("first");
    let round = client.request(
        json!("call-1"),
        "tools/call",
        json!({"name": "needs_sampling", "_meta": meta}),
    );
    let result = &round["result"];
    assert_eq!(result["resultType"], "input_required", "{round}");
    let requests = result["inputRequests"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    assert_eq!(requests.len(), 1, "{round}");
    let (key, request) = requests
        .iter()
        .next()
        .map(|(k, v)| (k.clone(), v.clone()))
        .unwrap_or_default();
    assert_eq!(request["method"], "sampling/createMessage");
    assert_eq!(request["params"]["maxTokens"], 5);
    let state = result["requestState"].clone();
    assert!(state.is_string(), "{round}");
    let sealed = state.as_str().unwrap_or_default();
    assert!(
        sealed.starts_with("mcpmw1."),
        "the state is sealed: {round}"
    );

    // A changed state resumes nothing (and leaves the round open for the genuine one).
    let mut forged = sealed.to_owned();
    let at = forged.len() / 2;
    let other = if &forged[at..=at] == "A" { "B" } else { "A" };
    forged.replace_range(at..=at, other);
    let refused = client.request(
        json!("call-forged"),
        "tools/call",
        json!({"name": "needs_sampling", "_meta": envelope(), "requestState": forged, "inputResponses": {}}),
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("not issued to this session"), "{refused}");

    // The retry carries the answer under a new id; the upstream's final result answers it.
    let answer =
        json!({"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"});
    let done = client.request(
        json!("call-2"),
        "tools/call",
        json!({"name": "needs_sampling", "_meta": envelope(), "requestState": state, "inputResponses": {key: answer}}),
    );
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(done["result"]["answer"], answer);

    let stale = client.request(
        json!("call-3"),
        "tools/call",
        json!({"name": "needs_sampling", "_meta": envelope(), "requestState": state, "inputResponses": {}}),
    );
    assert_eq!(
        stale["error"]["code"], -32602,
        "a used requestState is refused: {stale}"
    );

    // Outside a call, the upstream's request cannot reach a stateless client: it gets an error.
    let asked = client.request(
        json!("ask"),
        "ask",
        json!({"q": "x", "method": "sampling/createMessage", "_meta": envelope()}),
    );
    assert_eq!(asked["result"]["answer"]["code"], -32601, "{asked}");
}

#[test]
fn a_stateless_client_and_a_stateless_upstream_are_not_translated() {
    let mut client = Client::scripted(&[], &[("SCRIPTED_ERA", "2026")]);
    let tools = client.request(json!(1), "tools/list", json!({"_meta": envelope()}));
    assert!(
        tools["result"].get("resultType").is_none(),
        "nothing added: {tools}"
    );
    let seen = client.request(json!(2), "state", json!({"_meta": envelope()}))["result"].clone();
    assert_eq!(seen["initializes"], 0, "{seen}");
    assert_eq!(
        seen["metas"][1]["io.modelcontextprotocol/protocolVersion"], "2026-07-28",
        "{seen}"
    );
}

#[test]
fn an_upstream_that_cannot_start_is_a_clear_error() {
    let client = Client::start(&[], &["/nonexistent/mcp-server".to_owned()], &[]);
    let (status, stderr) = client.close_with_stderr();
    assert_eq!(status.code(), Some(1));
    assert!(
        stderr.contains("could not start upstream server `/nonexistent/mcp-server`"),
        "{stderr}"
    );
}

#[test]
fn the_proxy_exits_cleanly_when_the_client_closes() {
    let mut client = Client::scripted(&[], &[]);
    client.initialize();
    let status = client.close();
    assert!(status.success(), "{status:?}");
}
