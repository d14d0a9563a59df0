//! The `mcpctl` commands other than `proxy`: listing models, usage errors.

use std::process::Command;

use serde_json::Value;

fn mcpctl(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mcpctl"))
        .args(args)
        .output()
        .expect("mcpctl runs")
}

#[test]
fn get_proxymodels_lists_every_stock_model() {
    let out = mcpctl(&["get", "proxymodels", "-o", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed: Vec<Value> = serde_json::from_slice(&out.stdout).expect("JSON list");
    let names: Vec<&str> = listed.iter().filter_map(|m| m["name"].as_str()).collect();
    for model in &mcp_middleware_models::all() {
        assert!(names.contains(model), "`{model}` is not listed: {names:?}");
    }
    let passthrough = listed
        .iter()
        .find(|m| m["name"] == "passthrough")
        .expect("passthrough");
    assert_eq!(passthrough["extends"], serde_json::json!([]));

    let table = mcpctl(&["get", "proxymodels"]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.starts_with("NAME"), "{text}");
    assert!(text.contains("passthrough"), "{text}");
}

#[test]
fn an_unknown_model_is_a_clear_error() {
    let out = mcpctl(&["proxy", "--model", "nope", "--", "true"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "3: a named thing does not exist"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unknown proxy model `nope`"), "{stderr}");
    assert!(
        stderr.contains("passthrough"),
        "names the models that exist: {stderr}"
    );
    assert!(out.stdout.is_empty(), "nothing on stdout");
}

#[test]
fn a_missing_upstream_command_is_a_usage_error() {
    let out = mcpctl(&["proxy"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn describe_proxymodel_shows_the_chain_hooks_tools_and_config_in_every_format() {
    let out = mcpctl(&["describe", "proxymodel", "passthrough", "-o", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let described: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(described["name"], "passthrough");
    assert_eq!(described["chain"], serde_json::json!(["passthrough"]));
    assert_eq!(described["hooks"], serde_json::json!([]));
    assert_eq!(described["tools"], serde_json::json!([]));
    assert!(
        described["summary"]
            .as_str()
            .unwrap()
            .contains("passes through"),
        "{described}"
    );

    let yaml = mcpctl(&["describe", "proxymodel", "passthrough", "-o", "yaml"]);
    let text = String::from_utf8_lossy(&yaml.stdout);
    assert!(text.contains("name: passthrough"), "{text}");

    let table = mcpctl(&["describe", "proxymodel", "passthrough"]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.starts_with("Name:"), "{text}");
    assert!(text.contains("every message passes through"), "{text}");

    let listed = mcpctl(&["get", "proxymodels", "-o", "yaml"]);
    assert!(String::from_utf8_lossy(&listed.stdout).contains("- name: passthrough"));
}

#[test]
fn describing_an_unknown_model_names_the_known_ones() {
    let out = mcpctl(&["describe", "proxymodel", "nope"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "3: a named thing does not exist"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unknown proxy model `nope`"), "{stderr}");
    assert!(stderr.contains("passthrough"), "{stderr}");
}

#[test]
fn config_for_a_model_that_takes_none_stops_the_start() {
    let out = mcpctl(&["proxy", "--set", "passthrough.pageSize=10", "--", "true"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("proxy model `passthrough`") && stderr.contains("no configuration"),
        "{stderr}"
    );
    let out = mcpctl(&["proxy", "--set", "gate.x=1", "--", "true"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no model `gate`"), "{stderr}");
    let out = mcpctl(&["proxy", "--set", "nodot", "--", "true"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("MODEL.FIELD=VALUE"), "{stderr}");
    assert!(out.stdout.is_empty());
}

/// The text of `args`' stdout, after checking that the command succeeded.
fn stdout_of(args: &[&str]) -> String {
    let out = mcpctl(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn describe_names_no_internal_module_paths() {
    for model in ["default", "gate", "paginate", "audit"] {
        let table = stdout_of(&["describe", "proxymodel", model]);
        let json = stdout_of(&["describe", "proxymodel", model, "-o", "json"]);
        // The stock models live in private `*_file` modules; no user can write those paths.
        for text in [&table, &json] {
            assert!(!text.contains("_file"), "{model}: {text}");
        }
        assert!(
            table.contains("Crate:       mcp_middleware_models\n"),
            "{table}"
        );
        let described: Value = serde_json::from_str(&json).expect("JSON");
        assert_eq!(described["crate"], "mcp_middleware_models");
    }
    let listed = stdout_of(&["get", "proxymodels", "-o", "json"]);
    assert!(!listed.contains("_file"), "{listed}");
}

#[test]
fn describe_shows_whole_tool_descriptions_wrapped_between_words() {
    let json = stdout_of(&["describe", "proxymodel", "default", "-o", "json"]);
    let described: Value = serde_json::from_str(&json).expect("JSON");
    let table = stdout_of(&["describe", "proxymodel", "default"]);
    let tools = described["tools"].as_array().expect("tools");
    assert!(tools.len() >= 3, "{described}");
    for tool in tools {
        let name = tool["name"].as_str().expect("name");
        let owner = tool["model"].as_str().expect("model");
        let paragraph: Vec<&str> = tool["description"]
            .as_str()
            .expect("description")
            .lines()
            .map(str::trim)
            .take_while(|line| !line.is_empty())
            .collect();
        let heading = format!("  {name} (from {owner}):\n");
        let start = table
            .find(&heading)
            .unwrap_or_else(|| panic!("{heading}{table}"))
            + heading.len();
        let lines: Vec<&str> = table[start..]
            .lines()
            .take_while(|line| line.starts_with("    "))
            .collect();
        assert!(
            lines.iter().all(|line| line.len() <= 4 + 88),
            "wrapped: {lines:?}"
        );
        let shown: Vec<&str> = lines.iter().map(|line| line.trim()).collect();
        assert_eq!(
            shown.join(" "),
            paragraph.join(" "),
            "the whole first paragraph of `{name}`, not a cut line"
        );
    }
}

#[test]
fn config_schemas_carry_no_rust_code_from_doc_comments() {
    let json = stdout_of(&["describe", "proxymodel", "gate", "-o", "json"]);
    let described: Value = serde_json::from_str(&json).expect("JSON");
    let schema = described["config"]["gate"]["schema"].to_string();
    assert!(schema.contains("An exact name or a glob."), "{schema}");
    for code in ["```", "assert!", "use mcp_middleware"] {
        assert!(!schema.contains(code), "`{code}` in {schema}");
    }
    let table = stdout_of(&["describe", "proxymodel", "gate"]);
    assert!(!table.contains("assert!"), "{table}");
}

#[test]
fn get_proxymodels_shows_observers() {
    let listed = stdout_of(&["get", "proxymodels", "-o", "json"]);
    let listed: Vec<Value> = serde_json::from_str(&listed).expect("JSON list");
    let audit = listed
        .iter()
        .find(|m| m["name"] == "audit")
        .expect("audit is listed");
    assert_eq!(audit["observers"], serde_json::json!(["record"]));
    let gate = listed.iter().find(|m| m["name"] == "gate").expect("gate");
    assert_eq!(gate["observers"], serde_json::json!([]));

    let table = stdout_of(&["get", "proxymodels"]);
    let header = table.lines().next().expect("a header");
    assert!(header.contains("OBSERVERS"), "{table}");
    let column = header.find("OBSERVERS").expect("column");
    let audit_row = table
        .lines()
        .find(|line| line.starts_with("audit "))
        .expect("audit row");
    assert!(audit_row[column..].starts_with("record"), "{table}");
}
