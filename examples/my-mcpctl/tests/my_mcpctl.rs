//! The example's own `mcpctl`: the whole CLI with the `focused` model beside the stock ones.
//!
//! The binary is run as a user would: `get` and `describe proxymodels`, then a session through
//! `my-mcpctl client`, whose proxy child is `my-mcpctl proxy --model focused` itself, in front of
//! the scripted upstream. (The official Python client drives the same binary in
//! `tests/interop/test_my_mcpctl.py`.)

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

/// Runs the binary with an empty project store.
fn my_mcpctl(args: &[&str]) -> Output {
    let home = std::env::temp_dir().join(format!("my-mcpctl-test-{}", std::process::id()));
    Command::new(env!("CARGO_BIN_EXE_my-mcpctl"))
        .args(args)
        .env("MCPCTL_HOME", home)
        .output()
        .expect("my-mcpctl runs")
}

/// Its stdout, after checking that it succeeded.
fn stdout_of(args: &[&str]) -> String {
    let out = my_mcpctl(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn scripted_upstream() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/scripted_upstream.py")
        .display()
        .to_string()
}

#[test]
fn the_custom_model_is_listed_beside_every_stock_model() {
    let listed: Vec<Value> =
        serde_json::from_str(&stdout_of(&["get", "proxymodels", "-o", "json"])).expect("JSON");
    let names: Vec<&str> = listed.iter().filter_map(|m| m["name"].as_str()).collect();
    for stock in mcp_middleware_models::all() {
        assert!(names.contains(&stock), "`{stock}` is missing: {names:?}");
    }
    let focused = listed
        .iter()
        .find(|m| m["name"] == "focused")
        .unwrap_or_else(|| panic!("`focused` is missing: {names:?}"));
    assert_eq!(focused["extends"], serde_json::json!(["gate", "paginate"]));
    assert_eq!(focused["tools"], serde_json::json!(["session_intent"]));

    let table = stdout_of(&["get", "proxymodels"]);
    assert!(
        table.lines().any(|line| line.starts_with("focused ")),
        "{table}"
    );

    let described = stdout_of(&["describe", "proxymodel", "focused"]);
    assert!(
        described.contains("Chain:       focused -> gate -> paginate"),
        "{described}"
    );
    assert!(described.contains("Crate:       my_mcpctl"), "{described}");
}

#[test]
fn a_session_through_the_custom_model_is_gated_paged_and_recalls_its_intent() {
    let upstream = scripted_upstream();
    let out = my_mcpctl(&[
        "client",
        "--model",
        "focused",
        "--timeout",
        "30",
        "tools",
        "list",
        "tools",
        "call",
        "session_intent",
        "tools",
        "call",
        "t",
        "tools",
        "call",
        "begin_session",
        r#"{"intent":"fix the login bug"}"#,
        "tools",
        "list",
        "tools",
        "call",
        "session_intent",
        "tools",
        "call",
        "t",
        "--",
        "python3",
        "-u",
        &upstream,
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let steps: Vec<&str> = stdout.split("== ").skip(1).collect();
    assert_eq!(steps.len(), 7, "{stdout}");
    // Gated: only the gate's tool and the custom one; the upstream's `t` is refused.
    assert!(steps[0].contains("begin_session") && steps[0].contains("session_intent"));
    assert!(!steps[0].contains("\nt "), "gated: {}", steps[0]);
    assert!(steps[1].contains("not open yet"), "{}", steps[1]);
    assert!(steps[2].contains("begin_session"), "refused: {}", steps[2]);
    assert!(!steps[2].contains("called t"), "{}", steps[2]);
    // Open: the upstream's tools, paginate's `read_page`, and the intent recalled.
    assert!(
        steps[4].contains("\nt ") && steps[4].contains("read_page"),
        "{}",
        steps[4]
    );
    assert!(steps[5].contains("fix the login bug"), "{}", steps[5]);
    assert!(steps[6].contains("called t"), "{}", steps[6]);
}
