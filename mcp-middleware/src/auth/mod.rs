//! Who an HTTP client is: the credentials the HTTP front accepts and the
//! [`Identity`] each one resolves to.
//!
//! ```
//! use mcp_middleware::auth::{Auth, JwtKey, JwtVerifier, TokenList};
//! use mcp_middleware::http::HttpOptions;
//!
//! let auth = Auth::new()
//!     .tokens(TokenList::new().with_token("ci-bot", "a-long-random-token-for-the-ci-bot"))
//!     .jwt(JwtVerifier::new(JwtKey::hmac(b"a secret of at least thirty-two bytes!".to_vec()).unwrap())
//!         .issuer("https://issuer.example.com"));
//! assert!(auth.is_required());
//! let options = HttpOptions::default().auth(auth);
//! assert_eq!(
//!     options.auth.verify_bearer("a-long-random-token-for-the-ci-bot").unwrap().subject(),
//!     "ci-bot"
//! );
//! ```
//!
//! # How a request is authenticated
//!
//! Every request to the endpoint (not a CORS preflight) is authenticated, not only the one that
//! starts a session:
//!
//! 1. An `Authorization: Bearer TOKEN` header, when the front accepts bearer credentials: the
//!    token is looked up in the [`TokenList`] (→ [`Identity::Token`]), else, if it has the
//!    shape of a JWT, verified by the [`JwtVerifier`] (→ [`Identity::Jwt`]). A bearer that
//!    fails is refused even when a client certificate came with it.
//! 2. Otherwise the TLS client certificate of the connection, when the front asks for them
//!    ([`TlsOptions::client_certificates`](crate::http::TlsOptions::client_certificates)):
//!    verified against the configured CA during the handshake (→ [`Identity::Certificate`]),
//!    and refused once past its `notAfter` on a connection that outlived it.
//! 3. Otherwise, when any credential is configured, the request is refused; when none is,
//!    the client is [`Identity::Anonymous`].
//!
//! A refusal is `401 Unauthorized` with `WWW-Authenticate: Bearer` and a JSON-RPC error
//! ([`UNAUTHORIZED`](crate::http::UNAUTHORIZED)) whose message says what was wrong (missing,
//! unknown or revoked, malformed, unsupported algorithm, unknown key, bad signature, expired,
//! not yet valid, wrong issuer, wrong audience: [`AuthFailure`]), never the token, anything
//! else the client sent, or what the proxy is configured to expect.
//! With [`HttpOptions::protected_resource`](crate::http::HttpOptions::protected_resource)
//! the challenge also names the protected-resource metadata (`resource_metadata="..."`, RFC
//! 9728), and a JWT without the required scopes gets `403 insufficient_scope`
//! ([`ProtectedResource`](crate::http::ProtectedResource)). Keys can come from the issuer
//! itself ([`IssuerKeys`], [`JwtVerifier::from_issuer`]), fetched again, rate-limited, when a
//! token names a key not cached.
//!
//! # Sessions
//!
//! A session is bound to the identity that started it, as its *principal*
//! ([`Identity::principal`]: the kind of credential and the subject, plus the issuer for a JWT,
//! the issuer's and subject's whole names for a certificate; each part percent-encoded, so two
//! identities never share one). Every later request of the session
//! must authenticate again, and as the same principal: a request whose credential has expired
//! or been revoked gets `401`; one authenticated as someone else is told the session does not
//! exist (`404`, as for an unknown id, so session ids reveal nothing across identities). A
//! client whose JWT expired mid-session goes on in the same session with a fresh token of the
//! same subject; the session's [`Identity`] (and its claims) stays the one it started with.
//! An SSE stream (a request's, or the GET stream) is a request too: it ends once the
//! credential that opened it lapses (a JWT's `exp`, a certificate's `notAfter`, a token
//! removed from its list), checked before each event and at each keep-alive; the client
//! resumes it with `Last-Event-ID` and a valid credential.
//! Stateless (2026-07-28) sessions are keyed by the principal and the client's name.

mod certificate;
mod current;
mod identity;
mod issuer;
mod jwt;
mod tokens;

use std::path::{Path, PathBuf};

pub use certificate::{CertificateError, CertificateInfo};
pub(crate) use current::CurrentIdentity;
pub use identity::Identity;
pub use issuer::{IssuerKeys, MIN_REFRESH};
pub use jwt::{JwtKey, JwtVerifier};
pub use tokens::TokenList;

/// The credentials the HTTP front accepts besides client certificates: a token list, a JWT
/// verifier, or both. The default accepts none (every client is [`Identity::Anonymous`],
/// unless TLS client certificates are asked for).
#[derive(Debug, Clone, Default)]
pub struct Auth {
    tokens: Option<TokenList>,
    jwt: Option<JwtVerifier>,
}

impl Auth {
    /// No credentials.
    pub fn new() -> Self {
        Self::default()
    }

    /// Accepts the bearer tokens of `tokens`.
    pub fn tokens(mut self, tokens: TokenList) -> Self {
        self.tokens = Some(tokens);
        self
    }

    /// Accepts bearer JWTs that `verifier` verifies.
    pub fn jwt(mut self, verifier: JwtVerifier) -> Self {
        self.jwt = Some(verifier);
        self
    }

    /// Whether bearer credentials are configured (then every request needs one, or a client
    /// certificate).
    pub fn is_required(&self) -> bool {
        self.tokens.is_some() || self.jwt.is_some()
    }

    /// The same, with the JWT verifier's audience `audience` when it has none.
    pub(crate) fn default_audience(mut self, audience: &str) -> Self {
        self.jwt = self.jwt.map(|jwt| jwt.default_audience(audience));
        self
    }

    pub(crate) fn token_list(&self) -> Option<&TokenList> {
        self.tokens.as_ref()
    }

    pub(crate) fn jwt_verifier(&self) -> Option<&JwtVerifier> {
        self.jwt.as_ref()
    }

    pub(crate) fn jwt_leeway(&self) -> std::time::Duration {
        self.jwt
            .as_ref()
            .map_or(std::time::Duration::ZERO, JwtVerifier::leeway_of)
    }

    /// The identity a bearer token stands for: the token list first, then the JWT verifier.
    ///
    /// ```
    /// use mcp_middleware::auth::{Auth, AuthFailure, TokenList};
    ///
    /// let auth = Auth::new().tokens(TokenList::new().with_token("alice", "token-of-alice-0001"));
    /// assert_eq!(auth.verify_bearer("token-of-alice-0001").unwrap().subject(), "alice");
    /// assert!(matches!(auth.verify_bearer("nope"), Err(AuthFailure::UnknownToken)));
    /// ```
    pub fn verify_bearer(&self, token: &str) -> Result<Identity, AuthFailure> {
        self.verify_bearer_cached(token)
    }

    /// As [`verify_bearer`](Self::verify_bearer), and when the JWT names a key the verifier
    /// does not have and its keys come from the issuer, fetches them again (rate-limited:
    /// [`IssuerKeys::refresh`]) and tries once more: how keys the issuer rotated in are
    /// accepted without a restart.
    pub async fn verify_bearer_fresh(&self, token: &str) -> Result<Identity, AuthFailure> {
        match self.verify_bearer_cached(token) {
            Err(AuthFailure::UnknownKey) => {
                let Some(keys) = self.jwt.as_ref().and_then(JwtVerifier::issuer_keys) else {
                    return Err(AuthFailure::UnknownKey);
                };
                keys.refresh().await;
                self.verify_bearer_cached(token)
            }
            other => other,
        }
    }

    fn verify_bearer_cached(&self, token: &str) -> Result<Identity, AuthFailure> {
        if let Some(subject) = self.tokens.as_ref().and_then(|t| t.subject_of(token)) {
            return Ok(Identity::Token { subject });
        }
        match &self.jwt {
            Some(jwt) if token.split('.').count() >= 3 => jwt.verify(token),
            _ => Err(AuthFailure::UnknownToken),
        }
    }
}

/// Why a request's credential was refused: the sentence after `Unauthorized:` in the `401`
/// answer. It says what was wrong, in words fixed here: never the credential, nothing the
/// client sent (an `alg`, a `kid`, a claim), nothing of the configuration (the issuer or
/// audience the proxy expects, the subject claim, the keys).
///
/// ```
/// use mcp_middleware::auth::AuthFailure;
///
/// assert_eq!(
///     AuthFailure::WrongIssuer.to_string(),
///     "the JWT's issuer is not one the proxy accepts"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthFailure {
    /// No credential came with the request.
    #[error(
        "no credential: send `Authorization: Bearer TOKEN` (or connect with a client certificate \
         where the proxy asks for one)"
    )]
    Missing,
    /// The `Authorization` header is not `Bearer TOKEN`.
    #[error("the Authorization header is not `Bearer TOKEN`")]
    Scheme,
    /// The bearer token is in no token list (never was, or was revoked) and is not a JWT.
    #[error("the bearer token is not valid (unknown, or revoked)")]
    UnknownToken,
    /// The token is not a well-formed JWT; the text says which part is wrong.
    #[error("the bearer token is not a well-formed JWT: {0}")]
    Malformed(&'static str),
    /// The JWT's `alg` is `none` or one the proxy does not verify.
    #[error("the JWT's signing algorithm is not one the proxy accepts (unsigned JWTs never are)")]
    UnsupportedAlgorithm,
    /// No configured key fits the JWT's `kid` and `alg`.
    #[error("no key the proxy knows fits the JWT's key id and algorithm")]
    UnknownKey,
    /// The JWT's signature does not verify.
    #[error("the JWT's signature does not verify")]
    BadSignature,
    /// The credential (`JWT`, or `client certificate`) has expired.
    #[error("the {0} has expired")]
    Expired(&'static str),
    /// The JWT is not valid yet (`nbf`).
    #[error("the JWT is not valid yet (`nbf`)")]
    NotYetValid,
    /// The JWT's `iss` is missing or not the configured issuer.
    #[error("the JWT's issuer is not one the proxy accepts")]
    WrongIssuer,
    /// The JWT's `aud` is missing or does not include the configured audience.
    #[error("the JWT's audience is not one the proxy accepts")]
    WrongAudience,
    /// A claim the proxy needs is missing (the text says which).
    #[error("{0}")]
    Claims(&'static str),
}

/// An identity configuration that cannot be used: a file that cannot be read, a malformed
/// token list, an unusable key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// A file could not be read.
    #[error("cannot read `{}`: {cause}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        cause: std::io::Error,
    },
    /// A token list line is malformed.
    #[error("token list `{}`, line {line}: {message}", path.display())]
    TokenFile {
        /// The file (`(text)` for [`TokenList::parse`]).
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// A key cannot be used.
    #[error("{0}")]
    Key(String),
}

impl AuthError {
    /// The error, saying which file it is about.
    fn in_file(self, path: &Path) -> Self {
        match self {
            AuthError::Key(message) => AuthError::Key(format!("`{}`: {message}", path.display())),
            other => other,
        }
    }
}
