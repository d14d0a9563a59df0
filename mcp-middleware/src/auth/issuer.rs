//! [`IssuerKeys`]: the signing keys of an OAuth authorization server, found from its issuer
//! URL and kept current.
//!
//! Discovery: the `jwks_uri` of the issuer's OpenID configuration
//! (`{issuer}/.well-known/openid-configuration`), else of its RFC 8414 metadata
//! (`/.well-known/oauth-authorization-server{path of the issuer}`); the metadata's `issuer`
//! must be the configured one (RFC 8414 §3.3), so one server cannot stand in for another.
//! Then the JWK set, read as [`JwtKey::from_jwks`] reads a file.
//!
//! Rotation: a token whose `kid` no cached key has makes the verifier fetch the set again
//! ([`IssuerKeys::refresh`]), at most once per [`IssuerKeys::min_refresh`] (30 s by default)
//! whatever the tokens say, so a flood of made-up `kid`s cannot make the proxy hammer the
//! issuer. Keys are swapped whole: a key the issuer dropped is dropped here too.
//!
//! Only `https://` URLs are fetched, or `http://` on loopback.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{AuthError, JwtKey};
use crate::upstream::http::{get_document, is_secure_or_loopback};

/// The most a metadata document or a JWK set may weigh.
const MAX_DOCUMENT: usize = 1024 * 1024;
/// How long one fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// The default [`IssuerKeys::min_refresh`].
pub const MIN_REFRESH: Duration = Duration::from_secs(30);

/// The keys of one issuer, discovered from its metadata (or read from a given `jwks_uri`),
/// shared by every clone of the [`JwtVerifier`](super::JwtVerifier) that uses them.
///
/// ```no_run
/// use mcp_middleware::auth::{IssuerKeys, JwtVerifier};
///
/// # async fn run() -> Result<(), mcp_middleware::auth::AuthError> {
/// let keys = IssuerKeys::new("https://login.example.com")?;
/// keys.load().await?; // discovery and the first fetch; fails if the issuer cannot be read
/// let verifier = JwtVerifier::from_issuer(keys).audience("https://mcp.example.com/mcp");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct IssuerKeys {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    issuer: String,
    jwks_uri: RwLock<Option<String>>,
    keys: RwLock<Vec<JwtKey>>,
    /// When a token last made the keys be fetched again.
    refreshed: tokio::sync::Mutex<Option<Instant>>,
    min_refresh: Duration,
    fetches: std::sync::atomic::AtomicU64,
}

impl IssuerKeys {
    /// The keys of `issuer` (an `https://` URL, or `http://` on loopback), not fetched yet.
    pub fn new(issuer: impl Into<String>) -> Result<Self, AuthError> {
        Self::build(issuer.into(), None, MIN_REFRESH)
    }

    /// The keys at `jwks_uri` (no discovery), for tokens of `issuer`.
    pub fn with_jwks_uri(
        issuer: impl Into<String>,
        jwks_uri: impl Into<String>,
    ) -> Result<Self, AuthError> {
        Self::build(issuer.into(), Some(jwks_uri.into()), MIN_REFRESH)
    }

    /// The same keys, fetched again at most once per `interval` when a token names an
    /// unknown `kid` (default [`MIN_REFRESH`]).
    pub fn min_refresh(mut self, interval: Duration) -> Self {
        match Arc::get_mut(&mut self.inner) {
            Some(inner) => inner.min_refresh = interval,
            // Already shared: build a fresh one (nothing fetched is lost that `load` won't redo).
            None => {
                let uri = self.jwks_uri();
                if let Ok(fresh) = Self::build(self.inner.issuer.clone(), uri, interval) {
                    return fresh;
                }
            }
        }
        self
    }

    fn build(
        issuer: String,
        jwks_uri: Option<String>,
        min_refresh: Duration,
    ) -> Result<Self, AuthError> {
        for url in std::iter::once(&issuer).chain(jwks_uri.iter()) {
            if !is_secure_or_loopback(url) {
                return Err(AuthError::Key(format!(
                    "`{url}` is not an https:// URL (http:// is accepted only on loopback)"
                )));
            }
        }
        Ok(Self {
            inner: Arc::new(Inner {
                issuer,
                jwks_uri: RwLock::new(jwks_uri),
                keys: RwLock::new(Vec::new()),
                refreshed: tokio::sync::Mutex::new(None),
                min_refresh,
                fetches: 0.into(),
            }),
        })
    }

    /// The issuer.
    pub fn issuer(&self) -> &str {
        &self.inner.issuer
    }

    /// How many times the key set has been fetched.
    pub fn fetches(&self) -> u64 {
        self.inner
            .fetches
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Discovers the `jwks_uri` (unless given) and fetches the keys now.
    pub async fn load(&self) -> Result<(), AuthError> {
        let uri = match self.jwks_uri() {
            Some(uri) => uri,
            None => {
                let uri = self.discover().await?;
                if let Ok(mut slot) = self.inner.jwks_uri.write() {
                    *slot = Some(uri.clone());
                }
                uri
            }
        };
        let body = get_document(&uri, MAX_DOCUMENT, FETCH_TIMEOUT)
            .await
            .map_err(|err| AuthError::Key(format!("the keys of `{}`: {err}", self.issuer())))?;
        self.inner
            .fetches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let text = std::str::from_utf8(&body)
            .map_err(|_| AuthError::Key(format!("the JWK set at `{uri}` is not UTF-8")))?;
        let keys = JwtKey::from_jwks(text)
            .map_err(|err| AuthError::Key(format!("the JWK set at `{uri}`: {err}")))?;
        if let Ok(mut slot) = self.inner.keys.write() {
            *slot = keys;
        }
        Ok(())
    }

    /// Fetches the keys again, unless a token made that happen less than
    /// [`min_refresh`](Self::min_refresh) ago; a failure is logged and the cached keys kept.
    /// Concurrent callers wait for the one fetch.
    pub async fn refresh(&self) {
        let mut last = self.inner.refreshed.lock().await;
        if last.is_some_and(|at| at.elapsed() < self.inner.min_refresh) {
            return;
        }
        *last = Some(Instant::now());
        match self.load().await {
            Ok(()) => tracing::info!(issuer = self.issuer(), "fetched the issuer's keys again"),
            Err(err) => tracing::warn!("{err}; keeping the keys fetched before"),
        }
    }

    pub(crate) fn keys(&self) -> Vec<JwtKey> {
        self.inner
            .keys
            .read()
            .map(|keys| keys.clone())
            .unwrap_or_default()
    }

    fn jwks_uri(&self) -> Option<String> {
        self.inner.jwks_uri.read().ok().and_then(|uri| uri.clone())
    }

    /// The `jwks_uri` of the issuer's metadata: OpenID configuration first, then RFC 8414.
    async fn discover(&self) -> Result<String, AuthError> {
        let issuer = self.issuer().trim_end_matches('/');
        let (origin, path) = split_origin(issuer);
        let candidates = [
            format!("{issuer}/.well-known/openid-configuration"),
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
        ];
        let mut failures = Vec::new();
        for url in &candidates {
            match get_document(url, MAX_DOCUMENT, FETCH_TIMEOUT).await {
                Ok(body) => return self.jwks_uri_of(url, &body),
                Err(err) => failures.push(err),
            }
        }
        Err(AuthError::Key(format!(
            "cannot discover the keys of issuer `{}`: {}",
            self.issuer(),
            failures.join("; ")
        )))
    }

    fn jwks_uri_of(&self, url: &str, body: &[u8]) -> Result<String, AuthError> {
        let bad = |what: &str| AuthError::Key(format!("the metadata at `{url}` {what}"));
        let metadata: Value = serde_json::from_slice(body).map_err(|_| bad("is not JSON"))?;
        if metadata.get("issuer").and_then(Value::as_str) != Some(self.issuer()) {
            return Err(bad("names another issuer (RFC 8414 §3.3)"));
        }
        let uri = metadata
            .get("jwks_uri")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("has no `jwks_uri`"))?;
        if !is_secure_or_loopback(uri) {
            return Err(bad(
                "has a `jwks_uri` that is not https:// (http:// is accepted only on loopback)",
            ));
        }
        Ok(uri.to_owned())
    }
}

/// `https://host:port` and the rest (`/tenant`, or empty) of an issuer URL.
fn split_origin(issuer: &str) -> (&str, &str) {
    let after_scheme = issuer.find("://").map_or(0, |i| i + 3);
    match issuer[after_scheme..].find('/') {
        Some(slash) => issuer.split_at(after_scheme + slash),
        None => (issuer, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issuers_must_be_https_or_loopback() {
        assert!(IssuerKeys::new("https://login.example.com").is_ok());
        assert!(IssuerKeys::new("http://127.0.0.1:9000").is_ok());
        assert!(IssuerKeys::new("http://localhost:9000/realm").is_ok());
        assert!(IssuerKeys::new("http://[::1]:9000").is_ok());
        let err = IssuerKeys::new("http://login.example.com").unwrap_err();
        assert!(err.to_string().contains("loopback"), "{err}");
        assert!(IssuerKeys::with_jwks_uri("https://a.example", "http://10.0.0.1/jwks").is_err());
        assert!(IssuerKeys::new("login.example.com").is_err());
    }

    #[test]
    fn origins_split_from_paths() {
        assert_eq!(
            split_origin("https://a.example/tenant/x"),
            ("https://a.example", "/tenant/x")
        );
        assert_eq!(
            split_origin("http://127.0.0.1:1"),
            ("http://127.0.0.1:1", "")
        );
    }
}
