//! Authenticating each request: the bearer credential or the connection's client certificate,
//! in the order [`crate::auth`] describes, or a `401` refusal; and how long the credential
//! stays good, so a long-lived SSE stream ends when it lapses ([`Validity`]).

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use hyper::header::{self, HeaderMap};
use serde_json::Value;

use super::options::HttpOptions;
use super::reject::Reject;
use super::resource::Published;
use super::tls::PeerCertificate;
use crate::auth::Identity;
use crate::auth::{Auth, AuthFailure, TokenList};

/// A request's identity, and how long the credential it came with stays good.
#[derive(Debug)]
pub(crate) struct Authenticated {
    pub(crate) identity: Identity,
    pub(crate) validity: Validity,
    /// The verified JWT the request carried: what token exchange to upstreams exchanges
    /// (`upstream::token_exchange`), never sent anywhere as it is.
    pub(crate) bearer: Option<SubjectToken>,
}

/// A verified access token, kept out of `Debug` output.
pub(crate) struct SubjectToken(pub(crate) Box<str>);

impl std::fmt::Debug for SubjectToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SubjectToken(..)")
    }
}

/// Whether a credential still holds, asked by an SSE stream while it is open: a stream ends
/// (within a keep-alive interval) once the credential that opened it has expired or been
/// revoked; the client resumes it (`Last-Event-ID`) with a fresh one.
pub(crate) enum Validity {
    /// No credential (anonymous), or one that does not lapse.
    Always,
    /// Good until this time (a JWT's `exp` plus the leeway, a certificate's `notAfter`), in
    /// Unix seconds.
    Until(f64),
    /// Good while the token list still maps the token to the subject (checked at most once a
    /// second).
    Listed {
        tokens: TokenList,
        token: Box<str>,
        subject: String,
        checked: Option<Instant>,
    },
}

impl std::fmt::Debug for Validity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Validity::Always => f.write_str("Always"),
            Validity::Until(at) => write!(f, "Until({at})"),
            // Never the token.
            Validity::Listed { subject, .. } => write!(f, "Listed({subject})"),
        }
    }
}

impl Validity {
    /// Whether the credential still holds now.
    pub(crate) fn holds(&mut self) -> bool {
        match self {
            Validity::Always => true,
            Validity::Until(at) => now() <= *at,
            Validity::Listed {
                tokens,
                token,
                subject,
                checked,
            } => {
                if checked.is_some_and(|at| at.elapsed().as_secs() < 1) {
                    return true;
                }
                *checked = Some(Instant::now());
                tokens.subject_of(token).as_deref() == Some(subject.as_str())
            }
        }
    }
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// What the front accepts, fixed when it starts.
#[derive(Debug)]
pub(crate) struct Authenticator {
    auth: Auth,
    /// Whether client certificates are asked for.
    certificates: bool,
    /// The protected-resource metadata, when published: named in every `401`, and its
    /// scopes required.
    resource: Option<Published>,
}

impl Authenticator {
    pub(crate) fn new(options: &HttpOptions, resource: Option<Published>) -> Self {
        let mut auth = options.auth.clone();
        if let (Some(published), Some(config)) = (&resource, &options.protected_resource)
            && config.audience_is_resource
        {
            auth = auth.default_audience(&published.resource);
        }
        if let Some(jwt) = auth.jwt_verifier() {
            jwt.warn_about_open_checks();
        }
        Self {
            resource,
            auth,
            certificates: options
                .tls
                .as_ref()
                .is_some_and(|tls| tls.client_certificate_mode().is_some()),
        }
    }

    /// Whether every request must carry a credential.
    pub(crate) fn required(&self) -> bool {
        self.auth.is_required() || self.certificates
    }

    /// The identity of one request, and how long its credential holds; `403` when it is a
    /// JWT without the scopes the resource requires.
    pub(crate) async fn authenticate(
        &self,
        headers: &HeaderMap,
        peer: Option<&PeerCertificate>,
    ) -> Result<Authenticated, Reject> {
        let metadata = self.resource.as_ref().map(|r| r.metadata_url.as_str());
        let identity = self.resolve(headers, peer).await.map_err(|failure| {
            tracing::debug!(reason = %failure, "request refused: not authenticated");
            Reject::unauthorized(&failure, metadata)
        })?;
        if let Some(resource) = &self.resource {
            let missing = resource.missing_scopes(&identity);
            if !missing.is_empty() {
                tracing::debug!(?missing, "request refused: insufficient scope");
                return Err(Reject::insufficient_scope(
                    &missing,
                    &resource.scopes,
                    &resource.metadata_url,
                ));
            }
        }
        let validity = match &identity {
            Identity::Token { subject } => match (self.auth.token_list(), bearer_of(headers)) {
                (Some(tokens), Some(token)) => Validity::Listed {
                    tokens: tokens.clone(),
                    token: token.into(),
                    subject: subject.clone(),
                    checked: Some(Instant::now()),
                },
                _ => Validity::Always,
            },
            Identity::Jwt { claims, .. } => match claims.get("exp").and_then(Value::as_f64) {
                Some(exp) => Validity::Until(exp + self.auth.jwt_leeway().as_secs_f64()),
                None => Validity::Always,
            },
            Identity::Certificate { .. } => match peer {
                Some(peer) => Validity::Until(peer.not_after as f64),
                None => Validity::Always,
            },
            _ => Validity::Always,
        };
        let bearer = matches!(identity, Identity::Jwt { .. })
            .then(|| bearer_of(headers))
            .flatten()
            .map(|token| SubjectToken(token.into()));
        Ok(Authenticated {
            identity,
            validity,
            bearer,
        })
    }

    async fn resolve(
        &self,
        headers: &HeaderMap,
        peer: Option<&PeerCertificate>,
    ) -> Result<Identity, AuthFailure> {
        if self.auth.is_required()
            && let Some(value) = headers.get(header::AUTHORIZATION)
        {
            let value = value.to_str().map_err(|_| AuthFailure::Scheme)?;
            let token = bearer(value).ok_or(AuthFailure::Scheme)?;
            return self.auth.verify_bearer_fresh(token).await;
        }
        if self.certificates
            && let Some(peer) = peer
        {
            if peer.expired() {
                return Err(AuthFailure::Expired("client certificate"));
            }
            return Ok(peer.identity.clone());
        }
        if self.required() {
            return Err(AuthFailure::Missing);
        }
        Ok(Identity::Anonymous)
    }
}

fn bearer_of(headers: &HeaderMap) -> Option<&str> {
    bearer(headers.get(header::AUTHORIZATION)?.to_str().ok()?)
}

/// The token of `Bearer TOKEN` (the scheme is case-insensitive, RFC 9110).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::TokenList;
    use hyper::header::HeaderValue;

    #[test]
    fn bearer_headers_are_read() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer   abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer"), None);
    }

    #[tokio::test]
    async fn requests_resolve_to_identities() {
        let open = Authenticator::new(&HttpOptions::default(), None);
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer x"));
        // With no credentials configured a bearer is not looked at (it may be for the upstream).
        assert_eq!(open.resolve(&headers, None).await, Ok(Identity::Anonymous));

        let options = HttpOptions::default()
            .auth(Auth::new().tokens(TokenList::new().with_token("alice", "tok-alice")));
        let closed = Authenticator::new(&options, None);
        assert_eq!(
            closed.resolve(&HeaderMap::new(), None).await,
            Err(AuthFailure::Missing)
        );
        assert_eq!(
            closed.resolve(&headers, None).await,
            Err(AuthFailure::UnknownToken)
        );
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer tok-alice"),
        );
        assert_eq!(
            closed.resolve(&headers, None).await,
            Ok(Identity::Token {
                subject: "alice".to_owned()
            })
        );
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Basic eDp5"),
        );
        assert_eq!(
            closed.resolve(&headers, None).await,
            Err(AuthFailure::Scheme)
        );
    }
}
