//! `mcpctl serve` with identity and TLS flags, end to end: the real binary serving HTTPS in
//! front of the scripted upstream, reached by a rustls client with and without a client
//! certificate and a bearer token. Keys and certificates: `scripts/gen-identity-fixtures`.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use support::WAIT;

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../mcp-middleware/tests/fixtures/identity")
        .join(name)
        .display()
        .to_string()
}

/// A running `mcpctl serve`, stopped with SIGTERM when dropped.
struct Served {
    child: Child,
    addr: SocketAddr,
    url: String,
    stderr: Arc<Mutex<String>>,
}

impl Served {
    fn start(args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcpctl"))
            .args(["serve", "--listen", "127.0.0.1:0", "--model", "passthrough"])
            .args(args)
            .arg("--")
            .args(support::scripted_upstream())
            .env("MCPCTL_LOG", "info")
            .stdin(Stdio::null())
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
                    let _ = tx.send(url.to_owned());
                }
                log.lock().unwrap().push_str(&line);
                log.lock().unwrap().push('\n');
            }
        });
        let url = rx
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("no `listening on`: {}", stderr.lock().unwrap()));
        let authority = url
            .split("://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .expect("a URL");
        Self {
            child,
            addr: authority.parse().expect("an address"),
            url,
            stderr,
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
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

fn tls_client(certificate: Option<&str>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(fixture("ca.pem")).unwrap())
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    Arc::new(match certificate {
        Some(name) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_file(fixture(&format!("{name}.pem"))).unwrap()],
                PrivateKeyDer::from_pem_file(fixture(&format!("{name}.key"))).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    })
}

/// A response: status, headers (lower-case names), body.
type Reply = (u16, Vec<(String, String)>, String);

/// POSTs `body` over TLS; an error when no HTTP response comes (a refused handshake).
fn post(
    addr: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    headers: &[(&str, &str)],
    body: &str,
) -> std::io::Result<Reply> {
    let tcp = TcpStream::connect(addr)?;
    tcp.set_read_timeout(Some(WAIT))?;
    let name = ServerName::try_from("localhost").unwrap();
    let connection = rustls::ClientConnection::new(tls, name).map_err(std::io::Error::other)?;
    let mut stream = rustls::StreamOwned::new(connection, tcp);
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nhost: localhost:{}\r\nconnection: close\r\n\
         accept: application/json, text/event-stream\r\ncontent-type: application/json\r\n",
        addr.port()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(_) if !raw.is_empty() => break,
            Err(err) => return Err(err),
        }
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no HTTP response: {text:?}")))?;
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other("no status line"))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Ok((status, headers, body.to_owned()))
}

fn header<'a>(reply: &'a Reply, name: &str) -> Option<&'a str> {
    reply
        .1
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"serve-identity","version":"1"}}}"#;
const LIST: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}"#;

#[test]
fn serve_over_https_with_a_token_file_identifies_and_revokes() {
    let dir = std::env::temp_dir().join(format!("mcpctl-serve-identity-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, "alice token-of-alice-0123456789\n").unwrap();
    let served = Served::start(&[
        "--tls-cert",
        &fixture("server.pem"),
        "--tls-key",
        &fixture("server.key"),
        "--tokens",
        tokens.to_str().unwrap(),
    ]);
    assert!(
        served.url.starts_with("https://127.0.0.1:"),
        "{}",
        served.url
    );
    let tls = tls_client(None);

    let refused = post(served.addr, tls.clone(), &[], INIT).unwrap();
    assert_eq!(refused.0, 401, "{refused:?}");
    assert!(refused.2.contains("-32030"), "{refused:?}");

    let bearer = [("authorization", "Bearer token-of-alice-0123456789")];
    let started = post(served.addr, tls.clone(), &bearer, INIT).unwrap();
    assert_eq!(started.0, 200, "{started:?}");
    assert!(started.2.contains("scripted-upstream"), "{started:?}");
    let session = header(&started, "mcp-session-id").unwrap().to_owned();
    let with_session = [bearer[0], ("mcp-session-id", &session)];
    let listed = post(served.addr, tls.clone(), &with_session, LIST).unwrap();
    assert_eq!(listed.0, 200, "{listed:?}");

    std::fs::write(&tokens, "# alice revoked\n").unwrap();
    let revoked = post(served.addr, tls, &with_session, LIST).unwrap();
    assert_eq!(revoked.0, 401, "{revoked:?}");
    assert!(revoked.2.contains("revoked"), "{revoked:?}");

    let log = served.stderr();
    assert!(log.contains(r#"identity="alice""#), "{log}");
    assert!(
        !log.contains("token-of-alice-0123456789"),
        "a token reached the log: {log}"
    );
    drop(served);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn serve_with_a_client_ca_identifies_clients_by_certificate() {
    let served = Served::start(&[
        "--tls-cert",
        &fixture("server.pem"),
        "--tls-key",
        &fixture("server.key"),
        "--client-ca",
        &fixture("ca.pem"),
    ]);
    let started = post(served.addr, tls_client(Some("alice")), &[], INIT).unwrap();
    assert_eq!(started.0, 200, "{started:?}");
    assert!(
        post(served.addr, tls_client(None), &[], INIT).is_err(),
        "a client without a certificate gets no answer"
    );
    assert!(post(served.addr, tls_client(Some("mallory")), &[], INIT).is_err());
    let log = served.stderr();
    assert!(
        log.contains(r#"identity="alice""#) && log.contains(r#"kind="certificate""#),
        "{log}"
    );
}

#[test]
fn bad_identity_flags_are_one_clear_error() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_mcpctl"))
            .args(["serve", "--listen", "127.0.0.1:0", "--model", "passthrough"])
            .args(args)
            .args(["--", "true"])
            .output()
            .expect("mcpctl runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&[
        "--tls-cert",
        "/nonexistent/cert.pem",
        "--tls-key",
        &fixture("server.key"),
    ]);
    assert_eq!(code, Some(1));
    assert!(err.contains("/nonexistent/cert.pem"), "{err}");

    let (code, err) = run(&["--tokens", "/nonexistent/tokens"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("/nonexistent/tokens"), "{err}");

    let (code, err) = run(&["--jwt-issuer", "https://idp"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("--jwt-key"), "{err}");

    let (code, err) = run(&["--jwt-key", &fixture("ca.pem")]);
    assert_eq!(code, Some(1));
    assert!(err.contains("ca.pem"), "{err}");

    let (code, _) = run(&["--tls-key", &fixture("server.key")]);
    assert_eq!(code, Some(2), "--tls-key needs --tls-cert");
}

// ------------------------------------------------------------------------------------ JWTs

const JWT_SECRET: &str = "a-jwt-secret-of-at-least-thirty-two-bytes";
const ISSUER: &str = "https://idp.internal.example:8443";
const AUDIENCE: &str = "mcp-internal-audience";

fn b64url(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// An HS256-signed token over exactly `header` and `claims` (JSON text, as an attacker
/// would write it).
fn hs256(header: &str, claims: &str, secret: &[u8]) -> String {
    let signed = format!(
        "{}.{}",
        b64url(header.as_bytes()),
        b64url(claims.as_bytes())
    );
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    let tag = ring::hmac::sign(&key, signed.as_bytes());
    format!("{signed}.{}", b64url(tag.as_ref()))
}

fn claims(iss: &str, sub: &str, aud: &str) -> String {
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 600;
    serde_json::json!({"iss": iss, "sub": sub, "aud": aud, "exp": exp}).to_string()
}

/// A secret file in a directory of its own, removed when dropped.
struct SecretFile {
    dir: PathBuf,
    path: PathBuf,
}

impl SecretFile {
    fn new(label: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("mcpctl-serve-jwt-{label}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("secret");
        std::fs::write(&path, format!("{JWT_SECRET}\n")).unwrap();
        Self { dir, path }
    }

    fn path(&self) -> &str {
        self.path.to_str().unwrap()
    }
}

impl Drop for SecretFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn tls_flags() -> Vec<String> {
    vec![
        "--tls-cert".into(),
        fixture("server.pem"),
        "--tls-key".into(),
        fixture("server.key"),
    ]
}

fn serve_jwt(secret: &SecretFile, extra: &[&str]) -> Served {
    let mut args = tls_flags();
    args.extend(["--jwt-secret-file".to_owned(), secret.path().to_owned()]);
    args.extend(extra.iter().map(|a| a.to_string()));
    Served::start(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

#[test]
fn attacker_jwts_get_401s_that_echo_nothing_and_describe_no_configuration() {
    let secret = SecretFile::new("attacker");
    let served = serve_jwt(
        &secret,
        &["--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE],
    );
    let tls = tls_client(None);
    let good = claims(ISSUER, "alice", AUDIENCE);
    let valid = hs256(
        r#"{"alg":"HS256","typ":"JWT"}"#,
        &good,
        JWT_SECRET.as_bytes(),
    );
    let started = post(
        served.addr,
        tls.clone(),
        &[("authorization", &bearer(&valid))],
        INIT,
    )
    .unwrap();
    assert_eq!(started.0, 200, "{started:?}");

    let refused = |token: &str| {
        let reply = post(
            served.addr,
            tls.clone(),
            &[("authorization", &bearer(token))],
            INIT,
        )
        .unwrap();
        assert_eq!(reply.0, 401, "{reply:?}");
        assert!(reply.2.contains("-32030"), "{reply:?}");
        for secret_of_the_config in [ISSUER, "idp.internal", AUDIENCE, JWT_SECRET] {
            assert!(
                !reply.2.contains(secret_of_the_config),
                "the 401 describes the configuration: {}",
                reply.2
            );
        }
        reply.2
    };

    // A duplicated `alg`: a last-wins reader sees HS256 (and the signature is good), a
    // first-wins one `none`. Either way the proxy refuses it.
    let body = refused(&hs256(
        r#"{"alg":"none","alg":"HS256"}"#,
        &good,
        JWT_SECRET.as_bytes(),
    ));
    assert!(body.contains("not a well-formed JWT"), "{body}");
    let body = refused(&hs256(
        r#"{"alg":"HS256","typ":"JWT","typ":"JOSE"}"#,
        &good,
        JWT_SECRET.as_bytes(),
    ));
    assert!(body.contains("not a well-formed JWT"), "{body}");
    // A `typ` that is not a JWT's.
    let body = refused(&hs256(
        r#"{"alg":"HS256","typ":"secevent+jwt"}"#,
        &good,
        JWT_SECRET.as_bytes(),
    ));
    assert!(body.contains("typ"), "{body}");

    // The attacker's kid and alg are not repeated.
    let kid = "attacker-chosen-kid-0042";
    let body = refused(&hs256(
        &format!(r#"{{"alg":"HS256","kid":"{kid}"}}"#),
        &good,
        b"an-attacker-secret-of-thirty-two-bytes!!",
    ));
    assert!(!body.contains(kid), "{body}");
    assert!(body.contains("signature"), "{body}");
    let alg = "attacker-chosen-alg-0042";
    let body = refused(&hs256(
        &format!(r#"{{"alg":"{alg}","kid":"{kid}"}}"#),
        &good,
        JWT_SECRET.as_bytes(),
    ));
    assert!(!body.contains(alg) && !body.contains(kid), "{body}");
    assert!(body.contains("algorithm"), "{body}");

    // Wrong issuer and audience say so, without naming the ones expected.
    let body = refused(&hs256(
        r#"{"alg":"HS256"}"#,
        &claims("https://attacker.example", "alice", AUDIENCE),
        JWT_SECRET.as_bytes(),
    ));
    assert!(body.contains("issuer"), "{body}");
    assert!(!body.contains("attacker.example"), "{body}");
    let body = refused(&hs256(
        r#"{"alg":"HS256"}"#,
        &claims(ISSUER, "alice", "attacker-audience"),
        JWT_SECRET.as_bytes(),
    ));
    assert!(
        body.contains("audience") && !body.contains("attacker-audience"),
        "{body}"
    );

    let log = served.stderr();
    assert!(
        !log.contains("without an audience check") && !log.contains("without an issuer check"),
        "{log}"
    );
}

#[test]
fn a_jwt_key_without_issuer_or_audience_is_warned_about_at_start() {
    let secret = SecretFile::new("warn");
    let served = serve_jwt(&secret, &[]);
    let log = served.stderr();
    assert!(
        log.contains("WARN") && log.contains("without an audience check"),
        "{log}"
    );
    assert!(log.contains("without an issuer check"), "{log}");
}

#[test]
fn principals_that_used_to_collide_cannot_share_a_session() {
    // No issuer configured: both tokens verify, and `jwt:{iss}:{sub}` made them one principal.
    let secret = SecretFile::new("collide");
    let served = serve_jwt(&secret, &[]);
    let tls = tls_client(None);
    let port = hs256(
        r#"{"alg":"HS256"}"#,
        &claims("https://idp:8443", "x", "mcp"),
        JWT_SECRET.as_bytes(),
    );
    let colon = hs256(
        r#"{"alg":"HS256"}"#,
        &claims("https://idp", "8443:x", "mcp"),
        JWT_SECRET.as_bytes(),
    );
    let started = post(
        served.addr,
        tls.clone(),
        &[("authorization", &bearer(&port))],
        INIT,
    )
    .unwrap();
    assert_eq!(started.0, 200, "{started:?}");
    let session = header(&started, "mcp-session-id").unwrap().to_owned();
    let mine = post(
        served.addr,
        tls.clone(),
        &[
            ("authorization", &bearer(&port)),
            ("mcp-session-id", &session),
        ],
        LIST,
    )
    .unwrap();
    assert_eq!(mine.0, 200, "{mine:?}");
    let theirs = post(
        served.addr,
        tls,
        &[
            ("authorization", &bearer(&colon)),
            ("mcp-session-id", &session),
        ],
        LIST,
    )
    .unwrap();
    assert_eq!(theirs.0, 404, "another principal's session: {theirs:?}");
}

#[test]
fn certificates_with_the_same_cn_under_other_names_cannot_share_a_session() {
    let mut args = tls_flags();
    args.extend(["--client-ca".to_owned(), fixture("ca.pem")]);
    let served = Served::start(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let started = post(served.addr, tls_client(Some("alice")), &[], INIT).unwrap();
    assert_eq!(started.0, 200, "{started:?}");
    let session = header(&started, "mcp-session-id").unwrap().to_owned();
    let with_session = [("mcp-session-id", session.as_str())];
    let mine = post(served.addr, tls_client(Some("alice")), &with_session, LIST).unwrap();
    assert_eq!(mine.0, 200, "{mine:?}");
    let other = post(
        served.addr,
        tls_client(Some("alice-other-org")),
        &with_session,
        LIST,
    )
    .unwrap();
    assert_eq!(
        other.0, 404,
        "CN=alice,O=Other Org is not CN=alice,O=Example Org: {other:?}"
    );
}

#[test]
fn a_duplicated_host_or_origin_is_refused() {
    let served = Served::start(&tls_flags().iter().map(String::as_str).collect::<Vec<_>>());
    let tls = tls_client(None);
    // `post` sends `host: localhost:PORT`; each case adds a second header.
    let fine = post(
        served.addr,
        tls.clone(),
        &[("origin", "http://localhost")],
        INIT,
    )
    .unwrap();
    assert_eq!(fine.0, 200, "{fine:?}");
    let two_hosts = post(
        served.addr,
        tls.clone(),
        &[("host", "evil.example.com")],
        INIT,
    )
    .unwrap();
    assert_eq!(two_hosts.0, 400, "{two_hosts:?}");
    assert!(
        two_hosts.2.contains("more than one `Host`"),
        "{two_hosts:?}"
    );
    let same_twice = post(
        served.addr,
        tls.clone(),
        &[("host", &format!("localhost:{}", served.addr.port()))],
        INIT,
    )
    .unwrap();
    assert_eq!(same_twice.0, 400, "{same_twice:?}");
    let two_origins = post(
        served.addr,
        tls,
        &[
            ("origin", "http://localhost"),
            ("origin", "http://evil.example.com"),
        ],
        INIT,
    )
    .unwrap();
    assert_eq!(two_origins.0, 400, "{two_origins:?}");
    assert!(
        two_origins.2.contains("more than one `Origin`"),
        "{two_origins:?}"
    );
    assert!(
        header(&two_origins, "access-control-allow-origin").is_none(),
        "{two_origins:?}"
    );
}
