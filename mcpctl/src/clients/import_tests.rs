//! The parsers of `mcpctl import`, one file shape at a time.

use std::path::Path;

use mcpctl::store::ServerSpec;

use super::*;

fn read_ok(text: &str) -> Imported {
    read("test.json", text, Path::new("/work/space")).unwrap_or_else(|e| panic!("{e:#}"))
}

fn read_err(text: &str) -> String {
    match read("test.json", text, Path::new("/work/space")) {
        Ok(imported) => panic!("read: {imported:?}"),
        Err(e) => format!("{e:#}"),
    }
}

fn stdio(imported: &Imported, i: usize) -> &mcpctl::store::StdioSpec {
    match &imported.servers[i].spec {
        ServerSpec::Stdio(s) => s,
        other => panic!("not stdio: {other:?}"),
    }
}

fn http(imported: &Imported, i: usize) -> &mcpctl::store::HttpSpec {
    match &imported.servers[i].spec {
        ServerSpec::Http(h) => h,
        other => panic!("not http: {other:?}"),
    }
}

fn names(imported: &Imported) -> Vec<&str> {
    imported.variables.iter().map(|v| v.name.as_str()).collect()
}

#[test]
fn claude_desktop_stdio_with_a_literal_secret() {
    let imported = read_ok(
        r#"{"mcpServers": {"github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"],
            "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_secret"}}}, "globalShortcut": "x"}"#,
    );
    assert_eq!(imported.servers[0].name, "github");
    let s = stdio(&imported, 0);
    assert_eq!(s.command, "npx");
    assert_eq!(s.args, ["-y", "@modelcontextprotocol/server-github"]);
    assert_eq!(
        s.env["GITHUB_PERSONAL_ACCESS_TOKEN"],
        "${env:GITHUB_PERSONAL_ACCESS_TOKEN}"
    );
    assert_eq!(names(&imported), ["GITHUB_PERSONAL_ACCESS_TOKEN"]);
    assert!(!format!("{imported:?}").contains("ghp_secret"));
}

#[test]
fn cursor_http_keeps_the_scheme_and_hides_the_token() {
    let imported = read_ok(
        r#"{"mcpServers": {"remote": {"url": "https://mcp.example.com/mcp?api_key=k123&x=1",
            "headers": {"Authorization": "Bearer abc", "X-Team": "blue"}}}}"#,
    );
    let h = http(&imported, 0);
    assert_eq!(
        h.url,
        "https://mcp.example.com/mcp?api_key=${env:REMOTE_API_KEY}&x=1"
    );
    assert_eq!(
        h.headers["Authorization"],
        "Bearer ${env:REMOTE_AUTHORIZATION}"
    );
    assert_eq!(h.headers["X-Team"], "${env:REMOTE_X_TEAM}");
    assert_eq!(
        names(&imported),
        ["REMOTE_API_KEY", "REMOTE_AUTHORIZATION", "REMOTE_X_TEAM"]
    );
    let text = format!("{imported:?}");
    assert!(!text.contains("abc") && !text.contains("k123"), "{text}");
}

#[test]
fn claude_code_types_and_its_own_placeholders() {
    let imported = read_ok(
        r#"{"mcpServers": {
            "api": {"type": "http", "url": "https://${API_HOST:-api.example.com}/mcp",
                    "headers": {"Authorization": "Bearer ${API_KEY}"}},
            "local": {"type": "stdio", "command": "/usr/bin/tool", "args": ["--token", "t0k"], "env": {}},
            "legacy": {"type": "sse", "url": "https://old.example.com/sse"}}}"#,
    );
    let api = http(&imported, 0);
    assert_eq!(api.url, "https://${env:API_HOST}/mcp");
    assert_eq!(api.headers["Authorization"], "Bearer ${env:API_KEY}");
    assert_eq!(stdio(&imported, 1).args, ["--token", "${env:LOCAL_TOKEN}"]);
    assert_eq!(http(&imported, 2).url, "https://old.example.com/sse");
    assert!(
        imported.notes.iter().any(|n| n.contains("sse")),
        "{:?}",
        imported.notes
    );
    let default = imported
        .variables
        .iter()
        .find(|v| v.name == "API_HOST")
        .map(|v| v.from.clone())
        .unwrap_or_default();
    assert!(default.contains("api.example.com"), "{default}");
}

#[test]
fn vscode_inputs_env_and_workspace() {
    let imported = read_ok(
        r#"{
  // VS Code writes JSONC
  "inputs": [{"type": "promptString", "id": "perplexity-key", "description": "Perplexity API Key", "password": true}],
  "servers": {
    "perplexity": {
      "type": "stdio",
      "command": "npx",
      "args": ["-y", "server-perplexity-ask", "${workspaceFolder}/data"],
      "env": {"PERPLEXITY_API_KEY": "${input:perplexity-key}", "HOME_DIR": "${env:HOME}"},
    },
    "docs": {"type": "http", "url": "http://localhost:3000/mcp", "headers": {"X-Key": "${input:perplexity-key}"}}
  }
}"#,
    );
    let s = stdio(&imported, 0);
    assert_eq!(s.args[2], "/work/space/data");
    assert_eq!(s.env["PERPLEXITY_API_KEY"], "${env:PERPLEXITY_KEY}");
    assert_eq!(s.env["HOME_DIR"], "${env:HOME}");
    assert_eq!(http(&imported, 1).headers["X-Key"], "${env:PERPLEXITY_KEY}");
    let input = imported
        .variables
        .iter()
        .find(|v| v.name == "PERPLEXITY_KEY")
        .map(|v| v.from.clone())
        .unwrap_or_default();
    assert!(input.contains("Perplexity API Key"), "{input}");
}

#[test]
fn two_secrets_under_one_key_get_two_variables() {
    let imported = read_ok(
        r#"{"mcpServers": {
            "a": {"command": "x", "env": {"TOKEN": "one"}},
            "b": {"command": "x", "env": {"TOKEN": "two"}},
            "c": {"command": "x", "env": {"TOKEN": "one"}}}}"#,
    );
    assert_eq!(stdio(&imported, 0).env["TOKEN"], "${env:TOKEN}");
    assert_eq!(stdio(&imported, 1).env["TOKEN"], "${env:B_TOKEN}");
    assert_eq!(stdio(&imported, 2).env["TOKEN"], "${env:TOKEN}");
    assert_eq!(names(&imported), ["TOKEN", "B_TOKEN"]);
}

#[test]
fn passwords_in_urls_and_flags_are_hidden() {
    let imported = read_ok(
        r#"{"mcpServers": {"pg": {"command": "npx", "args": ["server-postgres",
            "postgresql://me:hunter2@db/app", "--api-key=zzz", "--verbose",
            "--token-file", "/run/token", "--port", "3000"]}}}"#,
    );
    assert_eq!(
        stdio(&imported, 0).args,
        [
            "server-postgres",
            "postgresql://me:${env:PG_PASSWORD}@db/app",
            "--api-key=${env:PG_API_KEY}",
            "--verbose",
            "--token-file",
            "/run/token",
            "--port",
            "3000"
        ]
    );
}

#[test]
fn odd_names_are_sanitised_and_skips_are_noted() {
    let imported = read_ok(
        r#"{"mcpServers": {
            "My Server!": {"command": "x"},
            "off": {"command": "x", "disabled": true},
            "me": {"command": "/usr/local/bin/mcpctl", "args": ["proxy", "demo"]},
            "kept": {"command": "x", "autoApprove": ["t"], "whatever": 1}}}"#,
    );
    let servers: Vec<&str> = imported.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(servers, ["My-Server-", "kept"]);
    let notes = imported.notes.join("\n");
    for expected in [
        "imported as `My-Server-`",
        "disabled",
        "mcpctl itself",
        "`whatever`",
    ] {
        assert!(notes.contains(expected), "{expected}: {notes}");
    }
}

#[test]
fn bad_shapes_name_the_file_and_the_entry() {
    for (text, expected) in [
        (r#"{"other": {}}"#, "no `mcpServers`"),
        (r#"[1]"#, "top level"),
        (r#"{"mcpServers": []}"#, "not an object"),
        (
            r#"{"mcpServers": {"x": 3}}"#,
            "server `x`: expected an object",
        ),
        (r#"{"mcpServers": {"x": {}}}"#, "server `x`: neither"),
        (
            r#"{"mcpServers": {"x": {"command": "a", "url": "http://b"}}}"#,
            "server `x`: both",
        ),
        (
            r#"{"mcpServers": {"x": {"type": "ws", "url": "ws://b"}}}"#,
            "unknown `type` `ws`",
        ),
        (
            r#"{"mcpServers": {"x": {"type": "http", "command": "a"}}}"#,
            "with a `command`",
        ),
        (
            r#"{"mcpServers": {"x": {"command": "a", "args": "b"}}}"#,
            "`args` is not a list",
        ),
        (
            r#"{"mcpServers": {"x": {"command": "a", "env": {"K": [1]}}}}"#,
            "`env.K` is not a string",
        ),
        (
            r#"{"mcpServers": {"x": {"url": "ftp://b"}}}"#,
            "not an http:// or https:// URL",
        ),
        (
            r#"{"mcpServers": {"x": {"url": "${URL}"}}}"#,
            "not an http:// or https:// URL",
        ),
        (
            r#"{"mcpServers": {"x": {"command": "${command:pick}"}}}"#,
            "not a placeholder mcpctl knows",
        ),
        (
            r#"{"mcpServers": {"x": {"command": "${env:A B}"}}}"#,
            "does not name an environment variable",
        ),
        (r#"{"mcpServers": {}}"#, "no servers to import"),
        ("{\"mcpServers\": {/* open", "not closed"),
        ("{\"mcpServers\": {", "not JSON"),
    ] {
        let err = read_err(text);
        assert!(err.starts_with("test.json"), "{text}: {err}");
        assert!(err.contains(expected), "{text}: {err}");
    }
}

#[test]
fn project_names_come_from_the_file() {
    for (file, name) in [
        ("/x/claude_desktop_config.json", "claude-desktop-config"),
        ("/x/.mcp.json", "claude-code"),
        ("/x/.vscode/mcp.json", "vscode"),
        ("/home/me/.cursor/mcp.json", "cursor"),
        ("/x/mcp.json", "mcp"),
        ("/x/My Tools.json", "my-tools"),
    ] {
        assert_eq!(project_name(Path::new(file)), name);
    }
}
