//! The audit model through the real proxy: several sessions of one process append to
//! one log, concurrently, and the chain stays whole; what each record says.

#![allow(missing_docs)]

#[path = "../../mcp-middleware/tests/support/mod.rs"]
mod support;

use mcp_middleware::Proxy;
use mcp_middleware::routing::Routes;
use mcp_middleware_models::audit;
use mcp_middleware_models::audit_log::{AuditKey, Verdict, verify};
use serde_json::{Value, json};
use support::{Client, scripted_upstream};

fn log_path(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("audit-sessions-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    path
}

fn proxy(path: &std::path::Path, log_arguments: bool) -> Proxy {
    Proxy::new(scripted_upstream())
        .model::<audit::Model>()
        .config(
            "audit",
            json!({"path": path, "key": "in-process key", "logArguments": log_arguments}),
        )
        .routes(Routes::new().hide("admin-*"))
}

fn records(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_sessions_append_to_one_unbroken_chain() {
    let path = log_path("concurrent.log");
    let sessions = (0..4).map(|n| {
        let proxy = proxy(&path, false);
        tokio::spawn(async move {
            let mut client = Client::initialized(proxy).await;
            for i in 0..10 {
                client.call_tool("t", json!({"n": n, "i": i})).await;
            }
            client.close().await.unwrap();
        })
    });
    for session in sessions.collect::<Vec<_>>() {
        session.await.unwrap();
    }
    let key = AuditKey::new("in-process key").unwrap();
    match verify(&path, &key).unwrap() {
        Verdict::Intact { records, .. } => {
            assert_eq!(records, 4 * 11, "initialize and 10 calls each")
        }
        broken => panic!("{broken:?}"),
    }
    let all = records(&path);
    let sessions: std::collections::BTreeSet<&str> =
        all.iter().map(|r| r["session"].as_str().unwrap()).collect();
    assert_eq!(sessions.len(), 4);
}

#[tokio::test]
async fn records_say_who_did_what_and_how_it_ended_without_secrets() {
    let path = log_path("fields.log");
    let mut client = Client::initialized(proxy(&path, true)).await;
    client
        .call_tool("echo_args", json!({"q": "weather", "apiToken": "s3cr3t"}))
        .await;
    let refused = client
        .call_tool("Admin-Reset", json!({"password": "hunter2"}))
        .await;
    assert_eq!(refused["error"]["code"], -32602);
    client.request("no/such/method", json!({})).await;
    client.close().await.unwrap();

    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        !text.contains("s3cr3t") && !text.contains("hunter2"),
        "{text}"
    );
    assert!(!text.contains("in-process key"), "the key is never written");
    let all = records(&path);
    assert_eq!(all.len(), 4, "{text}");
    let user = mcp_middleware::Identity::local_user();
    for (seq, record) in all.iter().enumerate() {
        assert_eq!(record["seq"], seq as u64 + 1);
        assert_eq!(record["identity"], user.subject());
        assert!(record["time"].as_str().unwrap().ends_with('Z'), "{record}");
        assert!(record["durationMs"].as_f64().unwrap() >= 0.0);
    }
    assert_eq!(all[0]["method"], "initialize");
    assert_eq!(all[0]["prev"], mcp_middleware_models::audit_log::GENESIS);
    assert_eq!(all[1]["target"], "echo_args");
    assert_eq!(all[1]["outcome"], "ok");
    assert_eq!(
        all[1]["arguments"],
        json!({"q": "weather", "apiToken": "[redacted]"})
    );
    assert_eq!(all[2]["target"], "Admin-Reset");
    assert_eq!(all[2]["outcome"], "rejected");
    assert!(all[2]["error"].as_str().unwrap().contains("hidden"));
    assert_eq!(all[2]["arguments"], json!({"password": "[redacted]"}));
    assert_eq!(all[3]["outcome"], "error");
    assert!(
        all[3]["error"]
            .as_str()
            .unwrap()
            .contains("Method not found")
    );
    assert_eq!(all[1]["prev"], all[0]["mac"]);
}
