//! The admin listener end to end: the real `mcpctl serve --admin-listen` in front of the
//! scripted upstream (with the audit model), driven over HTTP: every endpoint, a missing and
//! a wrong token, ending a client's session, apply, and `/metrics` read by a Prometheus text
//! parser after real calls.

#[path = "support/home.rs"]
mod home;
mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use wait_timeout::ChildExt;

use serde_json::{Value, json};

use home::Home;
use support::WAIT;

const TOKEN: &str = "admin-token-0123456789abcdef";

/// A running `mcpctl serve` with an admin listener, stopped when dropped.
struct Served {
    child: Child,
    mcp: String,
    admin: String,
    stderr: Arc<Mutex<String>>,
}

impl Served {
    /// With the audit model.
    fn start(home: &Home) -> Self {
        let audit = home.path.join("audit.jsonl");
        Self::start_with(
            home,
            &[
                "--model",
                "audit",
                "--set",
                &format!("audit.path={}", audit.display()),
                "--set",
                "audit.key=an-audit-key-for-the-test",
            ],
        )
    }

    fn start_with(home: &Home, model: &[&str]) -> Self {
        let tokens = home.write("admin-tokens", &format!("ops {TOKEN}\n"));
        let mut child = home
            .command(&[
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--admin-listen",
                "127.0.0.1:0",
            ])
            .arg("--admin-tokens")
            .arg(&tokens)
            .args(model)
            .args(["--log", "info", "--"])
            .args(support::scripted_upstream())
            .env("SCRIPTED_TOOLS", "echo")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("mcpctl starts");
        let stderr = Arc::new(Mutex::new(String::new()));
        let pipe = child.stderr.take().expect("stderr is piped");
        let (tx, rx) = channel();
        let log = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("listening on ") {
                    let _ = tx.send(("mcp", url.to_owned()));
                }
                if let Some(url) = line.strip_prefix("admin listening on ") {
                    let _ = tx.send(("admin", url.trim_end_matches('/').to_owned()));
                }
                log.lock().unwrap().push_str(&line);
                log.lock().unwrap().push('\n');
            }
        });
        let mut served = Self {
            child,
            mcp: String::new(),
            admin: String::new(),
            stderr,
        };
        for _ in 0..2 {
            match rx.recv_timeout(WAIT) {
                Ok(("mcp", url)) => served.mcp = url,
                Ok((_, url)) => served.admin = url,
                Err(_) => panic!("serve did not start: {}", served.stderr.lock().unwrap()),
            }
        }
        served
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        if let Ok(Some(_)) = self.child.wait_timeout(WAIT) {
            return;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 exchange; an SSE answer is read until its first event with an `id`.
struct Answer {
    status: u16,
    headers: String,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    fn header(&self, name: &str) -> Option<String> {
        self.headers.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    }
}

fn http(url: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    let authority = url.trim_start_matches("http://").split('/').next().unwrap();
    let mut stream = TcpStream::connect(authority).expect("connect");
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = stream.read(&mut chunk).unwrap_or(0);
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&raw);
        if text.contains("text/event-stream") && text.contains("data: {") && text.ends_with("\n\n")
        {
            break;
        }
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP answer");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    Answer {
        status,
        headers: head.to_owned(),
        body: body.to_owned(),
    }
}

fn admin(served: &Served, method: &str, path: &str) -> Answer {
    http(
        &served.admin,
        method,
        path,
        &[("Authorization", &format!("Bearer {TOKEN}"))],
        "",
    )
}

/// An MCP request over streamable HTTP; returns the answer's JSON-RPC message.
fn mcp(served: &Served, session: Option<&str>, message: &Value) -> Answer {
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    if let Some(id) = session {
        headers.push(("Mcp-Session-Id", id));
    }
    http(&served.mcp, "POST", "/mcp", &headers, &message.to_string())
}

fn initialize(served: &Served) -> String {
    let answer = mcp(
        served,
        None,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "admin-test-client", "version": "7.1"}}}),
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    answer.header("mcp-session-id").expect("a session id")
}

#[test]
fn every_endpoint_refuses_a_missing_or_wrong_token() {
    let home = Home::new();
    let served = Served::start(&home);
    for path in [
        "/api/servers",
        "/api/tools",
        "/api/sessions",
        "/api/proxymodels",
        "/api/project",
        "/api/audit",
        "/api/logs",
        "/api/openapi.json",
        "/metrics",
    ] {
        let missing = http(&served.admin, "GET", path, &[], "");
        assert_eq!(missing.status, 401, "{path} without a token");
        assert!(missing.json()["error"]["message"].is_string());
        let wrong = http(
            &served.admin,
            "GET",
            path,
            &[("Authorization", "Bearer not-the-token")],
            "",
        );
        assert_eq!(wrong.status, 401, "{path} with a wrong token");
        assert!(!wrong.body.contains("servers") && !wrong.body.contains("mcp_requests"));
        let cookie = http(
            &served.admin,
            "GET",
            path,
            &[("Cookie", "mcpctl_admin=guessed")],
            "",
        );
        assert_eq!(cookie.status, 401, "{path} with a made-up cookie");
    }
    let apply = http(
        &served.admin,
        "POST",
        "/api/apply",
        &[("Content-Type", "application/yaml")],
        "kind: Prompt\n",
    );
    assert_eq!(apply.status, 401);
}

#[test]
fn the_api_shows_servers_tools_models_project_and_calls_tools() {
    let home = Home::new();
    let served = Served::start(&home);
    let servers = admin(&served, "GET", "/api/servers");
    assert_eq!(servers.status, 200, "{}", servers.body);
    let server = &servers.json()["servers"][0];
    assert_eq!(server["name"], "python3");
    assert_eq!(server["status"], "running");
    assert_eq!(server["toolCount"], 2);
    assert_eq!(server["restarts"], 0);

    let tools = admin(&served, "GET", "/api/tools").json();
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["t", "echo"]);
    assert_eq!(tools["tools"][1]["server"], "python3");
    assert_eq!(tools["tools"][1]["restricted"], false);

    let called = http(
        &served.admin,
        "POST",
        "/api/tools/echo/call",
        &[
            ("Authorization", &format!("Bearer {TOKEN}")),
            ("Content-Type", "application/json"),
        ],
        r#"{"arguments": {"text": "hi"}}"#,
    );
    assert_eq!(called.status, 200, "{}", called.body);
    assert_eq!(called.json()["content"][0]["text"], "called echo");
    let bad = http(
        &served.admin,
        "POST",
        "/api/tools/echo/call",
        &[("Authorization", &format!("Bearer {TOKEN}"))],
        "[1]",
    );
    assert_eq!(bad.status, 400);

    let models = admin(&served, "GET", "/api/proxymodels").json();
    let audit = models["proxyModels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "audit")
        .expect("audit listed");
    assert_eq!(audit["running"], true);
    let project = admin(&served, "GET", "/api/project").json();
    assert_eq!(project["model"], "audit");
    assert!(project["project"].is_null());

    let openapi = admin(&served, "GET", "/api/openapi.json").json();
    assert_eq!(openapi["openapi"], "3.1.0");
    for path in [
        "/api/servers",
        "/api/tools",
        "/api/sessions/{id}",
        "/api/apply",
        "/metrics",
    ] {
        assert!(openapi["paths"][path].is_object(), "{path} documented");
    }

    let audit = admin(&served, "GET", "/api/audit?tail=10").json();
    assert_eq!(audit["verification"]["state"], "intact", "{audit}");
    let last = audit["records"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["method"], "tools/call", "{last}");

    let logs = admin(&served, "GET", "/api/logs?tail=500").json();
    assert!(
        logs["logs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["message"].as_str().unwrap().contains("started upstream")),
        "{logs}"
    );
    let follow = http(
        &served.admin,
        "GET",
        "/api/logs?follow&tail=1",
        &[("Authorization", &format!("Bearer {TOKEN}"))],
        "",
    );
    assert_eq!(follow.status, 200);
    assert!(follow.body.contains("event: log"), "{}", follow.body);
}

#[test]
fn a_session_ended_by_the_admin_is_gone_for_its_client() {
    let home = Home::new();
    let served = Served::start(&home);
    let id = initialize(&served);
    let sessions = admin(&served, "GET", "/api/sessions").json();
    let listed = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["clientName"] == "admin-test-client")
        .expect("the session is listed")
        .clone();
    // Listed by its log digest, not by the id that uses it.
    let digest = listed["id"].as_str().expect("an id").to_owned();
    assert!(digest.starts_with("http-") && digest != id, "{listed}");
    assert_eq!(listed["clientName"], "admin-test-client");
    assert_eq!(listed["clientVersion"], "7.1");
    assert_eq!(listed["model"], "audit");
    assert_eq!(listed["requests"], 1);
    assert_eq!(listed["queuedBytes"], 0, "{listed}");
    assert!(listed["startedAt"].as_str().unwrap().ends_with('Z'));

    let call = mcp(
        &served,
        Some(&id),
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    );
    assert_eq!(call.status, 200, "{}", call.body);

    // A cookie-less, token-less DELETE does nothing.
    assert_eq!(
        http(
            &served.admin,
            "DELETE",
            &format!("/api/sessions/{digest}"),
            &[],
            ""
        )
        .status,
        401
    );
    let ended = admin(&served, "DELETE", &format!("/api/sessions/{digest}"));
    assert_eq!(ended.status, 200, "{}", ended.body);
    let after = mcp(
        &served,
        Some(&id),
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
    );
    assert_eq!(after.status, 404, "{}", after.body);
    assert_eq!(
        admin(&served, "DELETE", &format!("/api/sessions/{digest}")).status,
        404
    );
    let sessions = admin(&served, "GET", "/api/sessions").json();
    assert!(
        sessions["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["id"] != digest.as_str())
    );
}

#[test]
fn apply_writes_good_documents_and_refuses_bad_ones_whole() {
    let home = Home::new();
    let served = Served::start(&home);
    let auth = format!("Bearer {TOKEN}");
    let good = "kind: Prompt\nmetadata: { name: style }\nspec: { content: be brief }\n---\nkind: Server\nmetadata: { name: files }\nspec: { command: mcp-files }\n";
    let applied = http(
        &served.admin,
        "POST",
        "/api/apply",
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/yaml"),
        ],
        good,
    );
    assert_eq!(applied.status, 200, "{}", applied.body);
    let results = applied.json()["results"].clone();
    assert_eq!(
        results[0],
        json!({"kind": "Prompt", "name": "style", "action": "created"})
    );
    assert_eq!(results[1]["action"], "created");
    let again = http(
        &served.admin,
        "POST",
        "/api/apply",
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
        r#"{"kind": "Prompt", "metadata": {"name": "style"}, "spec": {"content": "be brief"}}"#,
    );
    assert_eq!(
        again.json()["results"][0]["action"],
        "unchanged",
        "{}",
        again.body
    );
    let listed = home.run(&["get", "prompts", "-o", "json"]).ok();
    assert!(listed.contains("style"), "{listed}");

    let bad = "kind: Prompt\nmetadata: { name: other }\nspec: { content: fine }\n---\nkind: Server\nmetadata: { name: broken }\nspec: { command: 42, bogus: true }\n";
    let refused = http(
        &served.admin,
        "POST",
        "/api/apply",
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/yaml"),
        ],
        bad,
    );
    assert_eq!(refused.status, 400, "{}", refused.body);
    let errors = refused.json()["errors"].clone();
    assert!(
        errors[0]["message"].is_string() && errors[0]["line"].is_number(),
        "{errors}"
    );
    // All or nothing: the good document of the bad request was not written.
    assert!(
        !home
            .run(&["get", "prompts", "-o", "json"])
            .ok()
            .contains("other")
    );
    let wrong_type = http(
        &served.admin,
        "POST",
        "/api/apply",
        &[("Authorization", &auth), ("Content-Type", "text/plain")],
        good,
    );
    assert_eq!(wrong_type.status, 415);
}

#[test]
fn metrics_count_real_calls() {
    let home = Home::new();
    let served = Served::start(&home);
    let id = initialize(&served);
    for n in 0..3 {
        let answer = mcp(
            &served,
            Some(&id),
            &json!({"jsonrpc": "2.0", "id": 10 + n, "method": "tools/call", "params": {"name": "echo", "arguments": {}}}),
        );
        assert_eq!(answer.status, 200);
    }
    // The scripted upstream has no prompts: a JSON-RPC error, labelled with its code.
    let failed = mcp(
        &served,
        Some(&id),
        &json!({"jsonrpc": "2.0", "id": 20, "method": "prompts/get", "params": {"name": "review"}}),
    );
    assert_eq!(failed.status, 200);
    let text = admin(&served, "GET", "/metrics").body;
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned())))
        .expect("Prometheus text");
    let value = |name: &str, method: &str| {
        scrape
            .samples
            .iter()
            .find(|s| {
                s.metric == name
                    && s.labels.get("mcp_method_name") == Some(method)
                    && s.labels.get("outcome") == Some("ok")
            })
            .map(|s| s.value.clone())
    };
    match value("mcp_requests_total", "tools/call") {
        // OpenMetrics names the family `mcp_requests` and its sample `_total`; the parser
        // then reads the sample as untyped.
        Some(prometheus_parse::Value::Counter(n) | prometheus_parse::Value::Untyped(n)) => {
            assert_eq!(n, 3.0, "{text}")
        }
        other => panic!("no tools/call counter: {other:?}\n{text}"),
    }
    let sample = scrape
        .samples
        .iter()
        .find(|s| {
            s.metric == "mcp_requests_total"
                && s.labels.get("mcp_method_name") == Some("tools/call")
        })
        .unwrap();
    assert_eq!(sample.labels.get("server"), Some("python3"));
    // The OpenTelemetry MCP conventions' attributes: the tool, and no error.
    assert_eq!(
        sample.labels.get("gen_ai_tool_name"),
        Some("echo"),
        "{text}"
    );
    assert_eq!(sample.labels.get("error_type"), Some(""), "{text}");
    let failed = scrape
        .samples
        .iter()
        .find(|s| {
            s.metric == "mcp_requests_total"
                && s.labels.get("mcp_method_name") == Some("prompts/get")
        })
        .unwrap_or_else(|| panic!("no prompts/get counter:\n{text}"));
    assert_eq!(failed.labels.get("gen_ai_prompt_name"), Some("review"));
    assert_eq!(failed.labels.get("outcome"), Some("error"));
    assert!(
        failed
            .labels
            .get("error_type")
            .is_some_and(|code| code.parse::<i64>().is_ok_and(|c| c < 0)),
        "a JSON-RPC error code: {text}"
    );
    assert!(
        scrape
            .samples
            .iter()
            .any(|s| s.metric == "mcpctl_build_info" && s.labels.get("version").is_some()),
        "{text}"
    );
    match value("mcp_server_operation_duration_seconds", "tools/call") {
        Some(prometheus_parse::Value::Histogram(buckets)) => {
            assert_eq!(buckets.last().map(|b| b.count), Some(3.0), "{text}");
            assert!(buckets.iter().any(|b| b.less_than == 0.01));
        }
        other => panic!("no duration histogram: {other:?}\n{text}"),
    }
    match scrape
        .samples
        .iter()
        .find(|s| s.metric == "mcp_sessions_open")
        .map(|s| &s.value)
    {
        Some(prometheus_parse::Value::Gauge(n)) => assert_eq!(*n, 1.0),
        other => panic!("no open-sessions gauge: {other:?}"),
    }
    // Every answer was read: nothing waits for the client.
    match scrape
        .samples
        .iter()
        .find(|s| s.metric == "mcp_client_queue_bytes")
        .map(|s| &s.value)
    {
        Some(prometheus_parse::Value::Gauge(n)) => assert_eq!(*n, 0.0),
        other => panic!("no client-queue gauge: {other:?}\n{text}"),
    }
}

#[test]
fn the_flags_are_checked() {
    let home = Home::new();
    let tokens = home.write("t", &format!("ops {TOKEN}\n"));
    let upstream = support::scripted_upstream();
    let mut args = vec![
        "serve",
        "--admin-listen",
        "127.0.0.1:0",
        "--model",
        "passthrough",
        "--",
    ];
    args.extend(upstream.iter().map(String::as_str));
    let usage = home.run(&args).fails(2);
    assert!(usage.contains("--admin-tokens"), "{usage}");
    let tokens = tokens.display().to_string();
    let mut args = vec![
        "serve",
        "--admin-listen",
        "0.0.0.0:0",
        "--admin-tokens",
        &tokens,
        "--model",
        "passthrough",
        "--",
    ];
    args.extend(upstream.iter().map(String::as_str));
    let public = home.run(&args).fails(1);
    assert!(public.contains("--admin-listen-public"), "{public}");
}

#[test]
fn the_ui_cookie_authenticates_and_changes_need_the_csrf_header() {
    let home = Home::new();
    let served = Served::start(&home);
    let wrong = http(&served.admin, "GET", "/ui/?token=not-it", &[], "");
    assert_eq!(wrong.status, 303);
    assert!(wrong.header("set-cookie").is_none());
    let login = http(
        &served.admin,
        "GET",
        &format!("/ui/?token={TOKEN}"),
        &[],
        "",
    );
    assert_eq!(login.status, 303);
    // The token leaves the address: the redirect goes to the bare page.
    assert_eq!(login.header("location").as_deref(), Some("/ui/"));
    let set = login.header("set-cookie").expect("a cookie");
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    let cookie = set.split(';').next().unwrap().to_owned();
    assert!(!cookie.contains(TOKEN));
    let me = http(
        &served.admin,
        "GET",
        "/api/whoami",
        &[("Cookie", &cookie)],
        "",
    );
    assert_eq!(me.status, 200, "{}", me.body);
    assert_eq!(me.json()["subject"], "ops");
    let csrf = me.json()["csrf"].as_str().expect("a CSRF token").to_owned();
    let sessions = http(
        &served.admin,
        "GET",
        "/api/sessions",
        &[("Cookie", &cookie)],
        "",
    );
    assert_eq!(sessions.status, 200);
    let forged = http(
        &served.admin,
        "DELETE",
        "/api/sessions/abc",
        &[("Cookie", &cookie)],
        "",
    );
    assert_eq!(forged.status, 403, "{}", forged.body);
    let bad = http(
        &served.admin,
        "DELETE",
        "/api/sessions/abc",
        &[("Cookie", &cookie), ("X-Admin-CSRF", "guess")],
        "",
    );
    assert_eq!(bad.status, 403);
    let allowed = http(
        &served.admin,
        "DELETE",
        "/api/sessions/abc",
        &[("Cookie", &cookie), ("X-Admin-CSRF", &csrf)],
        "",
    );
    assert_eq!(allowed.status, 404, "{}", allowed.body);
    // Revoking the token in the file ends its UI logins too.
    home.write("admin-tokens", "someone-else another-token-0123456789\n");
    let revoked = http(
        &served.admin,
        "GET",
        "/api/sessions",
        &[("Cookie", &cookie)],
        "",
    );
    assert_eq!(revoked.status, 401);
}

#[test]
fn code_mode_over_rest() {
    let home = Home::new();
    let served = Served::start_with(&home, &["--model", "codemode"]);
    let auth = format!("Bearer {TOKEN}");
    let post = |path: &str, body: &str| {
        http(
            &served.admin,
            "POST",
            path,
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/json"),
            ],
            body,
        )
    };
    let found = post("/api/search", r#"{"query": "echo"}"#);
    assert_eq!(found.status, 200, "{}", found.body);
    assert!(found.body.contains("echo"), "{}", found.body);
    let inspected = post("/api/inspect", r#"{"names": ["upstream.echo"]}"#);
    assert_eq!(inspected.status, 200, "{}", inspected.body);
    assert!(inspected.body.contains("echo"), "{}", inspected.body);
    let executed = post(
        "/api/execute",
        r#"{"code": "return await upstream.echo({});"}"#,
    );
    assert_eq!(executed.status, 200, "{}", executed.body);
    assert!(executed.body.contains("called echo"), "{}", executed.body);
    assert_eq!(post("/api/execute", "[]").status, 400);
    let text = admin(&served, "GET", "/metrics").body;
    assert!(
        text.contains("mcp_codemode_executions_total{outcome=\"ok\"} 1"),
        "{text}"
    );
}

#[test]
fn code_mode_endpoints_need_code_mode() {
    let home = Home::new();
    let served = Served::start_with(&home, &["--model", "passthrough"]);
    let answer = http(
        &served.admin,
        "POST",
        "/api/execute",
        &[("Authorization", &format!("Bearer {TOKEN}"))],
        r#"{"code": "return 1;"}"#,
    );
    assert_eq!(answer.status, 404);
    assert!(
        answer.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("codemode")
    );
}
