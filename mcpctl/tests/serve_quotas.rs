//! Quotas of `mcpctl serve`, end to end: the real binary in front of the scripted
//! upstream (a child process per session), driven over HTTP by a raw client with bearer tokens
//! from a token file. A principal at its `--max-sessions-per-principal` gets `503` with
//! `Retry-After` and an error naming the flag, while another principal still gets sessions;
//! stateless 2026-07-28 sessions count too; a session that ends (DELETE, idle timeout) gives its
//! place back, round after round; without authentication the quota is per client address; a
//! connection past `--max-connections` is answered `503` and closed.

#[path = "../../mcp-middleware/tests/support/http_client.rs"]
mod http_client;

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use http_client::{Conn, MCP_HEADERS, WAIT, initialize_request, request};
use serde_json::{Value, json};

/// `mcpctl serve ARGS -- scripted upstream`, stopped (and waited for) when dropped.
struct Served {
    child: Child,
    addr: SocketAddr,
}

impl Served {
    fn start(args: &[&str]) -> Self {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/scripted_upstream.py");
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcpctl"))
            .args(["serve", "--listen", "127.0.0.1:0", "--model", "passthrough"])
            .args(args)
            .args(["--", "python3", "-u"])
            .arg(script)
            .env_remove("MCPCTL_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("mcpctl serve starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let url = line
                    .strip_prefix("listening on http://")
                    .or_else(|| line.strip_prefix("listening on https://"));
                match url {
                    Some(url) => drop(tx.send(url.trim_end_matches("/mcp").to_owned())),
                    None => eprintln!("mcpctl: {line}"),
                }
            }
        });
        let addr = match rx.recv_timeout(WAIT) {
            Ok(authority) => authority.parse().expect("a socket address"),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("mcpctl serve did not say where it listens");
            }
        };
        Self { child, addr }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// A token file for alice and bob, removed when dropped.
struct Tokens(PathBuf);

impl Tokens {
    fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "mcpctl-quotas-{name}-{}.tokens",
            std::process::id()
        ));
        std::fs::write(
            &path,
            "alice token-of-alice-0123456789\nbob token-of-bob-0123456789\n",
        )
        .expect("write the token file");
        Self(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("a UTF-8 path")
    }
}

impl Drop for Tokens {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

const ALICE: &str = "Bearer token-of-alice-0123456789";
const BOB: &str = "Bearer token-of-bob-0123456789";

/// What an `initialize` got: the session id, or the refusal's status, `Retry-After` and body.
#[derive(Debug)]
enum Started {
    Session(String),
    Refused {
        status: u16,
        retry_after: Option<String>,
        body: Value,
    },
}

impl Started {
    fn session(self) -> String {
        match self {
            Started::Session(id) => id,
            refused => panic!("expected a session, got {refused:?}"),
        }
    }

    /// The refusal, checked to be a `503` with `Retry-After` naming `quota`; its message.
    fn refused_by(self, quota: &str) -> String {
        let Started::Refused {
            status,
            retry_after,
            body,
        } = self
        else {
            panic!("expected a refusal by {quota}, got {self:?}");
        };
        assert_eq!(status, 503, "{body}");
        let seconds: u64 = retry_after
            .as_deref()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no Retry-After in seconds: {retry_after:?}"));
        assert!(seconds > 0);
        assert_eq!(body["error"]["code"], -32000, "{body}");
        assert_eq!(body["error"]["data"]["quota"], quota, "{body}");
        let message = body["error"]["message"].as_str().expect("a message");
        assert!(message.contains(&format!("--{quota}")), "{message}");
        message.to_owned()
    }
}

/// Sends `initialize` on a new connection from `source`, with `bearer` if given.
async fn initialize(addr: SocketAddr, source: IpAddr, bearer: Option<&str>) -> Started {
    let mut conn = Conn::connect_from(addr, source).await;
    let mut headers = MCP_HEADERS.to_vec();
    if let Some(bearer) = bearer {
        headers.push(("authorization", bearer));
    }
    let body = initialize_request("quotas");
    let mut reply = conn
        .send("POST", &headers, body.as_bytes())
        .await
        .expect("an answer to initialize");
    if reply.status != 200 {
        return Started::Refused {
            status: reply.status,
            retry_after: reply.header("retry-after").map(str::to_owned),
            body: reply.json().await,
        };
    }
    let id = reply
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned();
    let answer = reply.message().await.expect("the initialize answer");
    assert!(answer.get("result").is_some(), "{answer}");
    assert!(reply.message().await.is_none(), "the stream ends");
    Started::Session(id)
}

/// Ends session `id` with DELETE.
async fn delete(addr: SocketAddr, bearer: Option<&str>, id: &str) {
    let mut conn = Conn::connect(addr).await;
    let mut headers = vec![("mcp-session-id", id)];
    if let Some(bearer) = bearer {
        headers.push(("authorization", bearer));
    }
    let reply = conn.send("DELETE", &headers, b"").await.expect("DELETE");
    assert_eq!(reply.status, 200, "DELETE {id}");
}

/// A stateless (2026-07-28) `tools/list` of the client `client`: its status and body.
async fn stateless_list(addr: SocketAddr, bearer: &str, client: &str) -> (u16, Value) {
    let mut conn = Conn::connect(addr).await;
    let mut headers = MCP_HEADERS.to_vec();
    headers.extend([
        ("authorization", bearer),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/list"),
    ]);
    let body = request(
        1,
        "tools/list",
        json!({"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": client, "version": "1"},
        }}),
    );
    let reply = conn
        .send("POST", &headers, body.as_bytes())
        .await
        .expect("POST");
    let status = reply.status;
    let json = reply.header("content-type") == Some("application/json");
    let answer = if json {
        reply.json().await
    } else {
        reply.messages().await.pop().expect("an answer")
    };
    (status, answer)
}

/// Calls tool `name` in session `id` (after `notifications/initialized`); the answer.
async fn call_tool(addr: SocketAddr, bearer: &str, id: &str, name: &str) -> Value {
    let mut conn = Conn::connect(addr).await;
    let all = [
        MCP_HEADERS[0],
        MCP_HEADERS[1],
        ("authorization", bearer),
        ("mcp-session-id", id),
    ];
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let reply = conn
        .send("POST", &all, initialized.as_bytes())
        .await
        .expect("POST");
    assert_eq!(reply.status, 202);
    drop(reply.body().await);
    let body = request(9, "tools/call", json!({"name": name, "arguments": {}}));
    let reply = conn
        .send("POST", &all, body.as_bytes())
        .await
        .expect("POST");
    assert_eq!(reply.status, 200, "tools/call {name}");
    reply.messages().await.pop().expect("an answer")
}

fn local(last: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, last])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_at_its_quota_is_refused_while_another_still_gets_sessions() {
    let tokens = Tokens::new("principals");
    let served = Served::start(&[
        "--tokens",
        tokens.path(),
        "--max-sessions",
        "8",
        "--max-sessions-per-principal",
        "2",
    ]);
    let addr = served.addr;
    let here = local(1);

    let a1 = initialize(addr, here, Some(ALICE)).await.session();
    let a2 = initialize(addr, here, Some(ALICE)).await.session();
    let message = initialize(addr, here, Some(ALICE))
        .await
        .refused_by("max-sessions-per-principal");
    assert!(message.contains("quota of 2 sessions"), "{message}");

    // Bob is not held back by alice's sessions: a stateful one, then a stateless one.
    let b1 = initialize(addr, here, Some(BOB)).await.session();
    let (status, answer) = stateless_list(addr, BOB, "bob-agent").await;
    assert_eq!(status, 200, "{answer}");
    assert!(answer["result"]["tools"].is_array(), "{answer}");
    // The same stateless client again is the same session, not one more.
    let (status, answer) = stateless_list(addr, BOB, "bob-agent").await;
    assert_eq!(status, 200, "{answer}");
    // A stateless session of another client name is a third session: over bob's quota.
    let (status, refused) = stateless_list(addr, BOB, "bob-other-agent").await;
    assert_eq!(status, 503, "{refused}");
    assert_eq!(
        refused["error"]["data"]["quota"],
        "max-sessions-per-principal"
    );
    initialize(addr, here, Some(BOB))
        .await
        .refused_by("max-sessions-per-principal");

    // Ending a session gives its place back, round after round (nothing is left counted).
    let mut open = a2;
    for _ in 0..4 {
        delete(addr, Some(ALICE), &open).await;
        open = initialize(addr, here, Some(ALICE)).await.session();
        initialize(addr, here, Some(ALICE))
            .await
            .refused_by("max-sessions-per-principal");
    }
    // Bob cannot end alice's session to make room for himself.
    let mut conn = Conn::connect(addr).await;
    let reply = conn
        .send(
            "DELETE",
            &[("mcp-session-id", a1.as_str()), ("authorization", BOB)],
            b"",
        )
        .await
        .expect("DELETE");
    assert_eq!(reply.status, 404);
    drop(conn);
    initialize(addr, here, Some(BOB))
        .await
        .refused_by("max-sessions-per-principal");
    delete(addr, Some(BOB), &b1).await;
    initialize(addr, here, Some(BOB)).await.session();
    drop(served);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_global_limit_still_holds_across_principals() {
    let tokens = Tokens::new("global");
    let served = Served::start(&[
        "--tokens",
        tokens.path(),
        "--max-sessions",
        "3",
        "--max-sessions-per-principal",
        "2",
    ]);
    let addr = served.addr;
    let here = local(1);
    initialize(addr, here, Some(ALICE)).await.session();
    initialize(addr, here, Some(ALICE)).await.session();
    let b1 = initialize(addr, here, Some(BOB)).await.session();
    let message = initialize(addr, here, Some(BOB))
        .await
        .refused_by("max-sessions");
    assert!(message.contains("limit of 3 sessions"), "{message}");
    delete(addr, Some(BOB), &b1).await;
    initialize(addr, here, Some(BOB)).await.session();
    drop(served);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_whose_upstream_died_keeps_its_place_until_it_ends() {
    let tokens = Tokens::new("death");
    let served = Served::start(&[
        "--tokens",
        tokens.path(),
        "--max-sessions-per-principal",
        "1",
    ]);
    let addr = served.addr;
    let id = initialize(addr, local(1), Some(ALICE)).await.session();
    let died = call_tool(addr, ALICE, &id, "die").await;
    assert_eq!(died["error"]["code"], -32001, "{died}");
    // Still alice's one session: the next request restarts its upstream.
    initialize(addr, local(1), Some(ALICE))
        .await
        .refused_by("max-sessions-per-principal");
    let called = call_tool(addr, ALICE, &id, "t").await;
    assert_eq!(
        called["result"]["content"][0]["text"], "called t",
        "{called}"
    );
    delete(addr, Some(ALICE), &id).await;
    initialize(addr, local(1), Some(ALICE)).await.session();
    drop(served);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_clients_are_limited_per_address() {
    let served = Served::start(&["--max-sessions-per-principal", "1"]);
    let addr = served.addr;
    let first = initialize(addr, local(2), None).await.session();
    let message = initialize(addr, local(2), None)
        .await
        .refused_by("max-sessions-per-principal");
    assert!(message.contains("127.0.0.2"), "{message}");
    // Another address is another client.
    initialize(addr, local(3), None).await.session();
    // Its session is deleted from anywhere (anonymous sessions are anyone's), and the
    // address has its place back.
    delete(addr, None, &first).await;
    initialize(addr, local(2), None).await.session();
    drop(served);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_that_is_ended_gives_its_place_back() {
    let tokens = Tokens::new("idle");
    let served = Served::start(&[
        "--tokens",
        tokens.path(),
        "--max-sessions-per-principal",
        "1",
        "--idle-timeout",
        "1",
    ]);
    let addr = served.addr;
    for round in 0..2 {
        initialize(addr, local(1), Some(ALICE)).await.session();
        initialize(addr, local(1), Some(ALICE))
            .await
            .refused_by("max-sessions-per-principal");
        // Once the idle session is ended, alice may start one again.
        let deadline = Instant::now() + WAIT;
        loop {
            match initialize(addr, local(1), Some(ALICE)).await {
                Started::Session(id) => {
                    delete(addr, Some(ALICE), &id).await;
                    break;
                }
                refused => {
                    refused.refused_by("max-sessions-per-principal");
                    assert!(
                        Instant::now() < deadline,
                        "round {round}: the idle session was never ended"
                    );
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }
    drop(served);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_past_the_limit_is_answered_503_and_closed() {
    // One client address here: its own quota (by default a quarter of the limit) above the
    // limit, so the limit is what is reached.
    let served = Served::start(&[
        "--max-connections",
        "2",
        "--max-connections-per-address",
        "8",
    ]);
    let addr = served.addr;
    // Two connections held open, each having been served (so each is counted).
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut conn = Conn::connect(addr).await;
        let reply = conn
            .send("GET", &[("accept", "text/event-stream")], b"")
            .await
            .expect("an answer");
        assert_eq!(reply.status, 400, "a GET without a session");
        drop(reply.body().await);
        held.push(conn);
    }
    let mut third = Conn::connect(addr).await;
    let reply = third
        .send("GET", &[("accept", "text/event-stream")], b"")
        .await
        .expect("an answer");
    assert_eq!(reply.status, 503);
    assert!(reply.header("retry-after").is_some());
    assert_eq!(reply.header("connection"), Some("close"));
    let body = reply.json().await;
    assert_eq!(body["error"]["data"]["quota"], "max-connections", "{body}");
    assert!(
        third
            .send("GET", &[("accept", "text/event-stream")], b"")
            .await
            .is_err(),
        "the refused connection is closed"
    );
    // Once one held connection closes, a new one is served.
    drop(held.pop());
    let deadline = Instant::now() + WAIT;
    loop {
        let mut conn = Conn::connect(addr).await;
        let status = conn
            .send("GET", &[("accept", "text/event-stream")], b"")
            .await
            .expect("an answer")
            .status;
        if status == 400 {
            break;
        }
        assert_eq!(status, 503);
        assert!(
            Instant::now() < deadline,
            "the closed connection stayed counted"
        );
        drop(conn);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(held);
    drop(served);
}

#[test]
fn a_zero_quota_is_one_clear_error() {
    for flag in [
        "--max-sessions",
        "--max-sessions-per-principal",
        "--max-connections",
        "--max-connections-per-address",
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_mcpctl"))
            .args(["serve", "--listen", "127.0.0.1:0", "--model", "passthrough"])
            .args([flag, "0", "--", "true"])
            .output()
            .expect("mcpctl runs");
        assert_eq!(out.status.code(), Some(1), "{flag}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(flag) && err.contains("at least 1"), "{err}");
    }
}

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../mcp-middleware/tests/fixtures/identity")
        .join(name)
        .display()
        .to_string()
}

/// A TLS connection to `addr` that trusts the fixtures' CA, with `request` written on it.
fn tls_send(
    addr: SocketAddr,
    request: &str,
) -> rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream> {
    use rustls::pki_types::pem::PemObject;
    use std::io::Write;
    let mut roots = rustls::RootCertStore::empty();
    let ca = rustls::pki_types::CertificateDer::from_pem_file(fixture("ca.pem")).expect("the CA");
    roots.add(ca).expect("the CA is a certificate");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("a name");
    let connection = rustls::ClientConnection::new(Arc::new(config), name).expect("a client");
    let tcp = std::net::TcpStream::connect(addr).expect("connect");
    tcp.set_read_timeout(Some(WAIT)).expect("a read timeout");
    let mut stream = rustls::StreamOwned::new(connection, tcp);
    stream.write_all(request.as_bytes()).expect("write");
    stream.flush().expect("flush");
    stream
}

#[test]
fn over_https_a_connection_past_the_limit_is_answered_503_too() {
    use std::io::Read;
    let served = Served::start(&[
        "--max-connections",
        "1",
        "--max-connections-per-address",
        "8",
        "--tls-cert",
        &fixture("server.pem"),
        "--tls-key",
        &fixture("server.key"),
    ]);
    let get = |close: &str| {
        format!(
            "GET /mcp HTTP/1.1\r\nhost: localhost:{}\r\naccept: text/event-stream\r\n\
             connection: {close}\r\ncontent-length: 0\r\n\r\n",
            served.addr.port()
        )
    };
    // One connection, served (so counted) and held open.
    let mut held = tls_send(served.addr, &get("keep-alive"));
    let mut head = [0u8; 12];
    held.read_exact(&mut head).expect("an answer");
    assert_eq!(&head, b"HTTP/1.1 400", "a GET without a session");
    // The next is answered over TLS, then closed.
    let mut refused = tls_send(served.addr, &get("close"));
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match refused.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(_) if !raw.is_empty() => break,
            Err(err) => panic!("no answer: {err}"),
        }
    }
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(text.to_ascii_lowercase().contains("retry-after:"), "{text}");
    assert!(text.contains(r#""quota":"max-connections""#), "{text}");
    drop(held);
    drop(served);
}
