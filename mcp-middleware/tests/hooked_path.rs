//! The way of a hooked request through the real proxy: the hooked call writes the
//! request to the upstream, the upstream's reader hands the answer straight back to the task,
//! and the task writes its final answer to the client itself. What the session loop used to
//! guarantee on the way must still hold: what the upstream sent ahead of the answer reaches the
//! client ahead of it, the client may reuse an id as soon as it has its answer, concurrent
//! calls keep their ids, and an upstream that dies fails the call and starts again for the
//! next. The scripted upstream runs as a child process over stdio.

#![allow(missing_docs, unreachable_pub)]

mod support;

use mcp_middleware::Proxy;
use serde_json::{Value, json};
use support::{Client, scripted_upstream};

/// Marks every answer that went through its hook (no observers: nothing holds the answer in
/// the loop).
#[proxy_model]
pub mod marker {
    use mcp_middleware::prelude::*;

    pub async fn on_request(
        ctx: &Context,
        request: RawRequest,
        next: Next<'_, hooks::Request>,
    ) -> HookResult<serde_json::Value> {
        let mut answer = next.run(ctx, request).await?;
        if let serde_json::Value::Object(map) = &mut answer {
            map.insert("hooked".into(), true.into());
        }
        Ok(answer)
    }
}

use mcp_middleware::proxy_model;

fn proxy() -> Proxy {
    Proxy::new(scripted_upstream()).model::<marker::Model>()
}

/// Sends `message` and collects everything up to the answer with id `id`.
async fn exchange(client: &mut Client, message: Value, id: &Value) -> (Vec<Value>, Value) {
    client.send(&message).await;
    let mut before = Vec::new();
    loop {
        let got = client.next_message().await;
        if got.get("method").is_none() && &got["id"] == id {
            return (before, got);
        }
        before.push(got);
    }
}

#[tokio::test]
async fn progress_the_upstream_sent_first_reaches_the_client_before_the_hooked_answer() {
    let mut client = Client::initialized(proxy()).await;
    for round in 0..30 {
        let id = json!(1000 + round);
        let token = format!("tok-{round}");
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "progress",
                             "params": {"_meta": {"progressToken": token}}});
        let (before, answer) = exchange(&mut client, request, &id).await;
        assert_eq!(answer["result"]["hooked"], true, "{answer}");
        assert_eq!(answer["result"]["done"], true, "{answer}");
        let steps: Vec<&Value> = before
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .map(|m| &m["params"]["progress"])
            .collect();
        assert_eq!(
            steps,
            [&json!(1), &json!(2), &json!(3)],
            "round {round}: every progress ahead of the answer, in order: {before:?}"
        );
        assert!(
            before
                .iter()
                .filter(|m| m["method"] == "notifications/progress")
                .all(|m| m["params"]["progressToken"] == json!(token)),
            "the client's own token: {before:?}"
        );
    }
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_client_may_reuse_an_id_as_soon_as_it_has_the_hooked_answer() {
    let mut client = Client::initialized(proxy()).await;
    let id = json!("same");
    for round in 0..50 {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "custom/echo",
                             "params": {"round": round}});
        let (_, answer) = exchange(&mut client, request, &id).await;
        assert_eq!(answer["result"]["echo"]["round"], round, "{answer}");
        assert_eq!(answer["result"]["hooked"], true, "{answer}");
    }
    client.close().await.unwrap();
}

#[tokio::test]
async fn concurrent_hooked_calls_are_answered_under_their_own_ids() {
    let mut client = Client::initialized(proxy()).await;
    let ids: Vec<u64> = (0..20).map(|n| 500 + n).collect();
    for id in &ids {
        client
            .send(&json!({"jsonrpc": "2.0", "id": id, "method": "custom/echo",
                          "params": {"n": id}}))
            .await;
    }
    let mut answered = Vec::new();
    while answered.len() < ids.len() {
        let message = client.next_message().await;
        if message.get("method").is_some() {
            continue;
        }
        assert_eq!(message["result"]["echo"]["n"], message["id"], "{message}");
        assert_eq!(message["result"]["hooked"], true, "{message}");
        answered.push(message["id"].as_u64().expect("a numeric id"));
    }
    answered.sort_unstable();
    assert_eq!(answered, ids);
    client.close().await.unwrap();
}

#[tokio::test]
async fn an_upstream_that_dies_fails_the_hooked_call_and_the_next_call_starts_it_again() {
    let mut client = Client::initialized(proxy()).await;
    let before = client.request("custom/echo", json!({"n": 1})).await;
    assert_eq!(before["result"]["hooked"], true, "{before}");

    let died = client.request("die", json!({})).await;
    assert_eq!(died["error"]["code"], -32001, "{died}");

    let after = client.request("custom/echo", json!({"n": 2})).await;
    assert_eq!(after["result"]["echo"]["n"], 2, "{after}");
    assert_eq!(after["result"]["hooked"], true, "{after}");
    let state = client.request("state", json!({})).await;
    assert_eq!(
        state["result"]["initializes"], 1,
        "the restarted upstream got the replayed initialize: {state}"
    );
    client.close().await.unwrap();
}

/// Set when `waiter`'s hook future is dropped.
static WAIT_DROPPED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// Told when `waiter`'s hook future is dropped (it keeps the permit if nobody waits yet).
static WAIT_DROPPED_NOW: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// Holds `custom/wait` forever (until its future is dropped); lets everything else through,
/// hooked.
#[proxy_model]
pub mod waiter {
    use mcp_middleware::prelude::*;

    struct OnDrop;

    impl Drop for OnDrop {
        fn drop(&mut self) {
            super::WAIT_DROPPED.store(true, std::sync::atomic::Ordering::SeqCst);
            super::WAIT_DROPPED_NOW.notify_one();
        }
    }

    pub async fn on_request(
        ctx: &Context,
        request: RawRequest,
        next: Next<'_, hooks::Request>,
    ) -> HookResult<serde_json::Value> {
        if request.method == "custom/wait" {
            let _dropped = OnDrop;
            std::future::pending::<()>().await;
        }
        next.run(ctx, request).await
    }
}

#[tokio::test]
async fn a_hooked_call_that_waits_holds_up_nothing_else_and_cancelling_it_drops_it() {
    let proxy = Proxy::new(scripted_upstream()).model::<waiter::Model>();
    let mut client = Client::initialized(proxy).await;
    client
        .send(&json!({"jsonrpc": "2.0", "id": "w", "method": "custom/wait", "params": {}}))
        .await;
    // The session's loop polls hooked calls beside its other work: a call that waits does not
    // stop the next ones.
    for n in 0..5 {
        let answer = client.request("custom/echo", json!({"n": n})).await;
        assert_eq!(answer["result"]["echo"]["n"], n, "{answer}");
    }
    assert!(!WAIT_DROPPED.load(std::sync::atomic::Ordering::SeqCst));
    client
        .send(
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                      "params": {"requestId": "w", "reason": "test"}}),
        )
        .await;
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        WAIT_DROPPED_NOW.notified(),
    )
    .await
    .expect("the cancelled call's future was dropped");
    assert!(WAIT_DROPPED.load(std::sync::atomic::Ordering::SeqCst));
    // And the session goes on.
    let answer = client.request("custom/echo", json!({"n": 9})).await;
    assert_eq!(answer["result"]["echo"]["n"], 9, "{answer}");
    assert!(
        !client
            .received
            .iter()
            .any(|m| m["id"] == "w" && m.get("method").is_none()),
        "a cancelled request gets no answer: {:?}",
        client.received
    );
    client.close().await.unwrap();
}
