//! [`Front`]: what every request passes before it reaches a session, shared by the listener
//! ([`super::server`]) and the request handler ([`super::handler`]).

use super::authn::Authenticator;
use super::guard::Guard;

/// What every request passes before it reaches a session: the Host/Origin guard, the
/// authenticator, and (for HTTPS) the TLS acceptor every connection is handshaken with.
pub(crate) struct Front {
    pub(crate) guard: Guard,
    pub(crate) authn: Authenticator,
    pub(crate) tls: Option<tokio_rustls::TlsAcceptor>,
    /// The protected-resource metadata, when published.
    pub(crate) resource: Option<super::resource::Published>,
    /// `/healthz` and `/readyz`.
    pub(crate) health: super::health::Health,
}
