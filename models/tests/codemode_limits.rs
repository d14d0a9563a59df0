//! Code mode under attack, through the real proxy in front of the content upstream
//! (`tests/fixtures/content_upstream.py`, a child process over stdio): the process-wide bound on
//! sandboxes (several sessions' executes queue for it, then are refused), every text an execute
//! returns bounded by `maxOutputBytes`, the prelude's functions out of reach of stack-trace
//! hooks, and a catalog that follows live reloads.
//!
//! The pool of sandboxes is one per process: under `cargo test` (one process for all) each test
//! holds [`POOL`] while it runs, and counts refusals from where it started.
#![cfg(feature = "codemode")]
#![allow(missing_docs, unreachable_pub)]

#[path = "../../mcp-middleware/tests/support/mod.rs"]
mod support;

use std::path::PathBuf;

use mcp_middleware::live::Live;
use mcp_middleware::routing::Routes;
use mcp_middleware::upstream::StdioServer;
use mcp_middleware::{Proxy, SessionOptions};
use mcp_middleware_models::codemode;
use serde_json::{Value, json};
use support::Client;

/// Held by each test for its whole run: the pool's counters are the process's.
static POOL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn content_upstream() -> StdioServer {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/content_upstream.py");
    StdioServer::new("python3").arg(script)
}

fn coded(config: Value) -> Proxy {
    Proxy::new(content_upstream())
        .model::<codemode::Model>()
        .config("codemode", config)
}

fn first_text(answer: &Value) -> String {
    Client::texts(answer).first().cloned().unwrap_or_default()
}

/// Sends `code` to `execute` in every session (`per_session` times each) before reading any
/// answer, so they all run (or wait) at once; returns every answer's first text and whether it
/// is an error.
async fn execute_together(
    clients: &mut [Client],
    code: &str,
    per_session: usize,
) -> Vec<(bool, String)> {
    let mut started = Vec::new();
    for (index, client) in clients.iter_mut().enumerate() {
        for _ in 0..per_session {
            let params = json!({"name": "execute", "arguments": {"code": code}});
            started.push((index, client.start("tools/call", params).await));
        }
    }
    // Answers come in the order the executes end, not the order they were sent.
    let mut answers = Vec::new();
    for (index, client) in clients.iter_mut().enumerate() {
        let mut left: Vec<u64> = started
            .iter()
            .filter(|(i, _)| *i == index)
            .map(|(_, id)| *id)
            .collect();
        while !left.is_empty() {
            let message = client.next_message().await;
            let Some(at) = left.iter().position(|id| message["id"] == json!(id)) else {
                continue;
            };
            left.remove(at);
            answers.push((message["result"]["isError"] == true, first_text(&message)));
        }
    }
    answers
}

async fn sessions(count: usize, config: &Value) -> Vec<Client> {
    let mut clients = Vec::new();
    for _ in 0..count {
        clients.push(Client::initialized(coded(config.clone())).await);
    }
    clients
}

async fn close(clients: Vec<Client>) {
    for client in clients {
        client.close().await.expect("closed");
    }
}

/// Spins until `timeoutMs` stops it: holds its sandbox for that long.
const SPIN: &str = "for (;;) {}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executes_of_every_session_queue_for_the_process_wide_memory_budget() {
    let _pool = POOL.lock().await;
    // Memory is the binding limit here: room for two sandboxes of 8 MiB in 16 MiB.
    let config = json!({
        "memoryBytes": 8 << 20, "totalMemoryBytes": 16 << 20, "maxConcurrentExecutes": 8,
        "timeoutMs": 300, "executeQueueMs": 60_000, "typeChecker": "off",
    });
    let refused_before = codemode::sandboxes().refused;
    let mut clients = sessions(3, &config).await;
    let bomb = "const hoard: number[][] = []; for (;;) hoard.push(new Array(100000).fill(1));";
    let mut answers = execute_together(&mut clients, SPIN, 2).await;
    answers.extend(execute_together(&mut clients, bomb, 2).await);
    for (is_error, text) in &answers {
        assert!(
            *is_error && (text.starts_with("Timeout") || text.starts_with("OutOfMemory")),
            "each snippet ran to its own limit, none was refused: {text}"
        );
    }
    let seen = codemode::sandboxes();
    assert_eq!(seen.peak_running, 2, "{seen:?}");
    assert_eq!(seen.refused, refused_before, "{seen:?}");
    assert_eq!((seen.running, seen.reserved_bytes), (0, 0), "{seen:?}");
    close(clients).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executes_beyond_the_concurrency_limit_are_refused_after_waiting_their_turn() {
    let _pool = POOL.lock().await;
    let config = json!({
        "maxConcurrentExecutes": 1, "executeQueueMs": 100, "timeoutMs": 1500,
        "typeChecker": "off",
    });
    let before = codemode::sandboxes();
    let mut clients = sessions(3, &config).await;
    let answers = execute_together(&mut clients, SPIN, 1).await;
    let ran: Vec<&String> = answers
        .iter()
        .filter(|(_, text)| text.starts_with("Timeout"))
        .map(|(_, text)| text)
        .collect();
    let refused: Vec<&String> = answers
        .iter()
        .filter(|(_, text)| text.starts_with("Busy"))
        .map(|(_, text)| text)
        .collect();
    assert_eq!((ran.len(), refused.len()), (1, 2), "{answers:?}");
    assert!(
        refused[0].contains("maxConcurrentExecutes (1)") && refused[0].contains("executeQueueMs"),
        "{}",
        refused[0]
    );
    let seen = codemode::sandboxes();
    assert_eq!(seen.refused - before.refused, 2, "{seen:?}");
    if before.peak_running == 0 {
        assert_eq!(seen.peak_running, 1, "{seen:?}");
    }
    // The turn is given back: the next execute runs.
    let next = clients[0]
        .call_tool("execute", json!({"code": "return 1 + 1;"}))
        .await;
    assert_eq!(first_text(&next), "2", "{next}");
    close(clients).await;
}

#[tokio::test]
async fn a_memory_limit_above_the_total_is_refused_naming_the_field() {
    let _pool = POOL.lock().await;
    let config =
        json!({"memoryBytes": 64 << 20, "totalMemoryBytes": 16 << 20, "typeChecker": "off"});
    let before = codemode::sandboxes();
    let mut client = Client::initialized(coded(config)).await;
    let answer = client
        .call_tool("execute", json!({"code": "return 1;"}))
        .await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(
        first_text(&answer).contains("raise `totalMemoryBytes`"),
        "{answer}"
    );
    let seen = codemode::sandboxes();
    assert_eq!(
        (seen.refused - before.refused, seen.running),
        (1, 0),
        "{seen:?}"
    );
    client.close().await.expect("closed");
}

#[tokio::test]
async fn every_text_an_execute_returns_is_bounded_by_max_output_bytes() {
    let _pool = POOL.lock().await;
    const MAX: usize = 2000;
    let config = json!({"maxOutputBytes": MAX, "typeChecker": "off"});
    let mut client = Client::initialized(coded(config)).await;
    for code in [
        r#"throw new Error("m".repeat(5_000_000));"#,
        r#"const e = new Error("short"); e.name = "n".repeat(1_000_000); throw e;"#,
        r#"throw { message: "o".repeat(1_000_000) };"#,
        r#"throw "s".repeat(1_000_000);"#,
        r#"return "r".repeat(1_000_000);"#,
        r#"console.log("l".repeat(1_000_000)); return 1;"#,
        r#"for (let i = 0; i < 10000; i++) console.log("line " + i); return 1;"#,
        r#"console.log("x".repeat(1500)); throw new Error("e".repeat(1_000_000));"#,
    ] {
        let answer = client.call_tool("execute", json!({"code": code})).await;
        let texts = Client::texts(&answer);
        assert!(!texts.is_empty(), "{code}: {answer}");
        for text in &texts {
            assert!(
                text.len() <= MAX + 200,
                "{code}: a text of {} bytes",
                text.len()
            );
        }
        let structured = answer["result"]["structuredContent"].to_string();
        assert!(
            structured.len() <= 3 * MAX,
            "{code}: structuredContent of {} bytes",
            structured.len()
        );
    }
    client.close().await.expect("closed");
}

#[tokio::test]
async fn stack_trace_hooks_do_not_reach_the_prelude() {
    let _pool = POOL.lock().await;
    let config = json!({"typeChecker": "off"});
    let mut client = Client::initialized(coded(config)).await;
    // Every way a snippet might get a CallSite of the prelude's frames: the error an inner call
    // is made with, a namespace's trap refusing a name, an error of its own.
    let code = r#"
        const found: string[] = [];
        const hook = (error: unknown, sites: any[]) => {
            for (const site of sites) {
                const f = site && typeof site.getFunction === "function" ? site.getFunction() : undefined;
                if (typeof f === "function") found.push("function " + (f.name || "anonymous"));
            }
            return "hooked";
        };
        try { (Error as any).prepareStackTrace = hook; } catch (e) {}
        try { Object.defineProperty(Error, "prepareStackTrace", { value: hook }); } catch (e) {}
        try { (Error as any).captureStackTrace({}, upstream.echo_text); found.push("captureStackTrace"); } catch (e) {}
        await upstream.echo_text({ text: "a call" });
        try { await upstream["no" + "pe"]({}); } catch (e) { String((e as any).stack); }
        try { throw new Error("mine"); } catch (e) { String((e as any).stack); }
        try { await upstream.echo_text(undefined as any); } catch (e) { String((e as any).stack); }
        // The snippet's function is called by the prelude: its caller must stay out of reach.
        try {
            const caller = (arguments as any).callee.caller;
            if (typeof caller === "function") found.push("caller " + caller.name);
        } catch (e) {}
        return { found, prepare: typeof (Error as any).prepareStackTrace };
    "#;
    let answer = client.call_tool("execute", json!({"code": code})).await;
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    let value: Value = serde_json::from_str(&first_text(&answer)).expect("JSON result");
    assert_eq!(
        value,
        json!({"found": [], "prepare": "undefined"}),
        "{answer}"
    );
    client.close().await.expect("closed");
}

/// The qualified names `search_tools` found.
fn results(found: &Value) -> Vec<String> {
    found["result"]["structuredContent"]["results"]
        .as_array()
        .map(|results| {
            results
                .iter()
                .filter_map(|r| r["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn the_catalog_follows_a_live_reload_that_hides_a_tool() {
    let _pool = POOL.lock().await;
    let live = Live::new();
    let mut options = SessionOptions::default();
    options.live = Some(live.clone());
    let proxy = |routes: Routes| {
        coded(json!({"typeChecker": "off"}))
            .routes(routes)
            .options(options.clone())
    };
    let first = proxy(Routes::new());
    live.reload(&first).expect("generation 1");
    let mut client = Client::initialized(first).await;

    let found = client
        .call_tool("search_tools", json!({"query": "echo_text"}))
        .await;
    assert_eq!(results(&found)[0], "upstream.echo_text", "{found}");
    let called = client
        .call_tool(
            "execute",
            json!({"code": "return await upstream.echo_text({ text: 'before' });"}),
        )
        .await;
    assert_eq!(first_text(&called), "\"before\"", "{called}");

    live.reload(&proxy(Routes::new().hide("echo_text")))
        .expect("generation 2");

    let found = client
        .call_tool("search_tools", json!({"query": "echo_text"}))
        .await;
    assert!(!results(&found).is_empty(), "{found}");
    assert!(
        !results(&found).contains(&"upstream.echo_text".to_owned()),
        "{found}"
    );
    let inspected = client
        .call_tool("inspect", json!({"names": ["upstream.echo_text"]}))
        .await;
    let text = Client::texts(&inspected).join("\n");
    assert!(
        !text.contains("the echo_text tool") && !text.contains("echo_text("),
        "{inspected}"
    );
    let called = client
        .call_tool(
            "execute",
            json!({"code": "return await upstream.echo_text({ text: 'after' });"}),
        )
        .await;
    assert_eq!(called["result"]["isError"], true, "{called}");
    assert!(
        first_text(&called).contains("upstream.echo_text"),
        "{called}"
    );
    let by_index = client
        .call_tool(
            "execute",
            json!({"code": "const name = 'echo' + '_text'; return await upstream[name]({ text: 'after' });"}),
        )
        .await;
    assert_eq!(by_index["result"]["isError"], true, "{by_index}");
    assert!(first_text(&by_index).contains("not a tool"), "{by_index}");
    client.close().await.expect("closed");
}
