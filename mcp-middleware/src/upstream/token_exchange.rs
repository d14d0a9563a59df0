//! OAuth 2.0 token exchange (RFC 8693) for HTTP upstreams: the caller's identity reaches an
//! upstream without the caller's own token being passed through (the MCP authorization spec
//! forbids that).
//!
//! An [`HttpUpstream`](super::HttpUpstream) given a [`TokenExchange`] sends each request with
//! `Authorization: Bearer EXCHANGED`, where `EXCHANGED` is what the configured endpoint
//! returned for the caller's verified access token (`subject_token`, of type
//! `urn:ietf:params:oauth:token-type:access_token`). What this module owns:
//!
//! - the exchange request: a form `POST` with the client authenticated by HTTP Basic
//!   (`client_secret_basic`, RFC 6749 §2.3.1), `audience`, `scope` and `resource` when
//!   configured, over the proxy's own hyper + rustls client (`https://`, or `http://` on
//!   loopback only: the request carries a client secret and the caller's token);
//! - the cache: one exchanged token per principal (shared by every session of that principal and
//!   every clone of the upstream), used until shortly before its `expires_in` runs out (a tenth
//!   of its lifetime, at most 60 s, earlier). A token answered without `expires_in` is not
//!   cached: the proxy cannot know how long it holds. Concurrent requests of one principal wait
//!   for one exchange;
//! - [`Caller`]: the session's principal and its latest verified token, which the HTTP front
//!   updates on every request of the session (a client that refreshed its token exchanges the
//!   new one next time).
//!
//! Failures (no caller token, as on stdio; the endpoint unreachable or refusing) are errors in
//! words that name the endpoint and the authorization server's `error`: the request that needed
//! the token gets them as its JSON-RPC error, and they are logged. No token ever appears in an
//! error, a log or `Debug` output.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::Deserialize;

use super::env_refs;
use super::http::{is_secure_or_loopback, post_form};

/// `grant_type` of a token exchange.
pub(crate) const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// The token type of the caller's token and of the one asked for.
pub(crate) const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// How long one exchange may take.
const TIMEOUT: Duration = Duration::from_secs(10);
/// The largest answer read from the endpoint.
const MAX_ANSWER: usize = 64 * 1024;
/// An exchanged token is replaced at most this long before it expires.
const MAX_EARLY: Duration = Duration::from_secs(60);
/// What `application/x-www-form-urlencoded` escapes (the WHATWG URL standard's set: all but
/// letters, digits and `*-._`; a space as `%20`, which every form parser reads as `+`).
const FORM: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'*')
    .remove(b'-')
    .remove(b'.')
    .remove(b'_');
/// Principals cached at most; expired entries go first, then the one that expires soonest.
const MAX_CACHED: usize = 10_000;

/// Where and how an HTTP upstream's token is obtained by token exchange (RFC 8693).
///
/// `client_secret` may hold `${env:VAR}` (resolved at each exchange, never shown).
///
/// ```
/// use mcp_middleware::upstream::{HttpUpstream, TokenExchange};
///
/// let exchange = TokenExchange::new("https://login.example.com/token", "mcp-proxy", "${env:PROXY_SECRET}")
///     .audience("https://tools.example.com")
///     .scope("tools:read");
/// let server = HttpUpstream::new("https://tools.example.com/mcp").token_exchange(exchange);
/// assert_eq!(server.to_string(), "https://tools.example.com/mcp");
/// ```
#[derive(Clone)]
pub struct TokenExchange {
    endpoint: String,
    client_id: String,
    client_secret: String,
    audience: Option<String>,
    scope: Option<String>,
    resource: Option<String>,
    /// Shared by every clone, so every session of a principal reuses one exchanged token.
    cache: Arc<Cache>,
}

impl TokenExchange {
    /// Exchanges at `endpoint` (the authorization server's token endpoint) as the client
    /// `client_id` with `client_secret`.
    pub fn new(
        endpoint: impl Into<String>,
        client_id: impl Into<String>,
        client_secret: impl Into<String>,
    ) -> Self {
        Self {
            endpoint: endpoint.into(),
            client_id: client_id.into(),
            client_secret: client_secret.into(),
            audience: None,
            scope: None,
            resource: None,
            cache: Arc::default(),
        }
    }

    /// Asks for a token for this audience (`audience`).
    pub fn audience(mut self, audience: impl Into<String>) -> Self {
        self.audience = Some(audience.into());
        self
    }

    /// Asks for these scopes (space-separated, `scope`).
    pub fn scope(mut self, scope: impl Into<String>) -> Self {
        self.scope = Some(scope.into());
        self
    }

    /// Asks for a token for this resource (`resource`, RFC 8707).
    pub fn resource(mut self, resource: impl Into<String>) -> Self {
        self.resource = Some(resource.into());
        self
    }

    /// The endpoint exchanges are sent to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Whether the endpoint may be used: `https://`, or `http://` on loopback.
    pub(crate) fn check(&self) -> Result<(), String> {
        if is_secure_or_loopback(&self.endpoint) {
            Ok(())
        } else {
            Err(format!(
                "token exchange endpoint `{}` must be https:// (http:// only on loopback)",
                self.endpoint
            ))
        }
    }

    /// The token to send upstream for `caller`: cached, or exchanged now.
    pub(crate) async fn token_for(&self, caller: Option<&Caller>) -> Result<String, String> {
        let Some(caller) = caller else {
            return Err(self.failed("this session has no verified caller token to exchange (token exchange needs `mcpctl serve` with JWT authentication)"));
        };
        let slot = self.cache.slot(&caller.principal);
        let mut held = slot.lock().await;
        if let Some(cached) = held.as_ref().filter(|c| Instant::now() < c.refresh_at) {
            return Ok(cached.token.clone());
        }
        let Some(subject) = caller.token() else {
            return Err(self.failed("this session has no verified caller token to exchange"));
        };
        let answer = self.exchange(&subject).await.inspect_err(|err| {
            tracing::warn!(principal = %caller.principal, "{err}");
        })?;
        let token = answer.access_token.clone();
        *held = answer.expires_in.filter(|s| *s > 0).map(|seconds| {
            let lifetime = Duration::from_secs(seconds);
            Exchanged {
                token: answer.access_token,
                refresh_at: refresh_at(Instant::now(), lifetime),
            }
        });
        drop(held);
        self.cache.prune();
        tracing::debug!(principal = %caller.principal, endpoint = %self.endpoint, "exchanged the caller's token for the upstream");
        Ok(token)
    }

    fn failed(&self, why: &str) -> String {
        format!("token exchange at {} failed: {why}", self.endpoint)
    }

    async fn exchange(&self, subject_token: &str) -> Result<Answer, String> {
        self.check()?;
        let secret = env_refs::resolve(std::ffi::OsStr::new(&self.client_secret))
            .map_err(|err| self.failed(&format!("the client secret: {err}")))?;
        let secret = secret.to_string_lossy();
        let mut form = vec![
            ("grant_type", GRANT_TYPE),
            ("subject_token", subject_token),
            ("subject_token_type", ACCESS_TOKEN_TYPE),
            ("requested_token_type", ACCESS_TOKEN_TYPE),
        ];
        for (name, value) in [
            ("audience", &self.audience),
            ("scope", &self.scope),
            ("resource", &self.resource),
        ] {
            if let Some(value) = value {
                form.push((name, value));
            }
        }
        let body = encode_form(&form);
        let credentials = format!(
            "{}:{}",
            utf8_percent_encode(&self.client_id, FORM),
            utf8_percent_encode(&secret, FORM)
        );
        let authorization = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(credentials)
        );
        let (status, bytes) = post_form(&self.endpoint, &authorization, body, MAX_ANSWER, TIMEOUT)
            .await
            .map_err(|err| self.failed(&err))?;
        if !status.is_success() {
            let refusal: Refusal = serde_json::from_slice(&bytes).unwrap_or_default();
            let mut why = format!("the authorization server answered HTTP {status}");
            if let Some(error) = refusal.error {
                why.push_str(&format!(" `{}`", printable(&error)));
            }
            if let Some(description) = refusal.error_description {
                why.push_str(&format!(": {}", printable(&description)));
            }
            return Err(self.failed(&why));
        }
        let answer: Answer = serde_json::from_slice(&bytes)
            .map_err(|err| self.failed(&format!("its answer is not a token response ({err})")))?;
        if answer.access_token.is_empty() {
            return Err(self.failed("its answer has an empty `access_token`"));
        }
        if let Some(kind) = &answer.token_type
            && !kind.eq_ignore_ascii_case("bearer")
        {
            return Err(self.failed(&format!(
                "it issued a `{}` token, not a bearer token",
                printable(kind)
            )));
        }
        Ok(answer)
    }
}

impl PartialEq for TokenExchange {
    /// The same configuration (the cache is not compared).
    fn eq(&self, other: &Self) -> bool {
        (
            &self.endpoint,
            &self.client_id,
            &self.client_secret,
            &self.audience,
            &self.scope,
            &self.resource,
        ) == (
            &other.endpoint,
            &other.client_id,
            &other.client_secret,
            &other.audience,
            &other.scope,
            &other.resource,
        )
    }
}

impl Eq for TokenExchange {}

impl fmt::Debug for TokenExchange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The secret as written (a `${env:VAR}` placeholder at most), never resolved.
        f.debug_struct("TokenExchange")
            .field("endpoint", &self.endpoint)
            .field("client_id", &self.client_id)
            .field("audience", &self.audience)
            .field("scope", &self.scope)
            .field("resource", &self.resource)
            .finish_non_exhaustive()
    }
}

/// A session's caller, as token exchange needs it: the principal (the cache key) and the latest
/// verified access token it presented. Clones share the token.
#[derive(Clone)]
pub(crate) struct Caller {
    principal: Arc<str>,
    token: Arc<Mutex<Option<Arc<str>>>>,
}

impl Caller {
    pub(crate) fn new(principal: impl Into<Arc<str>>) -> Self {
        Self {
            principal: principal.into(),
            token: Arc::default(),
        }
    }

    /// Records the token a request of the session was verified with (`None` keeps the last).
    pub(crate) fn present(&self, token: Option<&str>) {
        if let Some(token) = token
            && let Ok(mut held) = self.token.lock()
            && held.as_deref() != Some(token)
        {
            *held = Some(token.into());
        }
    }

    fn token(&self) -> Option<Arc<str>> {
        self.token.lock().ok()?.clone()
    }
}

impl PartialEq for Caller {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.token, &other.token)
    }
}

impl Eq for Caller {}

impl fmt::Debug for Caller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the token.
        write!(f, "Caller({})", self.principal)
    }
}

/// Exchanged tokens by principal; each slot is held during its exchange.
#[derive(Default)]
struct Cache {
    slots: Mutex<HashMap<Arc<str>, Slot>>,
}

type Slot = Arc<tokio::sync::Mutex<Option<Exchanged>>>;

struct Exchanged {
    token: String,
    refresh_at: Instant,
}

impl Cache {
    fn slot(&self, principal: &Arc<str>) -> Slot {
        match self.slots.lock() {
            Ok(mut slots) => slots.entry(principal.clone()).or_default().clone(),
            // A poisoned map: no caching, every request exchanges.
            Err(_) => Slot::default(),
        }
    }

    /// Keeps at most [`MAX_CACHED`] principals: the expired and empty slots go first (those
    /// held right now are kept), then those that expire soonest.
    fn prune(&self) {
        let Ok(mut slots) = self.slots.lock() else {
            return;
        };
        if slots.len() <= MAX_CACHED {
            return;
        }
        let now = Instant::now();
        slots.retain(|_, slot| match slot.try_lock() {
            Ok(held) => held.as_ref().is_some_and(|c| c.refresh_at > now),
            Err(_) => true,
        });
        while slots.len() > MAX_CACHED {
            let soonest = slots
                .iter()
                .filter_map(|(k, slot)| {
                    Some((k.clone(), slot.try_lock().ok()?.as_ref()?.refresh_at))
                })
                .min_by_key(|(_, at)| *at)
                .map(|(k, _)| k);
            match soonest {
                Some(key) => slots.remove(&key),
                None => break,
            };
        }
    }
}

/// A successful token response (RFC 8693 §2.2.1).
#[derive(Deserialize)]
struct Answer {
    access_token: String,
    #[serde(default)]
    token_type: Option<String>,
    #[serde(default)]
    expires_in: Option<u64>,
}

/// An error response (RFC 6749 §5.2).
#[derive(Deserialize, Default)]
struct Refusal {
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    error_description: Option<String>,
}

/// `application/x-www-form-urlencoded`.
fn encode_form(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(name, value)| {
            format!(
                "{}={}",
                utf8_percent_encode(name, FORM),
                utf8_percent_encode(value, FORM)
            )
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// At most 200 characters of text from the authorization server, control characters dropped.
fn printable(text: &str) -> String {
    text.chars().filter(|c| !c.is_control()).take(200).collect()
}

/// When a token exchanged `now` with `lifetime` left is exchanged again: a tenth of its life
/// early, at most [`MAX_EARLY`], so a request never goes upstream with a token about to expire.
fn refresh_at(now: Instant, lifetime: Duration) -> Instant {
    now + lifetime - (lifetime / 10).min(MAX_EARLY)
}

#[cfg(test)]
mod tests {
    use super::*;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A one-route token endpoint on loopback that answers each request with the next of
    /// `answers` (status, JSON body) and counts the requests; returns its URL.
    async fn endpoint(
        answers: Vec<(u16, String)>,
    ) -> (
        String,
        Arc<std::sync::atomic::AtomicUsize>,
        Arc<Mutex<Vec<String>>>,
    ) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/token", listener.local_addr().unwrap());
        let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (counter, bodies) = (count.clone(), seen.clone());
        tokio::spawn(async move {
            for (status, body) in answers {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                // Headers, then a body of Content-Length bytes.
                loop {
                    let n = stream.read(&mut buf).await.unwrap();
                    request.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&request).to_string();
                    if let Some((head, rest)) = text.split_once("\r\n\r\n") {
                        let length = head
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse::<usize>().unwrap())
                            })
                            .unwrap_or(0);
                        if rest.len() >= length {
                            bodies.lock().unwrap().push(text);
                            break;
                        }
                    }
                }
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let response = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                stream.write_all(response.as_bytes()).await.unwrap();
            }
        });
        (url, count, seen)
    }

    fn caller(principal: &str, token: &str) -> Caller {
        let caller = Caller::new(principal);
        caller.present(Some(token));
        caller
    }

    #[tokio::test]
    async fn a_token_is_exchanged_once_per_principal_while_it_is_fresh() {
        let answers = vec![
            (
                200,
                r#"{"access_token":"up-alice","token_type":"Bearer","expires_in":300}"#.to_owned(),
            ),
            (
                200,
                r#"{"access_token":"up-bob","token_type":"Bearer","expires_in":300}"#.to_owned(),
            ),
        ];
        let (url, count, seen) = endpoint(answers).await;
        let exchange = TokenExchange::new(&url, "proxy", "s3cret")
            .audience("tools")
            .scope("a b");
        let alice = caller("jwt:idp:alice", "alice-token");
        assert_eq!(exchange.token_for(Some(&alice)).await.unwrap(), "up-alice");
        // Cached: a clone (another session's upstream) reuses it, no second request.
        assert_eq!(
            exchange.clone().token_for(Some(&alice)).await.unwrap(),
            "up-alice"
        );
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 1);
        let bob = caller("jwt:idp:bob", "bob-token");
        assert_eq!(exchange.token_for(Some(&bob)).await.unwrap(), "up-bob");
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 2);
        let first = seen.lock().unwrap()[0].clone();
        assert!(
            first.contains("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Atoken-exchange"),
            "{first}"
        );
        assert!(first.contains("subject_token=alice-token"), "{first}");
        assert!(
            first.contains("audience=tools") && first.contains("scope=a%20b"),
            "{first}"
        );
        let basic = base64::engine::general_purpose::STANDARD.encode("proxy:s3cret");
        assert!(
            first.contains(&format!("authorization: Basic {basic}")),
            "{first}"
        );
    }

    #[test]
    fn a_token_is_refreshed_a_tenth_of_its_life_early_at_most_a_minute() {
        let now = Instant::now();
        let at = |seconds| refresh_at(now, Duration::from_secs(seconds)) - now;
        assert_eq!(at(1), Duration::from_millis(900));
        assert_eq!(at(300), Duration::from_secs(270));
        assert_eq!(at(3600), Duration::from_secs(3540));
    }

    #[tokio::test]
    async fn a_token_near_its_expiry_or_without_one_is_exchanged_again() {
        let answers = vec![
            (
                200,
                r#"{"access_token":"short","token_type":"Bearer","expires_in":1}"#.to_owned(),
            ),
            (
                200,
                r#"{"access_token":"unknown-life","token_type":"bearer"}"#.to_owned(),
            ),
            (
                200,
                r#"{"access_token":"third","token_type":"bearer"}"#.to_owned(),
            ),
        ];
        let (url, count, _) = endpoint(answers).await;
        let exchange = TokenExchange::new(&url, "proxy", "s");
        let alice = caller("p", "t");
        // Cached while fresh: the second call asks nobody.
        assert_eq!(exchange.token_for(Some(&alice)).await.unwrap(), "short");
        assert_eq!(exchange.token_for(Some(&alice)).await.unwrap(), "short");
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 1);
        // At its refresh time (set here rather than waited for), it is exchanged again.
        if let Some(cached) = exchange.cache.slot(&alice.principal).lock().await.as_mut() {
            cached.refresh_at = Instant::now();
        }
        assert_eq!(
            exchange.token_for(Some(&alice)).await.unwrap(),
            "unknown-life"
        );
        // No `expires_in`: not cached.
        assert_eq!(exchange.token_for(Some(&alice)).await.unwrap(), "third");
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn refusals_name_the_endpoint_and_the_error_never_a_token() {
        let answers = vec![
            (
                400,
                r#"{"error":"invalid_grant","error_description":"subject token expired"}"#
                    .to_owned(),
            ),
            (
                200,
                r#"{"access_token":"x","token_type":"N_A","expires_in":60}"#.to_owned(),
            ),
        ];
        let (url, _, _) = endpoint(answers).await;
        let exchange = TokenExchange::new(&url, "proxy", "s");
        let alice = caller("p", "the-callers-token");
        let refused = exchange.token_for(Some(&alice)).await.unwrap_err();
        assert!(
            refused.contains(&url)
                && refused.contains("invalid_grant")
                && refused.contains("subject token expired"),
            "{refused}"
        );
        assert!(!refused.contains("the-callers-token"));
        let not_bearer = exchange.token_for(Some(&alice)).await.unwrap_err();
        assert!(not_bearer.contains("not a bearer token"), "{not_bearer}");
        let none = exchange.token_for(None).await.unwrap_err();
        assert!(none.contains("no verified caller token"), "{none}");
        let no_token = exchange
            .token_for(Some(&Caller::new("q")))
            .await
            .unwrap_err();
        assert!(no_token.contains("no verified caller token"), "{no_token}");
        assert!(
            format!("{alice:?}").contains('p')
                && !format!("{alice:?}").contains("the-callers-token")
        );
    }

    #[tokio::test]
    async fn endpoints_are_https_or_loopback_and_secrets_come_from_the_environment() {
        let remote = TokenExchange::new("http://login.example.com/token", "c", "s");
        let err = remote.token_for(Some(&caller("p", "t"))).await.unwrap_err();
        assert!(err.contains("https://"), "{err}");
        let missing = TokenExchange::new(
            "http://127.0.0.1:9/token",
            "c",
            "${env:MCP_MIDDLEWARE_TX_UNSET}",
        );
        let err = missing
            .token_for(Some(&caller("p", "t")))
            .await
            .unwrap_err();
        assert!(err.contains("MCP_MIDDLEWARE_TX_UNSET"), "{err}");
        assert!(!format!("{missing:?}").contains("client_secret"));
    }
}
