//! The bounds of `mcpctl serve`'s listeners, driven the way an attacker would: raw TCP and HTTP
//! against the real `mcpctl serve --admin-listen` in front of the scripted upstream.
//!
//! - the admin listener reads little and briefly before authentication (413, 408), and holds
//!   a bounded number of connections (503) while the MCP port goes on serving;
//! - it answers only the hosts and origins the MCP front does (DNS rebinding: 403);
//! - its documents hide secrets, and name sessions by a digest no one can use on `/mcp`;
//! - one client address cannot hold every connection of the MCP front.

#[path = "support/home.rs"]
mod home;
mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wait_timeout::ChildExt;

use home::Home;
use support::WAIT;

const TOKEN: &str = "admin-token-0123456789abcdef";

/// A running `mcpctl serve` with an admin listener, stopped when dropped.
struct Served {
    child: Child,
    mcp: SocketAddr,
    admin: SocketAddr,
    stderr: Arc<Mutex<String>>,
}

impl Served {
    /// `mcpctl serve ARGS` (before `--`), with `upstream` after `--` when given.
    fn start(home: &Home, args: &[&str], upstream: bool) -> Self {
        let tokens = home.write("admin-tokens", &format!("ops {TOKEN}\n"));
        let mut command = home.command(&["serve"]);
        command
            .args(args)
            .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
            .arg("--admin-tokens")
            .arg(&tokens)
            .args(["--log", "info"]);
        if upstream {
            command
                .args(["--model", "passthrough", "--"])
                .args(support::scripted_upstream());
        }
        let mut child = command
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
                    let _ = tx.send(("admin", url.to_owned()));
                }
                let mut log = log.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let address = |url: &str| -> SocketAddr {
            url.trim_start_matches("http://")
                .split('/')
                .next()
                .and_then(|a| a.parse().ok())
                .unwrap_or_else(|| panic!("not an address: {url}"))
        };
        let (mut mcp, mut admin) = (None, None);
        for _ in 0..2 {
            match rx.recv_timeout(WAIT) {
                Ok(("mcp", url)) => mcp = Some(address(&url)),
                Ok((_, url)) => admin = Some(address(&url)),
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("serve did not start: {}", stderr.lock().unwrap());
                }
            }
        }
        Self {
            child,
            mcp: mcp.unwrap(),
            admin: admin.unwrap(),
            stderr,
        }
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

/// An HTTP answer.
#[derive(Debug)]
struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    }
}

/// Reads one answer from `stream` (until it closes, or an SSE answer's first event), within
/// `wait`; `None` when nothing came.
fn read_answer(stream: &mut TcpStream, wait: Duration) -> Option<Answer> {
    stream.set_read_timeout(Some(wait)).unwrap();
    let mut raw = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => raw.extend_from_slice(&chunk[..n]),
        }
        let text = String::from_utf8_lossy(&raw);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().ok())?
            });
            if length.is_some_and(|n| body.len() >= n)
                || (head.contains("text/event-stream") && body.ends_with("\n\n"))
            {
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    Some(Answer {
        status: head.split(' ').nth(1)?.parse().ok()?,
        head: head.to_owned(),
        body: body.to_owned(),
    })
}

/// A request's head: `METHOD PATH`, `Host: ADDR` (unless `headers` name one) and `headers`.
fn head(method: &str, path: &str, to: SocketAddr, headers: &[(&str, &str)]) -> String {
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: {to}\r\n"));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head
}

/// One whole exchange.
fn http(to: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    let mut stream = TcpStream::connect(to).expect("connect");
    let request = format!(
        "{}Content-Length: {}\r\n\r\n{body}",
        head(method, path, to, headers),
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("send");
    read_answer(&mut stream, WAIT).unwrap_or_else(|| panic!("no answer to {method} {path}"))
}

fn bearer() -> String {
    format!("Bearer {TOKEN}")
}

fn initialize(mcp: SocketAddr, from: Option<&str>) -> Answer {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "limits-test", "version": "1"}}})
    .to_string();
    let mut stream = match from {
        None => TcpStream::connect(mcp).expect("connect"),
        Some(local) => connect_from(local, mcp),
    };
    let request = format!(
        "{}Content-Length: {}\r\n\r\n{body}",
        head(
            "POST",
            "/mcp",
            mcp,
            &[
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
            ],
        ),
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("send");
    read_answer(&mut stream, WAIT).expect("an answer to initialize")
}

/// A TCP connection to `to` from the loopback address `local` (std cannot bind a client
/// socket before connecting; tokio's `TcpSocket` can).
fn connect_from(local: &str, to: SocketAddr) -> TcpStream {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .expect("a runtime");
    let stream = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
        let local: SocketAddr = format!("{local}:0").parse().unwrap();
        socket.bind(local).expect("bind the client socket");
        socket.connect(to).await.expect("connect")
    });
    let stream = stream.into_std().expect("a std stream");
    stream.set_nonblocking(false).expect("blocking");
    stream
}

/// A POST of `body` to `/mcp` in the session `session`.
fn in_session(mcp: SocketAddr, session: &str, body: &str) -> Answer {
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("Mcp-Session-Id", session),
    ];
    http(mcp, "POST", "/mcp", &headers, body)
}

/// A connection that has sent part of a request's head and holds it open.
fn half_open(to: SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(to).expect("connect");
    stream
        .write_all(b"GET /api/whoami HTTP/1.1\r\n")
        .expect("send");
    stream
}

#[test]
fn the_admin_listener_reads_little_and_briefly_before_authentication() {
    let home = Home::new();
    let served = Served::start(&home, &[], true);

    // A login form declared larger than the open limit: refused before its body is read.
    let mut declared = TcpStream::connect(served.admin).unwrap();
    let request = format!(
        "{}Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 8000000\r\n\r\ntoken=",
        head("POST", "/ui/login", served.admin, &[])
    );
    declared.write_all(request.as_bytes()).unwrap();
    let answer = read_answer(&mut declared, Duration::from_secs(3))
        .expect("a large declared login body is answered at once, not read");
    assert_eq!(answer.status, 413, "{answer:?}");
    assert!(
        answer.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("16384")
    );

    // One sent whole without a length (chunked) is cut at the limit too.
    let mut chunked = TcpStream::connect(served.admin).unwrap();
    let chunk = "a".repeat(8192);
    let mut request = format!(
        "{}Transfer-Encoding: chunked\r\n\r\n",
        head("POST", "/ui/login", served.admin, &[])
    );
    for _ in 0..3 {
        request.push_str(&format!("{:x}\r\n{chunk}\r\n", chunk.len()));
    }
    request.push_str("0\r\n\r\n");
    let _ = chunked.write_all(request.as_bytes());
    let answer = read_answer(&mut chunked, WAIT).expect("an answer");
    assert_eq!(answer.status, 413, "{answer:?}");

    // A head over the limit is refused, not buffered: 431, or, when the listener closes
    // while the rest is still arriving, a connection reset before the answer is read.
    let mut big_head = TcpStream::connect(served.admin).unwrap();
    let request = format!(
        "{}X-Padding: {}\r\n\r\n",
        head("GET", "/ui/", served.admin, &[]),
        "a".repeat(100 * 1024)
    );
    let _ = big_head.write_all(request.as_bytes());
    let answer = read_answer(&mut big_head, WAIT);
    assert!(
        answer.as_ref().is_none_or(|a| a.status == 431),
        "{answer:?}"
    );

    // The authenticated API takes more, but not without bound.
    let big = "x".repeat(1024 * 1024 + 1);
    let answer = http(
        served.admin,
        "POST",
        "/api/apply",
        &[
            ("Authorization", &bearer()),
            ("Content-Type", "application/yaml"),
        ],
        &big,
    );
    assert_eq!(answer.status, 413, "{answer:?}");

    // A login body that stops halfway is given up on, with a 408.
    let started = Instant::now();
    let mut slow = TcpStream::connect(served.admin).unwrap();
    let request = format!(
        "{}Content-Length: 100\r\n\r\ntoken=abc",
        head("POST", "/ui/login", served.admin, &[])
    );
    slow.write_all(request.as_bytes()).unwrap();
    let answer = read_answer(&mut slow, Duration::from_secs(15))
        .expect("a half-sent body is answered within its time limit");
    assert_eq!(answer.status, 408, "{answer:?}");
    assert!(started.elapsed() < Duration::from_secs(12));
}

#[test]
fn the_admin_listener_holds_a_bounded_number_of_connections() {
    let home = Home::new();
    let served = Served::start(&home, &[], true);
    let held: Vec<TcpStream> = (0..64).map(|_| half_open(served.admin)).collect();
    let refused = http(
        served.admin,
        "GET",
        "/api/whoami",
        &[("Authorization", &bearer())],
        "",
    );
    assert_eq!(refused.status, 503, "{refused:?}");
    assert!(
        refused.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("limit of 64 connections"),
        "{refused:?}"
    );
    // The MCP port is another listener, with descriptors to spare.
    let mcp = initialize(served.mcp, None);
    assert_eq!(mcp.status, 200, "{mcp:?}");
    drop(held);
    // The places come back as the listener sees the connections close.
    let deadline = Instant::now() + WAIT;
    loop {
        let mut stream = TcpStream::connect(served.admin).expect("connect");
        let request = format!(
            "{}\r\n",
            head(
                "GET",
                "/api/whoami",
                served.admin,
                &[("Authorization", &bearer())]
            )
        );
        stream.write_all(request.as_bytes()).expect("send");
        let answer = read_answer(&mut stream, WAIT);
        if answer.as_ref().is_some_and(|a| a.status == 200) {
            break;
        }
        // Each try waits for the listener's answer: a 503 while it has not yet seen the held
        // connections close (nothing else shows that from here).
        assert!(Instant::now() < deadline, "still refused: {answer:?}");
    }
}

#[test]
fn the_admin_listener_answers_only_the_hosts_and_origins_the_mcp_front_does() {
    let home = Home::new();
    let served = Served::start(&home, &["--allow-host", "admin.example.com"], true);
    let auth = bearer();
    for (headers, what) in [
        (vec![("Host", "rebound.example.com")], "a foreign Host"),
        (
            vec![
                ("Host", "localhost"),
                ("Origin", "http://rebound.example.com"),
            ],
            "a foreign Origin",
        ),
        (
            vec![("Host", "localhost"), ("Origin", "null")],
            "a null Origin",
        ),
    ] {
        for (method, path) in [
            ("GET", "/api/whoami"),
            ("GET", "/ui/"),
            ("POST", "/ui/login"),
        ] {
            let mut headers = headers.clone();
            headers.push(("Authorization", &auth));
            let answer = http(served.admin, method, path, &headers, "token=x");
            assert_eq!(answer.status, 403, "{what}, {method} {path}: {answer:?}");
            assert!(
                answer.json()["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("DNS-rebinding"),
                "{answer:?}"
            );
        }
    }
    let twice = http(
        served.admin,
        "GET",
        "/api/whoami",
        &[
            ("Host", "localhost"),
            ("Host", "rebound.example.com"),
            ("Authorization", &auth),
        ],
        "",
    );
    assert_eq!(twice.status, 400, "{twice:?}");
    // Loopback, the allowed host, and the UI's own page (its Origin is the Host) pass.
    let own = format!("http://admin.example.com:{}", served.admin.port());
    let admin_host = format!("admin.example.com:{}", served.admin.port());
    for headers in [
        vec![("Host", "localhost")],
        vec![("Host", admin_host.as_str())],
        vec![("Host", admin_host.as_str()), ("Origin", own.as_str())],
        vec![("Host", "127.0.0.1"), ("Origin", "http://127.0.0.1:1234")],
    ] {
        let mut headers = headers.clone();
        headers.push(("Authorization", &auth));
        let answer = http(served.admin, "GET", "/api/whoami", &headers, "");
        assert_eq!(answer.status, 200, "{headers:?}: {answer:?}");
    }
    // With every host allowed, an Origin naming its own Host is checked as on the MCP front.
    let open = Served::start(&home, &["--allow-host", "*"], true);
    let port = open.admin.port();
    let rebound_host = format!("rebound.example.com:{port}");
    let rebound_origin = format!("http://rebound.example.com:{port}");
    let plain = http(
        open.admin,
        "GET",
        "/api/whoami",
        &[("Host", rebound_host.as_str()), ("Authorization", &auth)],
        "",
    );
    assert_eq!(plain.status, 200, "{plain:?}");
    let from_page = http(
        open.admin,
        "GET",
        "/api/whoami",
        &[
            ("Host", rebound_host.as_str()),
            ("Origin", rebound_origin.as_str()),
            ("Authorization", &auth),
        ],
        "",
    );
    assert_eq!(from_page.status, 403, "{from_page:?}");
}

#[test]
fn admin_documents_hide_secrets_and_name_sessions_by_a_digest_useless_on_mcp() {
    let home = Home::new();
    let script = support::scripted_upstream();
    let audit = home.path.join("audit.jsonl");
    home.apply(&format!(
        "kind: Server\nmetadata: {{name: scripted}}\nspec:\n  command: {}\n  args: ['{}', '{}', --api-key, literal-arg-secret]\n  env:\n    SCRIPTED_TOOLS: echo\n    UPSTREAM_PASSWORD: literal-env-secret\n    FROM_ENV: ${{env:HOME}}\n---\nkind: Project\nmetadata: {{name: secrets}}\nspec:\n  servers: [scripted]\n  proxyModel: audit\n  config:\n    audit:\n      path: '{}'\n      key: literal-audit-key\n",
        script[0],
        script[1],
        script[2],
        audit.display()
    ));
    let served = Served::start(&home, &["secrets"], false);
    let project = http(
        served.admin,
        "GET",
        "/api/project",
        &[("Authorization", &bearer())],
        "",
    );
    assert_eq!(project.status, 200, "{project:?}");
    for secret in [
        "literal-audit-key",
        "literal-env-secret",
        "literal-arg-secret",
    ] {
        assert!(
            !project.body.contains(secret),
            "{secret} shown: {}",
            project.body
        );
    }
    let document = project.json();
    assert_eq!(document["project"]["spec"]["config"]["audit"]["key"], "***");
    let server = &document["servers"][0]["spec"];
    assert_eq!(server["env"]["UPSTREAM_PASSWORD"], "***");
    assert_eq!(
        server["env"]["FROM_ENV"], "${env:HOME}",
        "references show as written"
    );
    assert_eq!(server["args"][3], "***");

    // Sessions are listed by their log digest, which ends them but is no session id.
    let started = initialize(served.mcp, None);
    assert_eq!(started.status, 200, "{started:?}");
    let id = started.header("mcp-session-id").expect("a session id");
    let sessions = http(
        served.admin,
        "GET",
        "/api/sessions",
        &[("Authorization", &bearer())],
        "",
    );
    assert!(!sessions.body.contains(&id), "{}", sessions.body);
    let listed = sessions.json()["sessions"][0]["id"]
        .as_str()
        .expect("the session is listed")
        .to_owned();
    assert!(listed.starts_with("http-"), "{listed}");
    assert!(
        served.stderr.lock().unwrap().contains(&listed),
        "the logs name the session the same way"
    );
    let list_tools = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    let with_digest = in_session(served.mcp, &listed, &list_tools);
    assert_eq!(with_digest.status, 404, "{with_digest:?}");
    // The raw id is not what the admin API names sessions by.
    let raw = http(
        served.admin,
        "DELETE",
        &format!("/api/sessions/{id}"),
        &[("Authorization", &bearer())],
        "",
    );
    assert_eq!(raw.status, 404, "{raw:?}");
    assert_eq!(in_session(served.mcp, &id, &list_tools).status, 200);
    let ended = http(
        served.admin,
        "DELETE",
        &format!("/api/sessions/{listed}"),
        &[("Authorization", &bearer())],
        "",
    );
    assert_eq!(ended.status, 200, "{ended:?}");
    assert_eq!(in_session(served.mcp, &id, &list_tools).status, 404);
}

#[test]
fn one_client_address_cannot_take_every_connection_of_the_mcp_front() {
    let home = Home::new();
    let served = Served::start(
        &home,
        &[
            "--max-connections",
            "4",
            "--max-connections-per-address",
            "2",
        ],
        true,
    );
    // 127.0.0.1 holds its quota with connections that never finish a request.
    let held: Vec<TcpStream> = (0..2).map(|_| half_open(served.mcp)).collect();
    let refused = initialize(served.mcp, None);
    assert_eq!(refused.status, 503, "{refused:?}");
    let error = &refused.json()["error"];
    assert_eq!(
        error["data"]["quota"], "max-connections-per-address",
        "{error}"
    );
    assert!(
        error["message"].as_str().unwrap().contains("127.0.0.1"),
        "{error}"
    );
    assert!(refused.header("retry-after").is_some(), "{refused:?}");
    // Another address is served meanwhile.
    let other = initialize(served.mcp, Some("127.0.0.2"));
    assert_eq!(other.status, 200, "{other:?}");
    drop(held);
}
