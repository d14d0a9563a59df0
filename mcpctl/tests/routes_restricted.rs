//! Per-caller restrictions (`routes.restricted`), end to end through the `mcpctl` binary: a
//! project served by `mcpctl serve PROJECT` over HTTP to callers with bearer tokens from a
//! token file (`token:alice`, `token:bob`) and with HS256 JWTs carrying scopes, all at once,
//! in front of the scripted upstream; and `mcpctl proxy PROJECT` on stdio (`local:NAME`). A
//! caller the entry admits sees and calls the tool; every other caller gets what `hidden`
//! gives: not listed, refused with -32602 under every spelling, audited as `rejected`, and the
//! upstream never called.

#[path = "support/home.rs"]
mod home;
#[path = "../../mcp-middleware/tests/support/http_client.rs"]
mod http_client;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc::channel;

use home::Home;
use http_client::{Conn, MCP_HEADERS, WAIT, initialize_request};
use serde_json::{Value, json};

const KEY_VAR: &str = "MCPCTL_TEST_AUDIT_KEY";
const KEY: &str = "a key for the restricted tests";
const JWT_SECRET: &str = "a-jwt-secret-of-at-least-thirty-two-bytes";
const ALICE: &str = "token-of-alice-0123456789";
const BOB: &str = "token-of-bob-0123456789";

fn fixture() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/scripted_upstream.py")
        .display()
        .to_string()
}

/// A project in front of the scripted upstream (which lists `t`, `admin-reset`, `deploy` and
/// `echo_args`, and logs every request to `upstream.log`), audited to `audit.log`.
fn project(home: &Home, name: &str, restricted: &str) -> (PathBuf, PathBuf) {
    let audit_log = home.path.join("audit.log");
    let model = format!(
        "proxyModel: audit\n  config:\n    audit: {{path: '{}', keyEnv: {KEY_VAR}}}",
        audit_log.display()
    );
    (project_with(home, name, &model, restricted), audit_log)
}

/// [`project`] running `model` (its `proxyModel` and `config` lines); the upstream's log.
fn project_with(home: &Home, name: &str, model: &str, restricted: &str) -> PathBuf {
    let upstream_log = home.path.join("upstream.log");
    home.apply(&format!(
        "kind: Server\nmetadata: {{name: scripted}}\nspec:\n  command: python3\n  args: [-u, '{}']\n  env:\n    SCRIPTED_TOOLS: admin-reset,deploy,echo_args\n    SCRIPTED_LOG: '{}'\n---\nkind: Project\nmetadata: {{name: {name}}}\nspec:\n  servers: [scripted]\n  {model}\n  routes:\n    hidden: [t]\n    restricted:\n{restricted}",
        fixture(),
        upstream_log.display(),
    ));
    upstream_log
}

/// The audit log's `tools/call` records: (principal, target, outcome).
fn audited_calls(log: &Path) -> Vec<(String, String, String)> {
    std::fs::read_to_string(log)
        .unwrap_or_else(|e| panic!("the audit log {}: {e}", log.display()))
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|r| r["method"] == "tools/call")
        .map(|r| {
            let field = |k: &str| r[k].as_str().unwrap_or("-").to_owned();
            (field("principal"), field("target"), field("outcome"))
        })
        .collect()
}

/// How many `tools/call` requests reached the upstream (its own log).
fn upstream_calls(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|line| line.contains(r#""method": "tools/call""#))
        .count()
}

fn names(listed: &Value) -> Vec<String> {
    listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("a tool list: {listed}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// `mcpctl serve PROJECT` with a token file and a JWT secret, stopped when dropped.
struct Served {
    child: Child,
    addr: SocketAddr,
    /// The admin listener's address, when started with one.
    admin: Option<SocketAddr>,
}

impl Served {
    fn start(home: &Home, project: &str) -> Self {
        Self::start_with(home, project, &[])
    }

    /// [`Served::start`] with more arguments; waits for the admin listener too when `extra`
    /// asks for one.
    fn start_with(home: &Home, project: &str, extra: &[&str]) -> Self {
        let tokens = home.write("tokens", &format!("alice {ALICE}\nbob {BOB}\n"));
        let secret = home.write("jwt-secret", &format!("{JWT_SECRET}\n"));
        let mut child = home
            .command(&[
                "serve",
                project,
                "--listen",
                "127.0.0.1:0",
                "--tokens",
                tokens.to_str().unwrap(),
                "--jwt-secret-file",
                secret.to_str().unwrap(),
            ])
            .args(extra)
            .env(KEY_VAR, KEY)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("mcpctl serve starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("listening on http://") {
                    drop(tx.send((false, url.trim_end_matches("/mcp").to_owned())));
                } else if let Some(url) = line.strip_prefix("admin listening on http://") {
                    drop(tx.send((true, url.trim_end_matches('/').to_owned())));
                } else {
                    eprintln!("mcpctl: {line}");
                }
            }
        });
        let wanted = if extra.contains(&"--admin-listen") {
            2
        } else {
            1
        };
        let (mut addr, mut admin) = (None, None);
        for _ in 0..wanted {
            match rx.recv_timeout(WAIT) {
                Ok((is_admin, authority)) => {
                    let parsed = authority.parse().expect("a socket address");
                    if is_admin {
                        admin = Some(parsed);
                    } else {
                        addr = Some(parsed);
                    }
                }
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("mcpctl serve did not say where it listens");
                }
            }
        }
        let Some(addr) = addr else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("mcpctl serve did not say where it listens");
        };
        Self { child, addr, admin }
    }

    /// Stops the server and waits for it (so every session's audit records are written).
    fn stop(&mut self) {
        if !matches!(self.child.try_wait(), Ok(None)) {
            return;
        }
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One HTTP caller with its bearer credential and session.
struct Caller {
    conn: Conn,
    bearer: String,
    session: String,
    next_id: u64,
}

impl Caller {
    async fn start(addr: SocketAddr, credential: &str) -> Self {
        let mut caller = Self {
            conn: Conn::connect(addr).await,
            bearer: format!("Bearer {credential}"),
            session: String::new(),
            next_id: 1,
        };
        let mut headers = MCP_HEADERS.to_vec();
        headers.push(("authorization", &caller.bearer));
        let body = initialize_request("restricted");
        let mut reply = caller
            .conn
            .send("POST", &headers, body.as_bytes())
            .await
            .expect("initialize");
        assert_eq!(reply.status, 200, "initialize as {credential}");
        let session = reply
            .header("mcp-session-id")
            .expect("a session id")
            .to_owned();
        let answer = reply.message().await.expect("the initialize answer");
        assert!(answer.get("result").is_some(), "{answer}");
        assert!(reply.message().await.is_none());
        caller.session = session;
        caller
            .post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        caller
    }

    /// POSTs `body` in the session; every message of the answer's stream.
    async fn post(&mut self, body: &str) -> Vec<Value> {
        let mut headers = MCP_HEADERS.to_vec();
        headers.push(("authorization", &self.bearer));
        headers.push(("mcp-session-id", &self.session));
        let reply = self
            .conn
            .send("POST", &headers, body.as_bytes())
            .await
            .expect("POST");
        match reply.status {
            202 => {
                drop(reply.body().await);
                Vec::new()
            }
            200 => reply.messages().await,
            status => panic!("HTTP {status} for {body}"),
        }
    }

    /// A request with `params` as raw JSON text; its answer.
    async fn request(&mut self, method: &str, params: &str) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let body =
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#);
        let messages = self.post(&body).await;
        messages
            .into_iter()
            .find(|m| m["id"] == id)
            .unwrap_or_else(|| panic!("no answer to {body}"))
    }

    async fn list(&mut self) -> Vec<String> {
        names(&self.request("tools/list", "{}").await)
    }
}

/// Spellings of a call to `admin-reset` that all name it (or cannot be read unambiguously).
const ADMIN_RESET_SPELLINGS: [&str; 7] = [
    r#"{"name":"admin-reset"}"#,
    r#"{"name":"ADMIN-Reset"}"#,
    r#"{ "name" : " admin-reset\n" }"#,
    r#"{"name":"\u200badmin-reset"}"#,
    r#"{"name":"\u0061dmin-reset"}"#,
    r#"{"name":"echo_args","name":"admin-reset"}"#,
    r#"{"\ud800":0,"name":"admin-reset"}"#,
];

fn jwt(subject: &str, scopes: Value) -> String {
    use base64::Engine as _;
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 600;
    let mut claims = json!({"sub": subject, "exp": exp});
    if let (Value::Object(claims), Value::Object(scopes)) = (&mut claims, scopes) {
        claims.extend(scopes);
    }
    let signed = format!(
        "{}.{}",
        b64(br#"{"alg":"HS256","typ":"JWT"}"#),
        b64(claims.to_string().as_bytes())
    );
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, JWT_SECRET.as_bytes());
    let tag = ring::hmac::sign(&key, signed.as_bytes());
    format!("{signed}.{}", b64(tag.as_ref()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restricted_tools_for_several_callers_at_once_over_http() {
    let home = Home::new();
    let (upstream_log, audit_log) = project(
        &home,
        "restricted",
        "      - names: [\"Admin-*\", t]\n        principals: [\"token:alice\"]\n      - names: [deploy]\n        scopes: [tools:deploy]\n",
    );
    let described = home.run(&["describe", "project", "restricted"]).ok();
    assert!(
        described.contains("  restricted:   Admin-*, t only for principals token:alice\n")
            && described.contains("  restricted:   deploy only for scopes tools:deploy\n"),
        "{described}"
    );
    let mut served = Served::start(&home, "restricted");
    // Every session is open before anyone calls: they share one server.
    let mut alice = Caller::start(served.addr, ALICE).await;
    let mut bob = Caller::start(served.addr, BOB).await;
    let mut deployer = Caller::start(
        served.addr,
        &jwt("carol", json!({"scope": "read tools:deploy"})),
    )
    .await;
    let mut reader = Caller::start(served.addr, &jwt("dave", json!({"scp": ["read"]}))).await;

    // `t` is hidden, and hidden wins over restricted: alice does not see it either.
    assert_eq!(alice.list().await, ["admin-reset", "echo_args"]);
    assert_eq!(bob.list().await, ["echo_args"]);
    assert_eq!(deployer.list().await, ["deploy", "echo_args"]);
    assert_eq!(reader.list().await, ["echo_args"]);

    let called = alice
        .request("tools/call", r#"{"name":"ADMIN-reset"}"#)
        .await;
    assert_eq!(
        called["result"]["content"][0]["text"], "called ADMIN-reset",
        "{called}"
    );
    let hidden = alice.request("tools/call", r#"{"name":"t"}"#).await;
    assert_eq!(hidden["error"]["code"], -32602, "{hidden}");
    for params in ADMIN_RESET_SPELLINGS {
        let refused = bob.request("tools/call", params).await;
        assert_eq!(refused["error"]["code"], -32602, "{params}: {refused}");
        assert!(!refused.to_string().contains("restricted"), "{refused}");
    }
    // Bob's refusal is worded as a hidden tool's: he cannot tell restricted from hidden.
    let refused = bob.request("tools/call", r#"{"name":"admin-reset"}"#).await;
    assert_eq!(
        refused["error"]["message"],
        "unknown tool `admin-reset`: it is hidden by this proxy's routes (`tools/call` was not \
         sent to the server)"
    );
    let deployed = deployer.request("tools/call", r#"{"name":"deploy"}"#).await;
    assert_eq!(deployed["result"]["content"][0]["text"], "called deploy");
    for params in [r#"{"name":"deploy"}"#, r#"{"name":" DEPLOY\t"}"#] {
        let refused = reader.request("tools/call", params).await;
        assert_eq!(refused["error"]["code"], -32602, "{params}: {refused}");
        let refused = alice.request("tools/call", params).await;
        assert_eq!(refused["error"]["code"], -32602, "{params}: {refused}");
    }
    let echoed = bob
        .request("tools/call", r#"{"name":"echo_args","arguments":{"a":1}}"#)
        .await;
    assert_eq!(echoed["result"]["content"][0]["text"], r#"{"a": 1}"#);
    served.stop();

    // Only alice's, carol's and bob's echo reached the upstream.
    assert_eq!(upstream_calls(&upstream_log), 3);
    let calls = audited_calls(&audit_log);
    let outcome = |principal: &str, outcome: &str| {
        calls
            .iter()
            .filter(|(p, _, o)| p == principal && o == outcome)
            .count()
    };
    assert_eq!(outcome("token:alice", "ok"), 1, "{calls:?}");
    assert_eq!(outcome("token:alice", "rejected"), 3, "{calls:?}");
    assert_eq!(
        outcome("token:bob", "rejected"),
        ADMIN_RESET_SPELLINGS.len() + 1,
        "{calls:?}"
    );
    assert_eq!(outcome("token:bob", "ok"), 1, "{calls:?}");
    assert_eq!(outcome("jwt:carol", "ok"), 1, "{calls:?}");
    assert_eq!(outcome("jwt:dave", "rejected"), 2, "{calls:?}");
}

/// Authority follows the credential: a session opened with a token that holds a scope is
/// narrowed from the next request that presents a token of the same principal without it, and
/// widened again by one with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_narrower_token_narrows_its_principals_open_session_from_the_next_request() {
    let home = Home::new();
    let (upstream_log, audit_log) = project(
        &home,
        "narrowing",
        "      - names: [deploy]\n        scopes: [tools:deploy]\n",
    );
    let mut served = Served::start(&home, "narrowing");
    let wide = format!(
        "Bearer {}",
        jwt("carol", json!({"scope": "read tools:deploy"}))
    );
    let narrow = format!("Bearer {}", jwt("carol", json!({"scope": "read"})));
    let mut carol = Caller::start(served.addr, wide.trim_start_matches("Bearer ")).await;
    assert_eq!(carol.list().await, ["admin-reset", "deploy", "echo_args"]);
    let deployed = carol.request("tools/call", r#"{"name":"deploy"}"#).await;
    assert_eq!(deployed["result"]["content"][0]["text"], "called deploy");

    carol.bearer = narrow;
    assert_eq!(carol.list().await, ["admin-reset", "echo_args"]);
    let refused = carol.request("tools/call", r#"{"name":"deploy"}"#).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");

    carol.bearer = wide;
    let deployed = carol.request("tools/call", r#"{"name":"deploy"}"#).await;
    assert_eq!(deployed["result"]["content"][0]["text"], "called deploy");
    served.stop();

    assert_eq!(upstream_calls(&upstream_log), 2);
    let outcomes: Vec<String> = audited_calls(&audit_log)
        .into_iter()
        .map(|(principal, target, outcome)| format!("{principal} {target} {outcome}"))
        .collect();
    assert_eq!(
        outcomes,
        [
            "jwt:carol deploy ok",
            "jwt:carol deploy rejected",
            "jwt:carol deploy ok"
        ]
    );
}

#[test]
fn restricted_tools_on_stdio_follow_the_local_principal() {
    let home = Home::new();
    let me = mcp_middleware::Identity::local_user().principal();
    let (upstream_log, audit_log) = project(
        &home,
        "local",
        &format!(
            "      - names: [admin-reset]\n        principals: [\"{me}\"]\n      - names: [deploy]\n        principals: [\"local:someone-else\"]\n"
        ),
    );
    let mut proxy = RawProxy::start(&home, "local");
    let init = proxy.request(
        0,
        "initialize",
        r#"{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}"#,
    );
    assert!(init["result"].is_object(), "{init}");
    proxy.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    assert_eq!(
        names(&proxy.request(1, "tools/list", "{}")),
        ["admin-reset", "echo_args"]
    );
    let called = proxy.request(2, "tools/call", r#"{"name":" Admin-Reset"}"#);
    assert_eq!(
        called["result"]["content"][0]["text"],
        "called  Admin-Reset"
    );
    for (n, params) in [
        r#"{"name":"deploy"}"#,
        r#"{"name":"DEPLOY\n"}"#,
        r#"{"name":"\u0064eploy"}"#,
        r#"{"name":"echo_args","name":"deploy"}"#,
    ]
    .iter()
    .enumerate()
    {
        let refused = proxy.request(10 + n as u64, "tools/call", params);
        assert_eq!(refused["error"]["code"], -32602, "{params}: {refused}");
    }
    proxy.finish();
    assert_eq!(upstream_calls(&upstream_log), 1);
    let outcomes: Vec<String> = audited_calls(&audit_log)
        .into_iter()
        .map(|(principal, _, outcome)| {
            assert_eq!(principal, me);
            outcome
        })
        .collect();
    assert_eq!(
        outcomes,
        ["ok", "rejected", "rejected", "rejected", "rejected"]
    );
}

/// The admin catalog (`GET /api/tools`) lists through the admin's own session, which runs as
/// the local user: a restricted tool that admits the local user is listed and marked
/// `restricted: true`; one that does not is absent and refused like a hidden tool, and the
/// upstream never sees it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_catalog_marks_restricted_tools_and_sees_as_the_local_user() {
    const ADMIN_TOKEN: &str = "admin-token-of-the-restricted-test";
    let home = Home::new();
    let me = mcp_middleware::Identity::local_user().principal();
    let (upstream_log, _) = project(
        &home,
        "catalog",
        &format!(
            "      - names: [admin-reset]\n        principals: [\"{me}\"]\n      - names: [deploy]\n        principals: [\"local:someone-else\"]\n"
        ),
    );
    let admin_tokens = home.write("admin-tokens", &format!("ops {ADMIN_TOKEN}\n"));
    let served = Served::start_with(
        &home,
        "catalog",
        &[
            "--admin-listen",
            "127.0.0.1:0",
            "--admin-tokens",
            admin_tokens.to_str().unwrap(),
        ],
    );
    let admin = served.admin.expect("an admin listener");
    let bearer = format!("Bearer {ADMIN_TOKEN}");
    let headers = [("authorization", bearer.as_str())];

    let mut conn = Conn::connect(admin).await;
    let reply = conn
        .send_to("GET", "/api/tools", &headers, b"")
        .await
        .expect("GET /api/tools");
    assert_eq!(reply.status, 200);
    let catalog = reply.json().await;
    let marks: Vec<(String, Value)> = catalog["tools"]
        .as_array()
        .expect("a tool array")
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap_or_default().to_owned(),
                t["restricted"].clone(),
            )
        })
        .collect();
    // `t` is hidden; `deploy` is restricted to someone else; `admin-reset` admits the local
    // user and is marked.
    assert_eq!(
        marks,
        [
            ("admin-reset".to_owned(), json!(true)),
            ("echo_args".to_owned(), json!(false)),
        ],
        "{catalog}"
    );

    let mut conn = Conn::connect(admin).await;
    let call_headers = [
        ("authorization", bearer.as_str()),
        ("content-type", "application/json"),
    ];
    let refused = conn
        .send_to("POST", "/api/tools/deploy/call", &call_headers, b"{}")
        .await
        .expect("POST /api/tools/deploy/call");
    assert_eq!(refused.status, 502);
    let refused = refused.json().await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");

    let mut conn = Conn::connect(admin).await;
    let called = conn
        .send_to("POST", "/api/tools/admin-reset/call", &call_headers, b"{}")
        .await
        .expect("POST /api/tools/admin-reset/call");
    assert_eq!(called.status, 200);
    let called = called.json().await;
    assert_eq!(
        called["content"][0]["text"], "called admin-reset",
        "{called}"
    );
    drop(served);
    assert_eq!(upstream_calls(&upstream_log), 1);
}

#[test]
fn code_mode_sees_and_reaches_only_what_the_caller_may() {
    let home = Home::new();
    let me = mcp_middleware::Identity::local_user().principal();
    let upstream_log = project_with(
        &home,
        "coded",
        "proxyModel: codemode",
        &format!(
            "      - names: [admin-reset]\n        principals: [\"local:someone-else\"]\n      - names: [deploy]\n        principals: [\"{me}\"]\n"
        ),
    );
    let mut proxy = RawProxy::start(&home, "coded");
    let init = proxy.request(
        0,
        "initialize",
        r#"{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}"#,
    );
    assert!(init["result"].is_object(), "{init}");
    proxy.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let call = |proxy: &mut RawProxy, id: u64, tool: &str, args: Value| {
        let params = json!({"name": tool, "arguments": args}).to_string();
        let answer = proxy.request(id, "tools/call", &params);
        assert!(answer["result"].is_object(), "{tool}: {answer}");
        answer["result"].clone()
    };
    let overview = call(&mut proxy, 1, "overview", json!({}));
    let namespace = &overview["structuredContent"]["namespaces"][0];
    let ns = namespace["namespace"]
        .as_str()
        .expect("a namespace")
        .to_owned();
    // echo_args and deploy: `t` is hidden, `admin-reset` restricted to someone else.
    assert_eq!(namespace["toolCount"], 2, "{overview}");
    assert!(!overview.to_string().contains("admin-reset"), "{overview}");
    let searched = call(
        &mut proxy,
        2,
        "search_tools",
        json!({"query": "admin reset"}),
    );
    assert!(!searched.to_string().contains("admin-reset"), "{searched}");
    let searched = call(&mut proxy, 3, "search_tools", json!({"query": "deploy"}));
    assert_eq!(
        searched["structuredContent"]["results"][0]["tool"],
        "deploy"
    );
    let inspected = call(
        &mut proxy,
        4,
        "inspect",
        json!({"names": [format!("{ns}[\"admin-reset\"]"), format!("{ns}.deploy")]}),
    );
    let tools: Vec<&Value> = inspected["structuredContent"]["tools"]
        .as_array()
        .expect("inspected tools")
        .iter()
        .map(|t| &t["tool"])
        .collect();
    assert_eq!(tools, [&json!("deploy")], "{inspected}");
    let refused = call(
        &mut proxy,
        5,
        "execute",
        json!({"code": format!("return await {ns}[\"admin-reset\"]({{}});")}),
    );
    assert_eq!(refused["isError"], true, "{refused}");
    let deployed = call(
        &mut proxy,
        6,
        "execute",
        json!({"code": format!("return await {ns}.deploy({{}});")}),
    );
    assert!(deployed.to_string().contains("called deploy"), "{deployed}");
    proxy.finish();
    assert_eq!(upstream_calls(&upstream_log), 1, "only deploy reached it");
}

#[test]
fn bad_restrictions_are_refused_at_apply_naming_the_entry() {
    let home = Home::new();
    for (entry, says) in [
        (
            "{names: [x]}",
            "sets none of `scopes`, `principals` or `claims`",
        ),
        ("{names: [], principals: [\"token:a\"]}", "has no `names`"),
        ("{names: [x], principals: []}", "principals is empty"),
        ("{names: [x], scopes: []}", "scopes is empty"),
        ("{names: [x], claims: {}}", "claims is empty"),
        ("{names: [x], principals: [alice]}", "is not a principal"),
        (
            "{names: [x], principals: [\"jwt:https://idp:alice\"]}",
            "each part's `:` must be written `%3A`",
        ),
        (
            "{names: [x], principals: [\"token:ci bot\"]}",
            "must be written `ci%20bot`",
        ),
        ("{names: [x], users: [a]}", "unknown field `users`"),
    ] {
        let run = home.run_with_stdin(
            &["apply", "-f", "-"],
            &format!(
                "kind: Project\nmetadata: {{name: bad}}\nspec:\n  routes:\n    restricted: [{entry}]\n"
            ),
        );
        let err = run.fails(1);
        assert!(err.contains(says), "{entry}: {err}");
        if !says.starts_with("unknown") {
            assert!(err.contains("routes.restricted[0]"), "{entry}: {err}");
        }
    }
}

/// `mcpctl proxy PROJECT` spoken to in raw lines; killed when dropped.
struct RawProxy {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<String>,
}

impl RawProxy {
    fn start(home: &Home, project: &str) -> Self {
        let mut child = home
            .command(&["proxy", project])
            .env(KEY_VAR, KEY)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("mcpctl starts");
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
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

    fn request(&mut self, id: u64, method: &str, params: &str) -> Value {
        self.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#
        ));
        loop {
            let line = self
                .lines
                .recv_timeout(WAIT)
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
