//! End to end: resources applied with `mcpctl apply`, served by `mcpctl proxy PROJECT`, seen
//! through `mcpctl client` (which runs `mcpctl proxy` as its child), in front of the scripted
//! upstream (`tests/fixtures/scripted_upstream.py`).

#[path = "support/home.rs"]
mod home;

use home::Home;
use serde_json::{Value, json};

fn fixture() -> String {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/scripted_upstream.py")
        .display()
        .to_string()
}

/// A stdio server running the scripted upstream, answering tool calls "called NAME by WHO".
fn server(name: &str, who: &str) -> String {
    format!(
        "kind: Server\nmetadata: {{name: {name}}}\nspec:\n  command: python3\n  args: [-u, '{}']\n  env:\n    SCRIPTED_NAME: '{who}'\n",
        fixture()
    )
}

fn project(name: &str, servers: &[&str], extra: &str) -> String {
    format!(
        "kind: Project\nmetadata: {{name: {name}}}\nspec:\n  servers: [{}]\n{extra}",
        servers.join(", ")
    )
}

/// The tools' names, sorted.
fn tool_names(listed: &Value) -> Vec<String> {
    let mut names: Vec<String> = listed["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("a tools list: {listed}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn client_lists_and_calls_the_tools_of_a_project() {
    let home = Home::new();
    home.apply(
        &[
            server("scripted", "one"),
            project("plain", &["scripted"], ""),
        ]
        .join("---\n"),
    );
    let listed = home
        .run(&["client", "plain", "tools", "list", "-o", "json"])
        .json();
    assert_eq!(tool_names(&listed), vec!["t"]);
    let table = home.run(&["client", "plain", "tools", "list"]).ok();
    assert!(
        table.starts_with("NAME") && table.contains("\nt"),
        "{table}"
    );

    let run = home.run(&[
        "client",
        "plain",
        "info",
        "tools",
        "call",
        "t",
        "tools",
        "call",
        "echo_args",
        r#"{"a":1}"#,
    ]);
    let stderr = run.stderr.clone();
    let out = run.ok();
    assert!(
        out.contains("== info ==") && out.contains("scripted-upstream"),
        "{out}"
    );
    assert!(out.contains("called t by one"), "{out}");
    assert!(out.contains(r#"{"a": 1}"#), "{out}");
    assert!(
        stderr.contains(r#"notification: notifications/message {"level":"info","data":"called"}"#),
        "notifications go to stderr: {stderr}"
    );
}

#[test]
fn several_servers_serve_one_namespaced_surface_and_a_broken_one_is_reported() {
    let home = Home::new();
    home.apply(
        &[
            server("alpha", "alpha"),
            server("beta", "beta"),
            "kind: Server\nmetadata: {name: broken}\nspec: {command: /nonexistent/mcp-server}\n"
                .to_owned(),
            project(
                "both",
                &["alpha", "beta", "broken"],
                "  namespaceSeparator: '.'\n",
            ),
        ]
        .join("---\n"),
    );
    let run = home.run(&[
        "client", "both", "tools", "list", "tools", "call", "beta.t", "-o", "json",
    ]);
    let stderr = run.stderr.clone();
    let stdout = run.ok();
    let mut results = serde_json::Deserializer::from_str(&stdout).into_iter::<Value>();
    let listed = results.next().unwrap().unwrap();
    assert_eq!(tool_names(&listed), vec!["alpha.t", "beta.t"]);
    let called = results.next().unwrap().unwrap();
    assert_eq!(called["content"][0]["text"], "called t by beta");
    assert!(stderr.contains("broken"), "the failure is logged: {stderr}");

    let described = home
        .run(&["describe", "project", "both", "-o", "json"])
        .json();
    let status = &described["status"]["serverStatus"];
    let broken = status
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == "broken"))
        .unwrap_or_else(|| panic!("{described}"));
    assert_eq!(broken["state"], "down");
    let table = home.run(&["describe", "project", "both"]).ok();
    assert!(table.contains("broken  down:"), "{table}");
}

#[test]
fn env_references_are_resolved_by_the_proxy_only() {
    let home = Home::new();
    let server = server("secretive", "${env:WHO_SECRET}");
    home.apply(&[server, project("s", &["secretive"], "")].join("---\n"));
    let out = home
        .command(&["client", "s", "tools", "call", "t"])
        .env("WHO_SECRET", "swordfish")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "called t by swordfish\n"
    );
    let described = home
        .command(&["describe", "server", "secretive"])
        .env("WHO_SECRET", "swordfish")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&described.stdout);
    assert!(text.contains("SCRIPTED_NAME=${env:WHO_SECRET}"), "{text}");
    assert!(!text.contains("swordfish"), "{text}");
}

#[test]
fn gate_through_a_project_in_one_client_session() {
    let home = Home::new();
    home.apply(
        &[
            server("scripted", "one"),
            "kind: Prompt\nmetadata: {name: arithmetic}\nspec: {tags: [math], content: Add carefully.}\n"
                .to_owned(),
            project(
                "gated",
                &["scripted"],
                "  prompts: [arithmetic]\n  proxyModel: gate\n  alwaysVisible: [t]\n",
            ),
        ]
        .join("---\n"),
    );
    let run = home.run_with_stdin(
        &["client", "gated", "--script", "-", "-o", "json"],
        "# gated until begin_session\ntools list\ntools call echo_args {\"a\": 1}\ntools call begin_session {\"intent\": \"add numbers\", \"tags\": [\"math\"]}\ntools list\n",
    );
    let stderr = run.stderr.clone();
    let stdout = run.ok();
    let results: Vec<Value> = serde_json::Deserializer::from_str(&stdout)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(results.len(), 4, "{stdout}");
    assert_eq!(tool_names(&results[0]), vec!["begin_session", "t"]);
    assert_eq!(results[1]["isError"], true);
    assert!(
        results[2]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("Add carefully.")),
        "{}",
        results[2]
    );
    assert_eq!(tool_names(&results[3]), vec!["read_prompts", "t"]);
    assert!(
        stderr.contains("notification: notifications/tools/list_changed"),
        "{stderr}"
    );
}

#[test]
fn ad_hoc_client_and_raw_methods() {
    let home = Home::new();
    let fixture = fixture();
    let out = home.run(&[
        "client",
        "--model",
        "passthrough",
        "custom/echo",
        r#"{"x":[1,2]}"#,
        "notifications/custom",
        r#"{"n":1}"#,
        "sleep",
        "300",
        "-o",
        "yaml",
        "--",
        "python3",
        "-u",
        &fixture,
    ]);
    let stderr = out.stderr.clone();
    let stdout = out.ok();
    assert!(stdout.contains("echo:\n  x:\n  - 1\n  - 2"), "{stdout}");
    assert!(
        stderr.contains(r#"notification: notifications/custom_echo {"n":1}"#),
        "{stderr}"
    );
    // A JSON-RPC error stops the session with exit 1 and says which step failed.
    let err = home
        .run(&[
            "client",
            "resources",
            "list",
            "--",
            "python3",
            "-u",
            &fixture,
        ])
        .fails(1);
    assert!(
        err.contains("`resources/list` failed: Method not found"),
        "{err}"
    );
}

#[test]
fn client_errors_are_clear() {
    let home = Home::new();
    let err = home.run(&["client", "nope", "tools", "list"]).fails(3);
    assert!(err.contains("project `nope` not found"), "{err}");
    home.run(&["client"]).fails(1);
    let err = home.run(&["client", "p", "tools", "lst"]).fails(1);
    assert!(err.contains("unknown step `tools lst`"), "{err}");
    home.apply(
        &[
            // Port 9 (discard) on loopback: nothing listens, the connection is refused.
            "kind: Server\nmetadata: {name: web}\nspec: {url: 'http://127.0.0.1:9/mcp'}\n"
                .to_owned(),
            project("web", &["web"], ""),
        ]
        .join("---\n"),
    );
    let err = home.run(&["client", "web", "tools", "list"]).fails(1);
    assert!(
        err.contains("http://127.0.0.1:9/mcp") && err.contains("cannot connect"),
        "an unreachable HTTP server is named: {err}"
    );
    home.apply(&project("empty", &[], ""));
    let err = home.run(&["proxy", "empty"]).fails(1);
    assert!(err.contains("project `empty` has no servers"), "{err}");
}

#[test]
fn completions_generate_for_every_shell() {
    let home = Home::new();
    for shell in ["bash", "zsh", "fish"] {
        let script = home.run(&["completion", shell]).ok();
        assert!(script.contains("mcpctl"), "{shell}");
        for word in ["apply", "describe", "client", "proxymodels"] {
            assert!(script.contains(word), "{shell} completes `{word}`");
        }
    }
    home.run(&["completion", "tcsh"]).fails(2);
}

#[test]
fn a_config_override_on_the_command_line_wins_over_the_project() {
    let home = Home::new();
    home.apply(
        &[
            server("scripted", "one"),
            project(
                "g",
                &["scripted"],
                "  proxyModel: gate\n  alwaysVisible: [t]\n",
            ),
        ]
        .join("---\n"),
    );
    let listed = home
        .run(&["client", "g", "tools", "list", "-o", "json"])
        .json();
    assert_eq!(tool_names(&listed), vec!["begin_session", "t"]);
    let listed = home
        .run(&[
            "client",
            "g",
            "--model",
            "passthrough",
            "tools",
            "list",
            "-o",
            "json",
        ])
        .json();
    assert_eq!(
        tool_names(&listed),
        vec!["t"],
        "--model replaces the project's"
    );
    assert_eq!(
        listed["tools"][0]["execution"],
        json!({"taskSupport": "optional"})
    );
}
