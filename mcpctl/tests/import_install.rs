//! End to end: `mcpctl import` of each client's file shape (fixtures in
//! `tests/fixtures/import/`, the reference server as their stdio entry), then
//! `mcpctl client PROJECT tools list` through the imported project; `mcpctl install` printing
//! and editing a client's file, and that file imported back.

#[path = "support/home.rs"]
mod home;

use std::path::{Path, PathBuf};
use std::process::Command;

use home::{Home, Run};
use serde_json::{Value, json};

/// Every literal secret in the fixtures: none may reach the store.
const SECRETS: &[&str] = &[
    "claude-desktop-secret-4f1c",
    "cursor-secret-81ad",
    "cursor-query-secret-77e0",
    "cursor-header-secret-9b2e",
    "claude-code-secret-c3d9",
    "vscode-secret-5e6f",
    "vscode-header-secret-a0b1",
];

fn everything() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/interop/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
        .display()
        .to_string()
}

/// The fixture `name`, written to `relative` under `dir` with the reference server's path in.
fn fixture(dir: &Home, name: &str, relative: &str) -> PathBuf {
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/import")
        .join(name);
    let text = std::fs::read_to_string(&source)
        .unwrap_or_else(|e| panic!("read {}: {e}", source.display()));
    dir.write(relative, &text.replace("@EVERYTHING@", &everything()))
}

/// The variables `import` said to set: the first column of its table.
fn variables(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .skip_while(|line| !line.starts_with("VARIABLE"))
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        .filter_map(|line| line.split_whitespace().next().map(str::to_owned))
        .collect()
}

/// `mcpctl ARGS` with each of `vars` set (to a stand-in value).
fn run_with(home: &Home, args: &[&str], vars: &[String]) -> Run {
    let mut command = home.command(args);
    for var in vars {
        command.env(var, format!("value of {var}"));
    }
    Run::from(command.output().expect("mcpctl runs"))
}

fn tool_names(listed: &Value) -> Vec<String> {
    listed["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("a tools list: {listed}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// No file under the store holds any of the fixtures' secrets.
fn assert_no_secret_stored(home: &Home) {
    let files = home.files();
    assert!(files.iter().any(|f| f.starts_with("servers/")), "{files:?}");
    for file in files {
        let text = std::fs::read(home.path.join(&file)).unwrap_or_default();
        let text = String::from_utf8_lossy(&text);
        for secret in SECRETS {
            assert!(!text.contains(secret), "{secret} in {file}:\n{text}");
        }
    }
}

/// Imports `name` (written as `relative`), lists the project's tools through the proxy, and
/// checks the store holds no secret. Returns import's stdout.
fn import_and_list(name: &str, relative: &str, project: &str, echo: &str) -> String {
    let home = Home::new();
    let files = Home::new();
    let file = fixture(&files, name, relative);
    let stdout = home.run(&["import", &file.display().to_string()]).ok();
    assert!(
        stdout.contains(&format!("project/{project} created")),
        "{stdout}"
    );
    let vars = variables(&stdout);
    assert!(vars.contains(&"EVERYTHING_TOKEN".to_owned()), "{stdout}");
    let listed = run_with(
        &home,
        &["client", project, "tools", "list", "-o", "json"],
        &vars,
    )
    .json();
    let names = tool_names(&listed);
    assert!(names.iter().any(|n| n == echo), "{echo} in {names:?}");
    assert_no_secret_stored(&home);
    stdout
}

#[test]
fn claude_desktop_config_imports_and_serves() {
    import_and_list(
        "claude_desktop_config.json",
        "claude_desktop_config.json",
        "claude-desktop-config",
        "echo",
    );
}

#[test]
fn cursor_config_imports_and_serves() {
    let stdout = import_and_list(
        "cursor-mcp.json",
        ".cursor/mcp.json",
        "cursor",
        "everything__echo",
    );
    for var in ["REMOTE_AUTHORIZATION", "REMOTE_API_KEY"] {
        assert!(stdout.contains(var), "{var}: {stdout}");
    }
}

#[test]
fn claude_code_config_imports_and_serves() {
    let stdout = import_and_list(
        "claude-code.mcp.json",
        ".mcp.json",
        "claude-code",
        "everything__echo",
    );
    for var in ["EXTRA_KEY", "API_TOKEN"] {
        assert!(stdout.contains(var), "{var}: {stdout}");
    }
}

#[test]
fn vscode_config_with_comments_imports_and_serves() {
    let stdout = import_and_list(
        "vscode-mcp.json",
        ".vscode/mcp.json",
        "vscode",
        "everything__echo",
    );
    assert!(stdout.contains("The reference server's token"), "{stdout}");
    for var in ["LEVEL", "DOCS_X_API_KEY"] {
        assert!(stdout.contains(var), "{var}: {stdout}");
    }
}

#[test]
fn import_refuses_to_replace_without_overwrite() {
    let home = Home::new();
    let files = Home::new();
    let file = fixture(&files, "claude_desktop_config.json", "desktop.json");
    let file = file.display().to_string();
    home.run(&["import", &file]).ok();
    let err = home.run(&["import", &file]).fails(1);
    assert!(
        err.contains("server/everything, project/desktop already exist")
            && err.contains("--overwrite"),
        "{err}"
    );
    let again = home.run(&["import", &file, "--overwrite"]).ok();
    assert!(again.contains("project/desktop unchanged"), "{again}");
    let other = home.run(&["import", &file, "--project", "other"]).fails(1);
    assert!(other.contains("server/everything already exist"), "{other}");
    let bad = files.write("bad.json", r#"{"mcpServers": {"odd": {"cmd": "x"}}}"#);
    let err = home.run(&["import", &bad.display().to_string()]).fails(1);
    assert!(
        err.contains("bad.json: server `odd`: neither `command`"),
        "{err}"
    );
}

fn printed(home: &Home, args: &[&str]) -> Value {
    home.run(args).json()
}

#[test]
fn install_prints_each_clients_shape() {
    let home = Home::new();
    let files = Home::new();
    let file = fixture(&files, "claude_desktop_config.json", "demo.json");
    home.run(&["import", &file.display().to_string()]).ok();
    let exe = env!("CARGO_BIN_EXE_mcpctl");
    let stdio =
        json!({"command": exe, "args": ["proxy", "demo"], "env": {"MCPCTL_HOME": home.path}});
    assert_eq!(
        printed(&home, &["install", "claude-desktop", "demo", "--print"]),
        json!({"mcpServers": {"demo": stdio}})
    );
    assert_eq!(
        printed(&home, &["install", "cursor", "demo", "--print"]),
        json!({"mcpServers": {"demo": stdio}})
    );
    let mut typed = stdio.clone();
    typed["type"] = json!("stdio");
    assert_eq!(
        printed(&home, &["install", "claude-code", "demo", "--print"]),
        json!({"mcpServers": {"demo": typed}})
    );
    assert_eq!(
        printed(&home, &["install", "vscode", "demo", "--print"]),
        json!({"servers": {"demo": typed}})
    );
    let url = "http://127.0.0.1:8080/mcp";
    assert_eq!(
        printed(
            &home,
            &["install", "vscode", "demo", "--print", "--url", url]
        ),
        json!({"servers": {"demo": {"type": "http", "url": url}}})
    );
    assert_eq!(
        printed(
            &home,
            &["install", "cursor", "demo", "--print", "--url", url]
        ),
        json!({"mcpServers": {"demo": {"url": url}}})
    );
    let err = home
        .run(&["install", "claude-desktop", "demo", "--print", "--url", url])
        .fails(1);
    assert!(err.contains("Connectors"), "{err}");
    // A project that does not exist is "not found" (exit 3).
    home.run(&["install", "cursor", "nope", "--print"]).fails(3);
    // What --print shows imports as it is: the mcpctl entry is recognised and skipped.
    let shown = files.write(
        "shown.json",
        &home.run(&["install", "cursor", "demo", "--print"]).ok(),
    );
    let err = home.run(&["import", &shown.display().to_string()]).fails(1);
    assert!(err.contains("no servers to import"), "{err}");
}

/// The entry's command, arguments and environment, run as the client would, behind an ad-hoc
/// `mcpctl client`: the tools of the project come back.
fn run_entry(entry: &Value, vars: &[String]) -> Value {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mcpctl"));
    command.args(["client", "tools", "list", "-o", "json", "--"]);
    command.arg(entry["command"].as_str().unwrap_or_default());
    for arg in entry["args"].as_array().into_iter().flatten() {
        command.arg(arg.as_str().unwrap_or_default());
    }
    command.env_remove("MCPCTL_HOME");
    for (key, value) in entry["env"].as_object().into_iter().flatten() {
        command.env(key, value.as_str().unwrap_or_default());
    }
    for var in vars {
        command.env(var, "value");
    }
    Run::from(command.output().expect("mcpctl runs")).json()
}

#[test]
fn install_edits_the_file_in_place_and_it_imports_back() {
    let home = Home::new();
    let files = Home::new();
    let source = fixture(&files, "claude_desktop_config.json", "source.json");
    let imported = home
        .run(&["import", &source.display().to_string(), "--project", "demo"])
        .ok();
    let vars = variables(&imported);
    let file = fixture(&files, "cursor-mcp.json", "client/mcp.json");
    let original = std::fs::read_to_string(&file).unwrap_or_default();
    let said = home
        .run(&[
            "install",
            "cursor",
            "demo",
            "--file",
            &file.display().to_string(),
        ])
        .ok();
    assert!(
        said.contains("`demo` added to") && said.contains("mcp.json.bak"),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(files.path.join("client/mcp.json.bak")).unwrap_or_default(),
        original
    );
    let edited: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap_or_default())
        .unwrap_or_else(|e| panic!("the edited file is JSON: {e}"));
    let servers: Vec<&String> = edited["mcpServers"]
        .as_object()
        .map(|m| m.keys().collect())
        .unwrap_or_default();
    assert_eq!(servers, ["everything", "remote", "demo"]);
    let before: Value = serde_json::from_str(&original).unwrap_or_default();
    assert_eq!(
        edited["mcpServers"]["remote"],
        before["mcpServers"]["remote"]
    );
    // The entry works as the client would run it.
    let listed = run_entry(&edited["mcpServers"]["demo"], &vars);
    assert!(tool_names(&listed).iter().any(|n| n == "echo"), "{listed}");
    // Installing again changes nothing; the edited file imports back without the mcpctl entry.
    let again = home
        .run(&[
            "install",
            "cursor",
            "demo",
            "--file",
            &file.display().to_string(),
        ])
        .ok();
    assert!(again.contains("unchanged"), "{again}");
    let back = Home::new();
    let out = back.run(&["import", &file.display().to_string()]).ok();
    assert!(
        out.contains("server/everything created") && out.contains("server/remote created"),
        "{out}"
    );
    assert!(!out.contains("server/demo"), "{out}");
    assert_no_secret_stored(&back);
}

#[test]
fn install_refuses_to_drop_comments() {
    let home = Home::new();
    let files = Home::new();
    let source = fixture(&files, "claude_desktop_config.json", "demo.json");
    home.run(&["import", &source.display().to_string()]).ok();
    let file = fixture(&files, "vscode-mcp.json", ".vscode/mcp.json");
    let original = std::fs::read_to_string(&file).unwrap_or_default();
    let err = home
        .run(&[
            "install",
            "vscode",
            "demo",
            "--file",
            &file.display().to_string(),
        ])
        .fails(1);
    assert!(
        err.contains("has comments") && err.contains("--print"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap_or_default(), original);
    assert!(!Path::new(&format!("{}.bak", file.display())).exists());
}

#[test]
fn completions_know_the_new_commands() {
    let home = Home::new();
    let all: &[&str] = &[
        "import",
        "install",
        "--overwrite",
        "claude-desktop",
        "vscode",
    ];
    // clap_complete's fish script offers no values for positional arguments.
    let fish: &[&str] = &["import", "install", "overwrite"];
    for (shell, words) in [("bash", all), ("zsh", all), ("fish", fish)] {
        let script = home.run(&["completion", shell]).ok();
        for word in words {
            assert!(script.contains(word), "{word} in the {shell} script");
        }
    }
}
