//! Authenticating each request: the bearer credential or the connection's client certificate,
//! in the order [`crate::auth`] describes, or a `401` refusal.

use hyper::header::{self, HeaderMap};

use super::options::HttpOptions;
use super::reject::Reject;
use super::tls::PeerCertificate;
use crate::auth::{Auth, AuthFailure};
use crate::context::Identity;

/// What the front accepts, fixed when it starts.
#[derive(Debug)]
pub(crate) struct Authenticator {
    auth: Auth,
    /// Whether client certificates are asked for.
    certificates: bool,
}

impl Authenticator {
    pub(crate) fn new(options: &HttpOptions) -> Self {
        Self {
            auth: options.auth.clone(),
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

    /// The identity of one request.
    pub(crate) fn authenticate(
        &self,
        headers: &HeaderMap,
        peer: Option<&PeerCertificate>,
    ) -> Result<Identity, Reject> {
        self.resolve(headers, peer).map_err(|failure| {
            tracing::debug!(reason = %failure, "request refused: not authenticated");
            Reject::unauthorized(&failure)
        })
    }

    fn resolve(
        &self,
        headers: &HeaderMap,
        peer: Option<&PeerCertificate>,
    ) -> Result<Identity, AuthFailure> {
        if self.auth.is_required()
            && let Some(value) = headers.get(header::AUTHORIZATION)
        {
            let value = value.to_str().map_err(|_| AuthFailure::Scheme)?;
            let token = bearer(value).ok_or(AuthFailure::Scheme)?;
            return self.auth.verify_bearer(token);
        }
        if self.certificates
            && let Some(peer) = peer
        {
            if peer.expired() {
                return Err(AuthFailure::Expired(
                    "the client certificate has expired".to_owned(),
                ));
            }
            return Ok(peer.identity.clone());
        }
        if self.required() {
            return Err(AuthFailure::Missing);
        }
        Ok(Identity::Anonymous)
    }
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

    #[test]
    fn requests_resolve_to_identities() {
        let open = Authenticator::new(&HttpOptions::default());
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer x"));
        // With no credentials configured a bearer is not looked at (it may be for the upstream).
        assert_eq!(open.resolve(&headers, None), Ok(Identity::Anonymous));

        let options = HttpOptions::default()
            .auth(Auth::new().tokens(TokenList::new().with_token("alice", "tok-alice")));
        let closed = Authenticator::new(&options);
        assert_eq!(
            closed.resolve(&HeaderMap::new(), None),
            Err(AuthFailure::Missing)
        );
        assert_eq!(
            closed.resolve(&headers, None),
            Err(AuthFailure::UnknownToken)
        );
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer tok-alice"),
        );
        assert_eq!(
            closed.resolve(&headers, None),
            Ok(Identity::Token {
                subject: "alice".to_owned()
            })
        );
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Basic eDp5"),
        );
        assert_eq!(closed.resolve(&headers, None), Err(AuthFailure::Scheme));
    }
}
