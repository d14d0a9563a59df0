//! End to end through the `mcpctl` binary: a project's routes applied by
//! `mcpctl proxy PROJECT`, and the audit model writing a log that `mcpctl audit verify`
//! checks, then finds tampered with.

#[path = "support/home.rs"]
mod home;

use std::path::Path;

use home::{Home, Run};
use serde_json::Value;

const KEY_VAR: &str = "MCPCTL_TEST_AUDIT_KEY";
const KEY: &str = "a key for the tests, never logged";

fn fixture() -> String {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/scripted_upstream.py")
        .display()
        .to_string()
}

/// The scripted upstream, listing `admin-reset` and `echo_args` beside `t`.
fn server(name: &str) -> String {
    format!(
        "kind: Server\nmetadata: {{name: {name}}}\nspec:\n  command: python3\n  args: [-u, '{}']\n  env:\n    SCRIPTED_TOOLS: admin-reset,echo_args\n",
        fixture()
    )
}

/// Runs `mcpctl ARGS` with the audit key in the environment.
fn run_keyed(home: &Home, args: &[&str]) -> Run {
    Run::from(
        home.command(args)
            .env(KEY_VAR, KEY)
            .output()
            .expect("mcpctl runs"),
    )
}

fn json_documents(stdout: &str) -> Vec<Value> {
    serde_json::Deserializer::from_str(stdout)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("not JSON documents ({e}): {stdout}"))
}

fn names(listed: &Value) -> Vec<&str> {
    listed["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("a tool list: {listed}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default())
        .collect()
}

#[test]
fn a_projects_routes_apply_through_mcpctl_proxy() {
    let home = Home::new();
    home.apply(&format!(
        "{}---\nkind: Project\nmetadata: {{name: routed}}\nspec:\n  servers: [scripted]\n  proxyModel: gate\n  routes: {{hidden: [\"admin-*\"], passThrough: [echo_args]}}\n",
        server("scripted")
    ));
    let described = home.run(&["describe", "project", "routed"]).ok();
    assert!(
        described.contains("Routes:\n  hidden:       admin-*\n  passThrough:  echo_args"),
        "{described}"
    );
    // Gated, yet the pass-through tool is listed and answers; the hidden one is neither.
    let run = home.run(&[
        "client",
        "routed",
        "-o",
        "json",
        "tools",
        "list",
        "tools",
        "call",
        "echo_args",
        r#"{"a":1}"#,
        "tools",
        "call",
        "ADMIN-reset",
    ]);
    let stderr = run.stderr.clone();
    let results = json_documents(&run.stdout);
    assert_eq!(
        run.code,
        Some(1),
        "the hidden call fails the session: {stderr}"
    );
    assert_eq!(names(&results[0]), ["begin_session", "echo_args"]);
    assert_eq!(results[1]["content"][0]["text"], r#"{"a": 1}"#);
    assert!(
        stderr.contains("unknown tool `ADMIN-reset`: it is hidden by this proxy's routes"),
        "{stderr}"
    );
}

fn verify(home: &Home, log: &Path) -> Run {
    run_keyed(
        home,
        &[
            "audit",
            "verify",
            &log.display().to_string(),
            "--key-env",
            KEY_VAR,
        ],
    )
}

fn audited_session(home: &Home, log: &Path, extra: &[&str], steps: &[&str]) -> String {
    let log = log.display().to_string();
    let path = format!("audit.path={log}");
    let key_env = format!("audit.keyEnv={KEY_VAR}");
    let mut args = vec![
        "client", "--model", "audit", "--set", &path, "--set", &key_env,
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(steps);
    let fixture = fixture();
    args.extend_from_slice(&["--", "python3", "-u", &fixture]);
    run_keyed(home, &args).ok()
}

#[test]
fn the_audit_log_verifies_and_every_kind_of_tampering_is_found_at_its_line() {
    let home = Home::new();
    let log = home.path.join("logs/audit.log");
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    audited_session(&home, &log, &[], &["tools", "list", "tools", "call", "t"]);
    // A second proxy process continues the chain.
    audited_session(
        &home,
        &log,
        &["--set", "audit.logArguments=true"],
        &[
            "tools",
            "call",
            "echo_args",
            r#"{"q":"x","password":"hunter2"}"#,
        ],
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("hunter2") && !text.contains(KEY), "{text}");
    let lines: Vec<String> = text.lines().map(str::to_owned).collect();
    assert_eq!(
        lines.len(),
        5,
        "two initializes, a list and two calls: {text}"
    );
    let last: Value = serde_json::from_str(&lines[4]).unwrap();
    assert_eq!(last["target"], "echo_args");
    assert_eq!(last["arguments"]["password"], "[redacted]");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&log).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the log is private");
    }

    let intact = verify(&home, &log).ok();
    assert!(intact.contains("is intact: 5 record(s)"), "{intact}");
    let methods: Vec<String> = lines
        .iter()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["method"].to_string())
        .collect();
    assert_eq!(
        methods,
        [
            r#""initialize""#,
            r#""tools/list""#,
            r#""tools/call""#,
            r#""initialize""#,
            r#""tools/call""#
        ]
    );

    let tampered = home.path.join("logs/tampered.log");
    let check = |lines: Vec<String>, line: u64, says: &str| {
        std::fs::write(&tampered, lines.join("\n") + "\n").unwrap();
        let err = verify(&home, &tampered).fails(1);
        assert!(
            err.contains(&format!("is not intact at line {line}:")) && err.contains(says),
            "expected line {line} ({says}): {err}"
        );
    };
    let mut edited = lines.clone();
    edited[2] = edited[2].replace("\"target\":\"t\"", "\"target\":\"u\"");
    check(edited, 3, "does not match its MAC");
    let mut removed = lines.clone();
    removed.remove(3);
    check(removed, 4, "record 5, but record 4 was expected");
    let mut reordered = lines.clone();
    reordered.swap(1, 2);
    check(reordered, 2, "removed or reordered");
    let mut inserted = lines.clone();
    inserted.insert(2, lines[0].clone());
    check(inserted, 3, "reordered or repeated");
    let mut forged = lines.clone();
    forged.insert(1, lines[1].replace("\"seq\":2", "\"seq\":9"));
    check(forged, 2, "does not match its MAC");

    let wrong_key = home.write("wrong.key", "not the key\n");
    let err = home
        .run(&[
            "audit",
            "verify",
            &log.display().to_string(),
            "--key-file",
            &wrong_key.display().to_string(),
        ])
        .fails(1);
    assert!(
        err.contains("line 1") && err.contains("not the key"),
        "{err}"
    );
    let usage = home
        .run(&["audit", "verify", &log.display().to_string()])
        .fails(2);
    assert!(usage.contains("--key-env"), "{usage}");
    let missing = home
        .run(&[
            "audit",
            "verify",
            "nope.log",
            "--key-env",
            "NO_SUCH_VAR_SET",
        ])
        .fails(1);
    assert!(missing.contains("NO_SUCH_VAR_SET"), "{missing}");
}

#[test]
fn two_proxy_processes_share_one_log() {
    let home = Home::new();
    let log = home.path.join("shared.log");
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                let steps = ["tools", "call", "t"].repeat(8);
                audited_session(&home, &log, &[], &steps);
            });
        }
    });
    let intact = verify(&home, &log).ok();
    assert!(intact.contains("is intact: 18 record(s)"), "{intact}");
}

#[test]
fn a_hidden_call_is_audited_as_rejected_through_a_project() {
    let home = Home::new();
    let log = home.path.join("project.log");
    home.apply(&format!(
        "{}---\nkind: Project\nmetadata: {{name: audited}}\nspec:\n  servers: [scripted]\n  proxyModel: audit\n  config:\n    audit: {{path: '{}', keyEnv: {KEY_VAR}}}\n  routes: {{hidden: [admin-reset], passThrough: [echo_args]}}\n",
        server("scripted"),
        log.display()
    ));
    let run = run_keyed(
        &home,
        &[
            "client",
            "audited",
            "tools",
            "call",
            "echo_args",
            "{}",
            "tools",
            "call",
            "admin-reset",
        ],
    );
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let records: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let outcomes: Vec<(&str, &str)> = records
        .iter()
        .map(|r| {
            (
                r["target"].as_str().unwrap_or("-"),
                r["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            ("-", "ok"),
            ("echo_args", "ok"),
            ("admin-reset", "rejected")
        ]
    );
    verify(&home, &log).ok();
}

/// `mcpctl proxy PROJECT` spoken to in raw lines (the SDKs cannot send a duplicate key or a
/// lone surrogate); killed when dropped.
struct RawProxy {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<String>,
}

impl RawProxy {
    fn start(home: &Home, project: &str) -> Self {
        use std::io::BufRead as _;
        let mut child = home
            .command(&["proxy", project])
            .env(KEY_VAR, KEY)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("mcpctl starts");
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Self {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, line: &str) {
        use std::io::Write as _;
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{line}").expect("write to mcpctl");
        stdin.flush().expect("flush");
    }

    /// Sends a request with raw `params` and waits for its response.
    fn request(&mut self, id: u64, method: &str, params: &str) -> Value {
        self.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#
        ));
        loop {
            let line = self
                .lines
                .recv_timeout(std::time::Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("no answer to {method} {params}"));
            let message: Value = serde_json::from_str(&line).expect("a JSON line");
            if message["id"] == id && message.get("method").is_none() {
                return message;
            }
        }
    }

    /// Closes stdin and waits for the proxy to exit (so the audit log is complete).
    fn finish(mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

impl Drop for RawProxy {
    fn drop(&mut self) {
        drop(self.stdin.take());
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

#[test]
fn what_the_proxy_cannot_read_unambiguously_is_refused_and_audited_as_rejected() {
    let home = Home::new();
    let log = home.path.join("strict.log");
    home.apply(&format!(
        "{}---\nkind: Project\nmetadata: {{name: strict}}\nspec:\n  servers: [scripted]\n  proxyModel: audit\n  config:\n    audit: {{path: '{}', keyEnv: {KEY_VAR}}}\n  routes: {{hidden: [\"admin-*\"], passThrough: [echo_args]}}\n",
        server("scripted"),
        log.display()
    ));
    let mut proxy = RawProxy::start(&home, "strict");
    let init = proxy.request(
        0,
        "initialize",
        r#"{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}"#,
    );
    assert!(init["result"].is_object(), "{init}");
    proxy.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let attacks = [
        r#"{"\ud800":0,"name":"admin-reset","arguments":{}}"#,
        r#"{"name":1e999,"name":"admin-reset"}"#,
        r#"{"name":"\ud800\u0041","name":"admin-reset"}"#,
        r#"{"name":"echo_args","name":"admin-reset"}"#,
        r#"{"name":"admin-reset","name":"echo_args"}"#,
        r#"{"n\u0061me":"admin-reset","name":"echo_args"}"#,
        r#"{"name":"echo_args","arguments":{"a":"\udfff"},"name":"admin-reset"}"#,
        r#"{"name":["admin-reset"]}"#,
    ];
    for (n, params) in attacks.iter().enumerate() {
        let answer = proxy.request(n as u64 + 1, "tools/call", params);
        assert_eq!(answer["error"]["code"], -32602, "{params}: {answer}");
    }
    // What is not hidden still passes, loosely spelled; the server reads what was checked.
    let echoed = proxy.request(
        99,
        "tools/call",
        r#"{ "name" : "echo\u005fargs" , "arguments" : { "k" : "\u0041" } }"#,
    );
    assert_eq!(echoed["result"]["content"][0]["text"], r#"{"k": "A"}"#);
    proxy.finish();
    let records: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let calls: Vec<&str> = records
        .iter()
        .filter(|r| r["method"] == "tools/call")
        .map(|r| r["outcome"].as_str().unwrap())
        .collect();
    let mut expected = vec!["rejected"; attacks.len()];
    expected.push("ok");
    assert_eq!(calls, expected, "{records:?}");
}

#[test]
fn an_upstream_listing_the_proxy_cannot_read_is_withheld() {
    for listing in [
        // A first-wins client would see `admin-reset`, a last-wins one `t`.
        r#"{"tools":[{"name":"admin-reset"}],"tools":[{"name":"t"}]}"#,
        r#"{"tools":[{"name":"admin-reset","inputSchema":{"type":"object"},"x":"\ud800"}]}"#,
        r#"{"tools":[{"name":"admin-reset","name":"t"}]}"#,
        r#"{"tools":{"name":"admin-reset"}}"#,
    ] {
        let home = Home::new();
        home.apply(&format!(
            "kind: Server\nmetadata: {{name: scripted}}\nspec:\n  command: python3\n  args: [-u, '{}']\n  env:\n    SCRIPTED_TOOLS_LIST_RAW: '{listing}'\n---\nkind: Project\nmetadata: {{name: listed}}\nspec:\n  servers: [scripted]\n  routes: {{hidden: [\"admin-*\"]}}\n",
            fixture()
        ));
        let run = home.run(&["client", "listed", "-o", "json", "tools", "list"]);
        assert_eq!(run.code, Some(1), "{listing}: {}", run.stdout);
        assert!(!run.stdout.contains("admin-reset"), "{}", run.stdout);
        assert!(
            run.stderr.contains("cannot be read unambiguously")
                && run.stderr.contains("the listing was withheld"),
            "{listing}: {}",
            run.stderr
        );
    }
}
