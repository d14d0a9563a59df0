//! The `summarize` model and the LLM endpoint settings as the CLI shows and checks them (the
//! model at work, with a sampling client and an endpoint, is `tests/interop/test_summarize.py`).

use std::process::Command;

use serde_json::Value;

fn mcpctl(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mcpctl"))
        .args(args)
        .env(
            "MCPCTL_HOME",
            std::env::temp_dir().join("mcpctl-summarize-test-home"),
        )
        .output()
        .expect("mcpctl runs")
}

#[test]
fn describe_shows_summarize_with_paginate_around_its_transform() {
    let out = mcpctl(&["describe", "proxymodel", "summarize", "-o", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let described: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        described["extends"],
        serde_json::json!(["paginate", "summarize-text"])
    );
    let schema = &described["config"]["summarize"]["schema"]["properties"];
    for field in ["thresholdBytes", "prompt", "maxTokens", "timeoutSeconds"] {
        assert!(schema.get(field).is_some(), "{field}: {schema}");
    }
    assert_eq!(schema["thresholdBytes"]["default"], 8192);
    let tools: Vec<&str> = described["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert_eq!(tools, ["read_page"]);

    let table = String::from_utf8_lossy(&mcpctl(&["describe", "proxymodel", "summarize"]).stdout)
        .into_owned();
    assert!(
        table.contains("Chain:       summarize -> paginate -> summarize-text\n"),
        "{table}"
    );
}

#[test]
fn llm_flags_are_checked_before_anything_starts() {
    let bad_url = mcpctl(&[
        "proxy",
        "--model",
        "summarize",
        "--llm-url",
        "ftp://host/v1",
        "--llm-model",
        "m",
        "--",
        "true",
    ]);
    assert_eq!(bad_url.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&bad_url.stderr);
    assert!(stderr.contains("--llm-url"), "{stderr}");
    assert!(
        stderr.contains("not an http:// or https:// URL"),
        "{stderr}"
    );
    assert!(bad_url.stdout.is_empty(), "nothing on stdout");

    let no_model = mcpctl(&["proxy", "--llm-url", "http://127.0.0.1:1/v1", "--", "true"]);
    assert_eq!(no_model.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&no_model.stderr).contains("--llm-model"));

    let bad_var = mcpctl(&[
        "proxy",
        "--llm-url",
        "http://127.0.0.1:1/v1",
        "--llm-model",
        "m",
        "--llm-api-key-env",
        "${env:KEY}",
        "--",
        "true",
    ]);
    assert_eq!(bad_var.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&bad_var.stderr);
    assert!(stderr.contains("give the variable's name"), "{stderr}");
}
