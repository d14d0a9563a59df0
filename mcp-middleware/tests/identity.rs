//! Identity on the HTTP front, end to end: a raw HTTP/1.1 client, over plain TCP or
//! rustls, against `Proxy::serve_http` with a model whose tool answers with
//! `ctx.identity()`, in front of the scripted upstream. Bearer tokens from a list (and a
//! watched file), JWTs (HS256, RS256, ES256), TLS, and mTLS client certificates. The TLS and
//! JWT keys are fixtures made by `scripts/gen-identity-fixtures`.

mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mcp_middleware::Proxy;
use mcp_middleware::auth::{Auth, JwtKey, JwtVerifier, TokenList};
use mcp_middleware::http::{ClientCertificates, HttpOptions, HttpServer, TlsOptions};
use ring::signature::{self, EcdsaKeyPair, RsaKeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// What observers saw: `subject kind method target`.
static OBSERVED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Answers with who the session is; observes every call with the identity.
#[mcp_middleware::proxy_model]
pub mod whoami {
    use mcp_middleware::prelude::*;

    /// `KIND SUBJECT SESSION`: the identity of the session, as a hook sees it.
    #[tool]
    pub async fn whoami(ctx: &Context) -> HookResult<String> {
        let identity = ctx.identity();
        Ok(format!(
            "{} {} {}",
            identity.kind(),
            identity.subject(),
            ctx.session_id()
        ))
    }

    /// Records every call with the identity it was made as.
    #[observer]
    pub fn record(ctx: &Context, observation: &Observation) {
        let line = format!(
            "{} {} {} {}",
            ctx.identity().subject(),
            ctx.identity().kind(),
            observation.method,
            observation.target.as_deref().unwrap_or("-")
        );
        super::OBSERVED.lock().unwrap().push(line);
    }
}

const WAIT: Duration = Duration::from_secs(20);
const HMAC_SECRET: &[u8] = b"an hmac secret of at least 32 bytes, for tests";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/identity")
        .join(name)
}

fn options() -> HttpOptions {
    HttpOptions::default().listen("127.0.0.1:0".parse().unwrap())
}

async fn serve(options: HttpOptions) -> HttpServer {
    Proxy::new(support::scripted_upstream())
        .model::<whoami::Model>()
        .serve_http(options)
        .await
        .expect("serve_http")
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

// ------------------------------------------------------------------------------ the client

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// How the test client reaches the proxy: plain TCP, or TLS with an optional certificate.
#[derive(Clone)]
struct Client {
    addr: SocketAddr,
    tls: Option<tokio_rustls::TlsConnector>,
    bearer: Option<String>,
}

/// One complete response.
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC messages of the body: one JSON body, or the `data:` of each SSE event.
    fn messages(&self) -> Vec<Value> {
        if self.header("content-type") == Some("application/json") {
            return vec![serde_json::from_str(&self.body).expect("a JSON body")];
        }
        self.body
            .split("\n\n")
            .filter_map(|event| {
                let data: Vec<&str> = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                let data = data.join("\n");
                (!data.is_empty()).then(|| serde_json::from_str(&data).expect("JSON data"))
            })
            .collect()
    }

    /// The last message: the answer.
    fn answer(&self) -> Value {
        self.messages()
            .pop()
            .unwrap_or_else(|| panic!("no message in {self:?}"))
    }

    fn error_message(&self) -> String {
        let body: Value = serde_json::from_str(&self.body).expect("a JSON error body");
        assert_eq!(body["error"]["code"], -32030, "{body}");
        body["error"]["message"].as_str().unwrap().to_owned()
    }
}

impl Client {
    fn plain(addr: SocketAddr) -> Self {
        Self {
            addr,
            tls: None,
            bearer: None,
        }
    }

    /// A TLS client trusting the test CA, presenting `certificate` (`alice`, `mallory`) if any.
    fn tls(addr: SocketAddr, certificate: Option<&str>) -> Self {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_file(fixture("ca.pem")).unwrap())
            .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        let config = match certificate {
            Some(name) => {
                let chain =
                    vec![CertificateDer::from_pem_file(fixture(&format!("{name}.pem"))).unwrap()];
                let key = PrivateKeyDer::from_pem_file(fixture(&format!("{name}.key"))).unwrap();
                builder.with_client_auth_cert(chain, key).unwrap()
            }
            None => builder.with_no_client_auth(),
        };
        Self {
            addr,
            tls: Some(tokio_rustls::TlsConnector::from(Arc::new(config))),
            bearer: None,
        }
    }

    fn bearer(&self, token: &str) -> Self {
        Self {
            bearer: Some(token.to_owned()),
            ..self.clone()
        }
    }

    async fn connect(&self) -> std::io::Result<Box<dyn Io>> {
        let tcp = TcpStream::connect(self.addr).await?;
        match &self.tls {
            None => Ok(Box::new(tcp)),
            Some(connector) => {
                let name = ServerName::try_from("localhost").unwrap();
                Ok(Box::new(connector.connect(name, tcp).await?))
            }
        }
    }

    /// Sends one request and reads the whole response (the connection closes after it).
    async fn try_send(
        &self,
        method: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> std::io::Result<Reply> {
        let mut io = self.connect().await?;
        let mut head = format!(
            "{method} /mcp HTTP/1.1\r\nhost: localhost:{}\r\nconnection: close\r\n",
            self.addr.port()
        );
        if let Some(token) = &self.bearer {
            head.push_str(&format!("authorization: Bearer {token}\r\n"));
        }
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
        io.write_all(head.as_bytes()).await?;
        io.write_all(body.as_bytes()).await?;
        io.flush().await?;
        let mut raw = Vec::new();
        let read = tokio::time::timeout(WAIT, async {
            let mut buf = [0u8; 16 * 1024];
            loop {
                match io.read(&mut buf).await {
                    Ok(0) => return Ok(()),
                    Ok(n) => raw.extend_from_slice(&buf[..n]),
                    // A TLS peer that closes without close_notify: the response is complete.
                    Err(_) if !raw.is_empty() => return Ok(()),
                    Err(err) => return Err(err),
                }
            }
        })
        .await
        .expect("no response in time");
        read?;
        parse(&raw).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("no HTTP response: {:?}", String::from_utf8_lossy(&raw)),
            )
        })
    }

    async fn send(&self, method: &str, headers: &[(&str, &str)], body: &str) -> Reply {
        self.try_send(method, headers, body)
            .await
            .expect("a response")
    }

    async fn post(&self, session: Option<&str>, body: &str) -> Reply {
        let mut headers = vec![ACCEPT, JSON];
        if let Some(session) = session {
            headers.push(("mcp-session-id", session));
        }
        self.send("POST", &headers, body).await
    }

    /// Initializes a session; returns its id.
    async fn initialize(&self) -> String {
        let reply = self.post(None, INIT).await;
        assert_eq!(reply.status, 200, "{reply:?}");
        let session = reply
            .header("mcp-session-id")
            .expect("a session id")
            .to_owned();
        assert_eq!(
            reply.answer()["result"]["serverInfo"]["name"],
            "scripted-upstream"
        );
        let done = self
            .post(
                Some(&session),
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            )
            .await;
        assert_eq!(done.status, 202);
        session
    }

    /// Calls `whoami` in `session`: (kind, subject, session id), or the refusal.
    async fn whoami(&self, session: &str) -> Result<(String, String, String), Reply> {
        let reply = self.post(Some(session), &call(7, "whoami")).await;
        if reply.status != 200 {
            return Err(reply);
        }
        Ok(split_whoami(&reply.answer()))
    }
}

fn split_whoami(answer: &Value) -> (String, String, String) {
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {answer}"));
    let mut parts = text.splitn(3, ' ').map(str::to_owned);
    (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    )
}

/// Status line, headers and (de-chunked) body of a complete response.
fn parse(raw: &[u8]) -> Option<Reply> {
    let text = String::from_utf8_lossy(raw);
    let (head, rest) = text.split_once("\r\n\r\n")?;
    let mut lines = head.lines();
    let status = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        let mut body = String::new();
        let mut rest = rest;
        while let Some((size, after)) = rest.split_once("\r\n") {
            let size = usize::from_str_radix(size.trim(), 16).ok()?;
            if size == 0 {
                break;
            }
            body.push_str(after.get(..size)?);
            rest = after.get(size + 2..)?;
        }
        body
    } else {
        rest.to_owned()
    };
    Some(Reply {
        status,
        headers,
        body,
    })
}

const ACCEPT: (&str, &str) = ("accept", "application/json, text/event-stream");
const JSON: (&str, &str) = ("content-type", "application/json");
const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"identity-test","version":"1.0.0"}}}"#;

fn call(id: u64, tool: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": {}}})
        .to_string()
}

// ---------------------------------------------------------------------------------- tokens

fn b64url(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[derive(Clone, Copy)]
enum Signer<'a> {
    Hs256(&'a [u8]),
    Rs256(&'a str),
    Es256(&'a str),
}

/// A JWT with `claims`, signed by `signer` (a key fixture's name for RS256 and ES256).
fn jwt(signer: Signer<'_>, claims: &Value) -> String {
    let alg = match signer {
        Signer::Hs256(_) => "HS256",
        Signer::Rs256(_) => "RS256",
        Signer::Es256(_) => "ES256",
    };
    let signed = format!(
        "{}.{}",
        b64url(json!({"alg": alg, "typ": "JWT"}).to_string().as_bytes()),
        b64url(claims.to_string().as_bytes())
    );
    let rng = ring::rand::SystemRandom::new();
    let signature = match signer {
        Signer::Hs256(secret) => {
            let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
            ring::hmac::sign(&key, signed.as_bytes()).as_ref().to_vec()
        }
        Signer::Rs256(name) => {
            let der = PrivatePkcs8KeyDer::from_pem_file(fixture(name)).unwrap();
            let key = RsaKeyPair::from_pkcs8(der.secret_pkcs8_der()).unwrap();
            let mut out = vec![0u8; key.public().modulus_len()];
            key.sign(
                &signature::RSA_PKCS1_SHA256,
                &rng,
                signed.as_bytes(),
                &mut out,
            )
            .unwrap();
            out
        }
        Signer::Es256(name) => {
            let der = PrivatePkcs8KeyDer::from_pem_file(fixture(name)).unwrap();
            let key = EcdsaKeyPair::from_pkcs8(
                &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
                der.secret_pkcs8_der(),
                &rng,
            )
            .unwrap();
            key.sign(&rng, signed.as_bytes()).unwrap().as_ref().to_vec()
        }
    };
    format!("{signed}.{}", b64url(&signature))
}

fn alice_claims() -> Value {
    json!({"sub": "alice", "iss": "https://idp.test", "aud": "mcp", "exp": now() + 600})
}

fn jwt_options(key: JwtKey) -> HttpOptions {
    let verifier = JwtVerifier::new(key)
        .issuer("https://idp.test")
        .audience("mcp")
        .leeway(Duration::from_secs(2));
    options().auth(Auth::new().jwt(verifier))
}

// ----------------------------------------------------------------------------------- tests

#[tokio::test]
async fn no_credential_gets_401_when_authentication_is_required() {
    let tokens = TokenList::new().with_token("alice", "token-of-alice-0123456789");
    let server = serve(options().auth(Auth::new().tokens(tokens))).await;
    let client = Client::plain(server.local_addr());

    let reply = client.post(None, INIT).await;
    assert_eq!(reply.status, 401);
    assert_eq!(
        reply.header("www-authenticate"),
        Some(r#"Bearer realm="mcp""#)
    );
    let message = reply.error_message();
    assert!(
        message.starts_with("Unauthorized: no credential"),
        "{message}"
    );

    // GET and DELETE need a credential too; a CORS preflight does not.
    let get = client
        .send(
            "GET",
            &[("accept", "text/event-stream"), ("mcp-session-id", "x")],
            "",
        )
        .await;
    assert_eq!(get.status, 401);
    let delete = client.send("DELETE", &[("mcp-session-id", "x")], "").await;
    assert_eq!(delete.status, 401);
    let preflight = client
        .send("OPTIONS", &[("origin", "http://localhost:3000")], "")
        .await;
    assert_eq!(preflight.status, 204);
    server.shutdown().await;
}

#[tokio::test]
async fn a_bad_token_gets_401_without_being_repeated() {
    let tokens = TokenList::new().with_token("alice", "token-of-alice-0123456789");
    let server = serve(options().auth(Auth::new().tokens(tokens))).await;
    let client = Client::plain(server.local_addr());

    let reply = client.bearer("guessed-token-424242").post(None, INIT).await;
    assert_eq!(reply.status, 401);
    assert_eq!(
        reply.header("www-authenticate"),
        Some(r#"Bearer realm="mcp", error="invalid_token""#)
    );
    assert!(
        !reply.body.contains("guessed-token-424242"),
        "{}",
        reply.body
    );
    assert!(reply.error_message().contains("not valid"));

    let basic = client
        .send(
            "POST",
            &[ACCEPT, JSON, ("authorization", "Basic YTpi")],
            INIT,
        )
        .await;
    assert_eq!(basic.status, 401);
    assert!(basic.error_message().contains("Bearer TOKEN"));
    server.shutdown().await;
}

#[tokio::test]
async fn a_listed_token_names_the_subject_for_models_and_observers() {
    let tokens = TokenList::new()
        .with_token("token-alice", "token-of-alice-0123456789")
        .with_token("token-bob", "token-of-bob-0123456789");
    let server = serve(options().auth(Auth::new().tokens(tokens))).await;
    let alice = Client::plain(server.local_addr()).bearer("token-of-alice-0123456789");
    let session = alice.initialize().await;
    let (kind, subject, _) = alice.whoami(&session).await.unwrap();
    assert_eq!((kind.as_str(), subject.as_str()), ("token", "token-alice"));
    let observed = OBSERVED.lock().unwrap().clone();
    assert!(
        observed.contains(&"token-alice token tools/call whoami".to_owned()),
        "{observed:?}"
    );
    assert!(
        observed.contains(&"token-alice token initialize -".to_owned()),
        "{observed:?}"
    );

    // Another identity cannot use the session: as if it did not exist.
    let bob = Client::plain(server.local_addr()).bearer("token-of-bob-0123456789");
    let stolen = bob.whoami(&session).await.unwrap_err();
    assert_eq!(stolen.status, 404);
    let deleted = bob
        .send("DELETE", &[("mcp-session-id", &session)], "")
        .await;
    assert_eq!(deleted.status, 404);
    assert!(alice.whoami(&session).await.is_ok(), "still alice's");
    server.shutdown().await;
}

#[tokio::test]
async fn without_authentication_http_clients_are_anonymous() {
    let server = serve(options()).await;
    // A bearer meant for someone else (an upstream, say) is not looked at.
    let client = Client::plain(server.local_addr()).bearer("whatever");
    let session = client.initialize().await;
    let (kind, subject, _) = client.whoami(&session).await.unwrap();
    assert_eq!(
        (kind.as_str(), subject.as_str()),
        ("anonymous", "anonymous")
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_revoked_token_is_refused_on_the_sessions_next_request() {
    let dir = std::env::temp_dir().join(format!("mcp-identity-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("tokens");
    std::fs::write(
        &file,
        "# subject token\nrevocable token-of-carol-0123456789\nkept token-of-dave-0123456789\n",
    )
    .unwrap();
    let tokens = TokenList::from_file(&file).unwrap();
    let server = serve(options().auth(Auth::new().tokens(tokens))).await;
    let carol = Client::plain(server.local_addr()).bearer("token-of-carol-0123456789");
    let session = carol.initialize().await;
    assert_eq!(carol.whoami(&session).await.unwrap().1, "revocable");

    std::fs::write(&file, "kept token-of-dave-0123456789\n").unwrap();
    let refused = carol.whoami(&session).await.unwrap_err();
    assert_eq!(refused.status, 401);
    assert!(refused.error_message().contains("revoked"));
    let dave = Client::plain(server.local_addr()).bearer("token-of-dave-0123456789");
    let other = dave.initialize().await;
    assert_eq!(dave.whoami(&other).await.unwrap().1, "kept");

    // Put back, the token works again in the same session (it stayed open).
    std::fs::write(
        &file,
        "revocable token-of-carol-0123456789\nkept token-of-dave-0123456789\n",
    )
    .unwrap();
    assert_eq!(carol.whoami(&session).await.unwrap().1, "revocable");
    server.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn hs256_jwts_valid_expired_forged_and_not_yet_valid() {
    let key = JwtKey::hmac(HMAC_SECRET.to_vec()).unwrap();
    let server = serve(jwt_options(key)).await;
    let client = Client::plain(server.local_addr());

    let token = jwt(Signer::Hs256(HMAC_SECRET), &alice_claims());
    let alice = client.bearer(&token);
    let session = alice.initialize().await;
    let (kind, subject, _) = alice.whoami(&session).await.unwrap();
    assert_eq!((kind.as_str(), subject.as_str()), ("jwt", "alice"));

    let expired = jwt(
        Signer::Hs256(HMAC_SECRET),
        &json!({"sub": "alice", "iss": "https://idp.test", "aud": "mcp", "exp": now() - 60}),
    );
    let reply = client.bearer(&expired).post(None, INIT).await;
    assert_eq!(reply.status, 401);
    assert!(reply.error_message().contains("expired"), "{}", reply.body);

    let forged = jwt(
        Signer::Hs256(b"another secret, also at least 32 bytes long"),
        &alice_claims(),
    );
    let reply = client.bearer(&forged).post(None, INIT).await;
    assert_eq!(reply.status, 401);
    assert!(
        reply.error_message().contains("signature"),
        "{}",
        reply.body
    );

    let early = jwt(
        Signer::Hs256(HMAC_SECRET),
        &json!({"sub": "alice", "iss": "https://idp.test", "aud": "mcp", "exp": now() + 600, "nbf": now() + 300}),
    );
    let reply = client.bearer(&early).post(None, INIT).await;
    assert_eq!(reply.status, 401);
    assert!(
        reply.error_message().contains("not valid yet"),
        "{}",
        reply.body
    );

    let wrong_audience = jwt(
        Signer::Hs256(HMAC_SECRET),
        &json!({"sub": "alice", "iss": "https://idp.test", "aud": "other", "exp": now() + 600}),
    );
    let reply = client.bearer(&wrong_audience).post(None, INIT).await;
    assert_eq!(reply.status, 401);
    assert!(reply.error_message().contains("audience"), "{}", reply.body);
    server.shutdown().await;
}

#[tokio::test]
async fn rs256_and_es256_jwts_verify_against_public_keys() {
    let rsa = JwtKey::from_pem_file(fixture("jwt-rsa.pub.pem")).unwrap();
    assert!(rsa.algorithms().contains(&"RS256"));
    let ec = JwtKey::from_pem_file(fixture("jwt-ec.pub.pem")).unwrap();
    let verifier = JwtVerifier::new(rsa)
        .key(ec)
        .issuer("https://idp.test")
        .audience("mcp");
    let server = serve(options().auth(Auth::new().jwt(verifier))).await;
    let client = Client::plain(server.local_addr());

    let token = jwt(Signer::Rs256("jwt-rsa.key"), &alice_claims());
    let alice = client.bearer(&token);
    let session = alice.initialize().await;
    assert_eq!(alice.whoami(&session).await.unwrap().1, "alice");

    let es = jwt(
        Signer::Es256("jwt-ec.key"),
        &json!({"sub": "erin", "iss": "https://idp.test", "aud": ["x", "mcp"], "exp": now() + 600}),
    );
    let erin = client.bearer(&es);
    let session = erin.initialize().await;
    assert_eq!(erin.whoami(&session).await.unwrap().1, "erin");

    let forged = jwt(Signer::Rs256("jwt-rsa-other.key"), &alice_claims());
    let reply = client.bearer(&forged).post(None, INIT).await;
    assert_eq!(reply.status, 401);
    assert!(
        reply.error_message().contains("signature"),
        "{}",
        reply.body
    );

    let expired = jwt(
        Signer::Rs256("jwt-rsa.key"),
        &json!({"sub": "alice", "iss": "https://idp.test", "aud": "mcp", "exp": now() - 3600}),
    );
    assert_eq!(client.bearer(&expired).post(None, INIT).await.status, 401);

    let early = jwt(
        Signer::Rs256("jwt-rsa.key"),
        &json!({"sub": "alice", "iss": "https://idp.test", "aud": "mcp", "exp": now() + 7200, "nbf": now() + 3600}),
    );
    assert_eq!(client.bearer(&early).post(None, INIT).await.status, 401);

    // An HS256 token made with the RSA public key as its secret (algorithm confusion).
    let public = std::fs::read(fixture("jwt-rsa.pub.pem")).unwrap();
    let confused = jwt(Signer::Hs256(&public), &alice_claims());
    let reply = client.bearer(&confused).post(None, INIT).await;
    assert_eq!(reply.status, 401);
    assert!(reply.error_message().contains("no key"), "{}", reply.body);
    assert!(!reply.body.contains("HS256"), "{}", reply.body);
    server.shutdown().await;
}

#[tokio::test]
async fn a_jwt_that_expires_mid_session_is_refused_and_a_fresh_one_goes_on() {
    // The verifier's clock is moved on instead of waiting for the token to expire.
    static AHEAD_SECS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let key = JwtKey::hmac(HMAC_SECRET.to_vec()).unwrap();
    let verifier = JwtVerifier::new(key).leeway(Duration::ZERO).clock(|| {
        std::time::SystemTime::now()
            + Duration::from_secs(AHEAD_SECS.load(std::sync::atomic::Ordering::Relaxed))
    });
    let server = serve(options().auth(Auth::new().jwt(verifier))).await;
    let client = Client::plain(server.local_addr());
    let short = jwt(
        Signer::Hs256(HMAC_SECRET),
        &json!({"sub": "frank", "exp": now() + 3}),
    );
    let session = client.bearer(&short).initialize().await;
    let (_, subject, core_session) = client.bearer(&short).whoami(&session).await.unwrap();
    assert_eq!(subject, "frank");

    AHEAD_SECS.store(10, std::sync::atomic::Ordering::Relaxed);
    let refused = client.bearer(&short).whoami(&session).await.unwrap_err();
    assert_eq!(refused.status, 401);
    assert!(refused.error_message().contains("expired"));

    // A refreshed token of the same subject goes on in the same session.
    let fresh = jwt(
        Signer::Hs256(HMAC_SECRET),
        &json!({"sub": "frank", "exp": now() + 600}),
    );
    let (_, subject, same) = client.bearer(&fresh).whoami(&session).await.unwrap();
    assert_eq!(
        (subject.as_str(), same.as_str()),
        ("frank", core_session.as_str())
    );
    // One of another subject does not.
    let other = jwt(
        Signer::Hs256(HMAC_SECRET),
        &json!({"sub": "grace", "exp": now() + 600}),
    );
    assert_eq!(
        client
            .bearer(&other)
            .whoami(&session)
            .await
            .unwrap_err()
            .status,
        404
    );
    server.shutdown().await;
}

/// 2026-07-28 headers and a `tools/call whoami` in the envelope, from the client `name`.
async fn stateless_whoami(client: &Client, name: &str) -> (String, String, String) {
    let body = json!({
        "jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "whoami", "arguments": {}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": name, "version": "1"},
        }},
    })
    .to_string();
    let headers = [
        ACCEPT,
        JSON,
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "whoami"),
    ];
    let reply = client.send("POST", &headers, &body).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    split_whoami(&reply.answer())
}

#[tokio::test]
async fn stateless_sessions_are_keyed_by_identity() {
    let tokens = TokenList::new()
        .with_token("henry", "token-of-henry-0123456789")
        .with_token("irene", "token-of-irene-0123456789");
    let server = serve(options().auth(Auth::new().tokens(tokens))).await;
    let henry = Client::plain(server.local_addr()).bearer("token-of-henry-0123456789");
    let irene = Client::plain(server.local_addr()).bearer("token-of-irene-0123456789");

    let (_, subject, first) = stateless_whoami(&henry, "shared-client").await;
    assert_eq!(subject, "henry");
    let (_, _, again) = stateless_whoami(&henry, "shared-client").await;
    assert_eq!(first, again, "one identity and client: one session");
    let (_, subject, hers) = stateless_whoami(&irene, "shared-client").await;
    assert_eq!(subject, "irene");
    assert_ne!(
        first, hers,
        "the same client name under another identity: its own session"
    );

    let anonymous = Client::plain(server.local_addr());
    let reply = anonymous
        .send(
            "POST",
            &[ACCEPT, JSON, ("mcp-protocol-version", "2026-07-28")],
            "{}",
        )
        .await;
    assert_eq!(reply.status, 401);
    server.shutdown().await;
}

fn tls_options() -> TlsOptions {
    TlsOptions::from_pem_files(fixture("server.pem"), fixture("server.key")).unwrap()
}

#[tokio::test]
async fn tls_without_client_certificates_serves_https() {
    let server = serve(options().tls(tls_options())).await;
    assert!(
        server.url().starts_with("https://127.0.0.1:"),
        "{}",
        server.url()
    );
    let client = Client::tls(server.local_addr(), None);
    let session = client.initialize().await;
    let (kind, _, _) = client.whoami(&session).await.unwrap();
    assert_eq!(kind, "anonymous");

    // Plain HTTP to a TLS port gets no HTTP answer.
    let plain = Client::plain(server.local_addr());
    assert!(plain.try_send("POST", &[ACCEPT, JSON], INIT).await.is_err());
    server.shutdown().await;
}

#[tokio::test]
async fn a_client_certificate_from_the_ca_names_the_subject() {
    let tls = tls_options()
        .client_certificates_file(fixture("ca.pem"), ClientCertificates::Required)
        .unwrap();
    let server = serve(options().tls(tls)).await;
    let alice = Client::tls(server.local_addr(), Some("alice"));
    let session = alice.initialize().await;
    let (kind, subject, _) = alice.whoami(&session).await.unwrap();
    assert_eq!((kind.as_str(), subject.as_str()), ("certificate", "alice"));
    let observed = OBSERVED.lock().unwrap().clone();
    assert!(
        observed.contains(&"alice certificate tools/call whoami".to_owned()),
        "{observed:?}"
    );

    // No certificate, or one from another CA: the handshake fails, no HTTP answer.
    let anonymous = Client::tls(server.local_addr(), None);
    let refused = anonymous.try_send("POST", &[ACCEPT, JSON], INIT).await;
    assert!(refused.is_err(), "{refused:?}");
    let mallory = Client::tls(server.local_addr(), Some("mallory"));
    let refused = mallory.try_send("POST", &[ACCEPT, JSON], INIT).await;
    assert!(refused.is_err(), "{refused:?}");
    // Alice is still served.
    assert!(alice.whoami(&session).await.is_ok());
    server.shutdown().await;
}

#[tokio::test]
async fn optional_client_certificates_work_beside_bearer_tokens() {
    let tls = tls_options()
        .client_certificates_file(fixture("ca.pem"), ClientCertificates::Optional)
        .unwrap();
    let tokens = TokenList::new().with_token("robot", "token-of-robot-0123456789");
    let server = serve(options().tls(tls).auth(Auth::new().tokens(tokens))).await;
    let addr = server.local_addr();

    let alice = Client::tls(addr, Some("alice"));
    let session = alice.initialize().await;
    assert_eq!(alice.whoami(&session).await.unwrap().1, "alice");

    let robot = Client::tls(addr, None).bearer("token-of-robot-0123456789");
    let session = robot.initialize().await;
    let (kind, subject, _) = robot.whoami(&session).await.unwrap();
    assert_eq!((kind.as_str(), subject.as_str()), ("token", "robot"));

    let nobody = Client::tls(addr, None).post(None, INIT).await;
    assert_eq!(nobody.status, 401);
    // A bad bearer is refused even with a good certificate.
    let mixed = Client::tls(addr, Some("alice")).bearer("wrong-token-0123456789");
    assert_eq!(mixed.post(None, INIT).await.status, 401);
    // A certificate from another CA is refused even when optional.
    let mallory = Client::tls(addr, Some("mallory"));
    assert!(
        mallory
            .try_send("POST", &[ACCEPT, JSON], INIT)
            .await
            .is_err()
    );
    server.shutdown().await;
}

#[test]
fn bad_tls_and_key_files_are_errors_naming_the_file() {
    let missing = TlsOptions::from_pem_files("/nonexistent/cert.pem", fixture("server.key"))
        .unwrap_err()
        .to_string();
    assert!(missing.contains("/nonexistent/cert.pem"), "{missing}");
    let swapped = TlsOptions::from_pem_files(fixture("server.key"), fixture("server.pem"))
        .unwrap_err()
        .to_string();
    assert!(swapped.contains("server.key"), "{swapped}");
    let mismatched = TlsOptions::from_pem_files(fixture("server.pem"), fixture("alice.key"))
        .unwrap_err()
        .to_string();
    assert!(mismatched.contains("cannot be used"), "{mismatched}");
    let no_ca = tls_options()
        .client_certificates_file(fixture("server.key"), ClientCertificates::Required)
        .unwrap_err()
        .to_string();
    assert!(no_ca.contains("server.key"), "{no_ca}");
    let not_a_key = JwtKey::from_pem_file(fixture("ca.pem"))
        .unwrap_err()
        .to_string();
    assert!(not_a_key.contains("ca.pem"), "{not_a_key}");
}

#[tokio::test]
async fn an_open_stream_ends_when_its_credential_lapses() {
    let dir = std::env::temp_dir().join(format!("mcp-identity-streams-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("tokens");
    std::fs::write(&file, "judy token-of-judy-0123456789\n").unwrap();
    let verifier =
        JwtVerifier::new(JwtKey::hmac(HMAC_SECRET.to_vec()).unwrap()).leeway(Duration::ZERO);
    let auth = Auth::new()
        .tokens(TokenList::from_file(&file).unwrap())
        .jwt(verifier);
    let server = serve(options().auth(auth).keep_alive(Duration::from_millis(100))).await;
    let addr = server.local_addr();
    let get = |client: Client, session: String| {
        tokio::spawn(async move {
            let started = std::time::Instant::now();
            let reply = client
                .send(
                    "GET",
                    &[
                        ("accept", "text/event-stream"),
                        ("mcp-session-id", &session),
                    ],
                    "",
                )
                .await;
            (reply.status, started.elapsed())
        })
    };

    // A JWT's GET stream ends at its `exp`.
    let short = jwt(
        Signer::Hs256(HMAC_SECRET),
        &json!({"sub": "kim", "exp": now() + 3}),
    );
    let kim = Client::plain(addr).bearer(&short);
    let session = kim.initialize().await;
    let (status, lasted) = get(kim.clone(), session.clone()).await.unwrap();
    assert_eq!(status, 200);
    assert!(
        lasted < Duration::from_secs(8),
        "the stream lasted {lasted:?}"
    );

    // A listed token's stream ends soon after the token is removed from the file.
    let judy = Client::plain(addr).bearer("token-of-judy-0123456789");
    let session = judy.initialize().await;
    let stream = get(judy.clone(), session.clone());
    // A request of the same session answered is the sign the token still holds (no timer).
    judy.whoami(&session)
        .await
        .expect("the listed token is accepted");
    assert!(!stream.is_finished(), "open while the token is listed");
    std::fs::write(&file, "# judy revoked\n").unwrap();
    let (status, _) = tokio::time::timeout(Duration::from_secs(5), stream)
        .await
        .expect("the stream ends once the token is revoked")
        .unwrap();
    assert_eq!(status, 200);
    server.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Reads one HTTP/1.1 response from `io`: its status. The body is read to its end when it has a
/// `content-length` (so the next response can follow), else left (an event stream).
async fn read_one_response(io: &mut TcpStream) -> u16 {
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    let (head_end, length) = loop {
        let n = tokio::time::timeout(WAIT, io.read(&mut buf))
            .await
            .expect("no response in time")
            .expect("read");
        assert!(n > 0, "the connection closed before a response: {raw:?}");
        raw.extend_from_slice(&buf[..n]);
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .map(|v| v.trim().parse::<usize>().expect("content-length"))
                .unwrap_or(0);
            break (end + 4, length);
        }
    };
    while raw.len() < head_end + length {
        let n = tokio::time::timeout(WAIT, io.read(&mut buf))
            .await
            .expect("no body in time")
            .expect("read");
        assert!(n > 0, "the connection closed inside the body");
        raw.extend_from_slice(&buf[..n]);
    }
    let status = String::from_utf8_lossy(&raw[9..12]).to_string();
    status.parse().expect("a status")
}

#[tokio::test]
async fn a_refused_request_leaves_its_connection_usable() {
    let tokens = TokenList::new().with_token("alice", "token-of-alice-0123456789");
    let server = serve(options().auth(Auth::new().tokens(tokens))).await;
    let mut io = TcpStream::connect(server.local_addr()).await.unwrap();
    let port = server.local_addr().port();
    let request = |token: &str| {
        format!(
            "POST /mcp HTTP/1.1\r\nhost: localhost:{port}\r\nauthorization: Bearer {token}\r\n\
             content-type: application/json\r\naccept: application/json, text/event-stream\r\n\
             content-length: {}\r\n\r\n{INIT}",
            INIT.len()
        )
    };
    // A wrong token, then the right one, on one keep-alive connection.
    io.write_all(request("not-a-token-of-anyone").as_bytes())
        .await
        .unwrap();
    assert_eq!(read_one_response(&mut io).await, 401);
    io.write_all(request("token-of-alice-0123456789").as_bytes())
        .await
        .unwrap();
    assert_eq!(read_one_response(&mut io).await, 200);
    // The body of a refused request arriving after its headers (as it does over TLS, in
    // records of its own): the client sends it only once the server asks for it (`Expect:
    // 100-continue`), so the refusal must wait for it for the connection to stay usable.
    let mut io = TcpStream::connect(server.local_addr()).await.unwrap();
    let wrong = request("not-a-token-of-anyone");
    let (head, body) = wrong.split_at(wrong.len() - INIT.len());
    let head = head.replacen("\r\n", "\r\nexpect: 100-continue\r\n", 1);
    io.write_all(head.as_bytes()).await.unwrap();
    let mut status = read_one_response(&mut io).await;
    if status == 100 {
        io.write_all(body.as_bytes()).await.unwrap();
        status = read_one_response(&mut io).await;
    }
    assert_eq!(status, 401);
    io.write_all(request("token-of-alice-0123456789").as_bytes())
        .await
        .unwrap();
    assert_eq!(read_one_response(&mut io).await, 200);
    drop(io);
    server.shutdown().await;
}
