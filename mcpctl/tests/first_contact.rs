//! What a newcomer meets first: no panic on a closed stdout, answers to what was
//! piped in before stdin closed, a local identity without `$USER`, one-line warnings, every
//! wrong document reported at once, and clear refusals (deleting a proxy model, a gated call).
//! Each drives the real `mcpctl` binary.

#[path = "support/home.rs"]
mod home;
mod support;

use std::io::{Read as _, Write as _};
use std::process::{Command, Stdio};

use home::Home;
use serde_json::{Value, json};

/// The scripted upstream, as `-- CMD...` arguments.
fn upstream() -> Vec<String> {
    support::scripted_upstream()
}

#[test]
fn completion_into_a_closed_pipe_exits_0_without_a_panic() {
    // The pipe's reader is gone before mcpctl writes a byte, as after `| head -1` has read
    // its line: every write fails with EPIPE.
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    for shell in ["bash", "zsh", "fish"] {
        let out = Command::new(env!("CARGO_BIN_EXE_mcpctl"))
            .args(["completion", shell])
            .stdout(writer.try_clone().expect("clone the pipe"))
            .stderr(Stdio::piped())
            .output()
            .expect("mcpctl runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{shell}: {stderr}");
        assert!(!stderr.contains("panicked"), "{shell}: {stderr}");
    }
}

#[test]
fn every_listing_command_into_a_closed_pipe_exits_0() {
    let home = Home::new();
    home.apply("kind: Prompt\nmetadata: {name: p}\nspec: {content: hi}\n");
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    for args in [
        &["get", "proxymodels"][..],
        &["describe", "proxymodel", "default"],
        &["get", "prompts", "-o", "yaml"],
        &["--help"],
    ] {
        let out = home
            .command(args)
            .stdout(writer.try_clone().expect("clone the pipe"))
            .stderr(Stdio::piped())
            .output()
            .expect("mcpctl runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn requests_piped_in_are_answered_before_mcpctl_exits() {
    // The whole input at once and then end-of-file, as `printf ... | mcpctl proxy` gives it:
    // the upstream answers `stall` only after a while, well after stdin has closed.
    let input = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "pipe", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "stall", "params": {"seconds": 0.5}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "custom/echo", "params": {"n": 3}}),
    ]
    .iter()
    .map(|m| format!("{m}\n"))
    .collect::<String>();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcpctl"))
        .arg("proxy")
        .arg("--")
        .args(upstream())
        .env_remove("MCPCTL_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mcpctl starts");
    let mut stdin = child.stdin.take().expect("stdin is piped");
    stdin
        .write_all(input.as_bytes())
        .expect("write the requests");
    drop(stdin);
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .expect("stdout is piped")
        .read_to_string(&mut stdout)
        .expect("read stdout");
    let out = child.wait_with_output().expect("mcpctl exits");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let answered: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON lines"))
        .collect();
    for id in 1..=3 {
        let answer = answered
            .iter()
            .find(|m| m["id"] == id)
            .unwrap_or_else(|| panic!("no answer to request {id}: {stdout}\nstderr: {stderr}"));
        assert!(answer.get("result").is_some(), "{answer}");
    }
}

#[test]
fn the_local_identity_is_the_users_name_without_user_set() {
    let expected = Command::new("id").arg("-un").output().expect("id runs");
    let expected = String::from_utf8_lossy(&expected.stdout).trim().to_owned();
    let home = Home::new();
    let log = home.path.join("audit.log");
    let path = format!("audit.path={}", log.display());
    let mut args = vec![
        "client",
        "--model",
        "audit",
        "--set",
        &path,
        "--set",
        "audit.key=a key for this test only",
        "tools",
        "list",
        "--",
    ];
    let upstream = upstream();
    args.extend(upstream.iter().map(String::as_str));
    let out = home
        .command(&args)
        .env_remove("USER")
        .env_remove("USERNAME")
        .output()
        .expect("mcpctl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&log).expect("the audit log");
    let first: Value = serde_json::from_str(text.lines().next().expect("a record")).unwrap();
    assert_eq!(first["identity"], expected.as_str(), "{text}");
    assert_ne!(first["identity"], "unknown");
}

#[test]
fn a_deprecation_is_one_line_on_stderr_not_a_log_record() {
    let home = Home::new();
    let stderr = home
        .run_with_stdin(
            &["apply", "-f", "-"],
            "kind: Server\nmetadata: {name: s}\nspec: {command: x}\n---\n\
             kind: Project\nmetadata: {name: p}\nspec: {servers: [s], gated: true}\n",
        )
        .stderr;
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].starts_with("mcpctl: warning: <stdin>: project `p` says `gated: true`"),
        "{stderr}"
    );
    assert!(!stderr.contains("WARN"), "{stderr}");
}

#[test]
fn apply_reports_every_wrong_document_and_writes_nothing() {
    let home = Home::new();
    let stderr = home
        .run_with_stdin(
            &["apply", "-f", "-"],
            "kind: Server\nmetadata: {name: good}\nspec: {command: x}\n---\n\
             kind: Server\nmetadata: {name: a}\nspec: {comand: x}\n---\n\
             kind: Prompt\nmetadata: {name: b}\nspec: {content: hi, tags: 3}\n---\n\
             kind: Project\nmetadata: {name: c}\nspec: {servers: [good], proxymodel: gate}\n",
        )
        .fails(1);
    assert!(stderr.contains("3 documents are wrong"), "{stderr}");
    for (line, field) in [
        (7, "spec.comand"),
        (11, "spec.tags"),
        (15, "spec.proxymodel"),
    ] {
        assert!(
            stderr.contains(&format!("<stdin>, line {line}"))
                && stderr.contains(&format!("field `{field}`")),
            "line {line}, {field}: {stderr}"
        );
    }
    assert!(home.files().is_empty(), "{:?}", home.files());
}

#[test]
fn deleting_a_proxy_model_says_models_are_code() {
    let home = Home::new();
    for kind in ["proxymodel", "proxymodels"] {
        let stderr = home.run(&["delete", kind, "gate"]).fails(1);
        assert!(
            stderr.contains("proxy models are code: they cannot be deleted"),
            "{stderr}"
        );
        assert!(stderr.contains("`gate`"), "{stderr}");
    }
}

#[test]
fn a_gated_call_does_not_promise_a_tool_that_may_not_exist() {
    let home = Home::new();
    let mut args = vec![
        "client",
        "--model",
        "gate",
        "tools",
        "call",
        "no_such_tool",
        "--",
    ];
    let upstream = upstream();
    args.extend(upstream.iter().map(String::as_str));
    let stdout = home.run(&args).ok();
    assert!(stdout.contains("This session is gated"), "{stdout}");
    assert!(!stdout.contains("becomes available"), "{stdout}");
    assert!(
        stdout.contains("`no_such_tool` too, if the server has a tool of that name"),
        "{stdout}"
    );
}
