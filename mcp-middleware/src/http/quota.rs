//! Quotas, so that no principal exhausts another's sessions: whom a session counts against,
//! and the refusals when a limit is reached.
//!
//! Each session runs its own upstream, so sessions are what a client can exhaust. The table
//! counts them globally ([`HttpOptions::max_sessions`]) and per [`Owner`]
//! ([`HttpOptions::session_quota`]); the listener counts connections
//! ([`HttpOptions::max_connections`]), and those of each client address
//! ([`HttpOptions::connection_quota`]). Every refusal is `503` with `Retry-After` and a JSON-RPC
//! error whose `data.quota` names the setting to raise (as `mcpctl serve` spells its flag).

use std::net::IpAddr;

use super::options::HttpOptions;
use super::reject::Reject;
use crate::auth::Identity;

/// Whom a session counts against: the principal an authenticated client is, or, for a client
/// that authenticates as no one, its address (everyone anonymous is the same principal, so
/// the address is all that tells them apart).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Owner(String);

impl Owner {
    /// The owner of a session started by `identity` from `peer`.
    pub(crate) fn of(identity: &Identity, peer: IpAddr) -> Self {
        if identity.is_authenticated() {
            return Self(identity.principal());
        }
        Self(format!("address:{}", network(peer)))
    }

    /// The owner a shared store recorded for a session (`as_str` of the original).
    pub(crate) fn stored(key: String) -> Self {
        Self(key)
    }

    /// The key, as logs and messages show it.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// The address a quota counts an anonymous client by: an IPv4 address as it is (IPv4-mapped
/// IPv6 included), an IPv6 address by its /64 prefix, since one host is commonly given a
/// whole /64 and could otherwise take a new address for every session.
pub(crate) fn network(peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let bits = u128::from(v6) & (u128::MAX << 64);
                IpAddr::V6(bits.into())
            }
        },
    }
}

/// The name of each quota in `data.quota`: the `mcpctl serve` flag that sets it.
pub(crate) const MAX_SESSIONS: &str = "max-sessions";
/// See [`MAX_SESSIONS`].
pub(crate) const MAX_SESSIONS_PER_PRINCIPAL: &str = "max-sessions-per-principal";
/// See [`MAX_SESSIONS`].
pub(crate) const MAX_CONNECTIONS: &str = "max-connections";
/// See [`MAX_SESSIONS`].
pub(crate) const MAX_CONNECTIONS_PER_ADDRESS: &str = "max-connections-per-address";

/// A `503` for `quota` at `limit`, with `data: {"quota": ..., "limit": ...}`.
fn refusal(quota: &str, limit: usize, message: String) -> Reject {
    let data = serde_json::json!({ "quota": quota, "limit": limit });
    Reject::unavailable(message).with_data(data.to_string())
}

/// The session limit of the whole proxy is reached.
pub(crate) fn sessions_full(options: &HttpOptions) -> Reject {
    let max = options.max_sessions;
    refusal(
        MAX_SESSIONS,
        max,
        format!(
            "Service Unavailable: the proxy is serving its limit of {max} sessions \
             (--max-sessions); end one (HTTP DELETE) or try again later"
        ),
    )
}

/// `owner` holds its quota of sessions.
pub(crate) fn owner_full(options: &HttpOptions, owner: &Owner) -> Reject {
    let max = options.session_quota();
    let who = match owner.as_str().strip_prefix("address:") {
        Some(address) => format!("the client address {address}"),
        None => format!("the principal `{}`", owner.as_str()),
    };
    refusal(
        MAX_SESSIONS_PER_PRINCIPAL,
        max,
        format!(
            "Service Unavailable: {who} holds its quota of {max} sessions \
             (--max-sessions-per-principal); end one (HTTP DELETE) or try again later"
        ),
    )
}

/// The connection limit is reached.
pub(crate) fn connections_full(options: &HttpOptions) -> Reject {
    let max = options.max_connections;
    refusal(
        MAX_CONNECTIONS,
        max,
        format!(
            "Service Unavailable: the proxy holds its limit of {max} connections \
             (--max-connections); close one or try again later"
        ),
    )
}

/// The client address `address` (as [`network`] counts it) holds its quota of connections.
pub(crate) fn address_full(options: &HttpOptions, address: IpAddr) -> Reject {
    let max = options.connection_quota();
    refusal(
        MAX_CONNECTIONS_PER_ADDRESS,
        max,
        format!(
            "Service Unavailable: the client address {address} holds its quota of {max} \
             connections (--max-connections-per-address); close one or try again later"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anonymous_clients_are_counted_by_address_and_ipv6_by_its_64() {
        let a = |s: &str| Owner::of(&Identity::Anonymous, s.parse().unwrap());
        assert_eq!(a("192.0.2.1").as_str(), "address:192.0.2.1");
        assert_ne!(a("192.0.2.1"), a("192.0.2.2"));
        assert_eq!(a("::ffff:192.0.2.1"), a("192.0.2.1"));
        assert_eq!(a("2001:db8:1:2::1"), a("2001:db8:1:2:ffff::9"));
        assert_eq!(a("2001:db8:1:2::1").as_str(), "address:2001:db8:1:2::");
        assert_ne!(a("2001:db8:1:2::1"), a("2001:db8:1:3::1"));
    }

    #[test]
    fn authenticated_clients_are_counted_by_principal_wherever_they_come_from() {
        let alice = Identity::Token {
            subject: "alice".into(),
        };
        let here = Owner::of(&alice, "192.0.2.1".parse().unwrap());
        let there = Owner::of(&alice, "198.51.100.7".parse().unwrap());
        assert_eq!(here, there);
        assert_eq!(here.as_str(), alice.principal());
    }

    #[test]
    fn refusals_name_the_quota_to_raise() {
        let options = HttpOptions::default().max_sessions_per_principal(3);
        let owner = Owner::of(&Identity::Anonymous, "192.0.2.1".parse().unwrap());
        let reject = owner_full(&options, &owner);
        assert_eq!(reject.status, hyper::StatusCode::SERVICE_UNAVAILABLE);
        let body: serde_json::Value = serde_json::from_str(&reject.body()).unwrap();
        assert_eq!(body["error"]["data"]["quota"], MAX_SESSIONS_PER_PRINCIPAL);
        assert_eq!(body["error"]["data"]["limit"], 3);
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("--max-sessions-per-principal"),
            "{message}"
        );
        assert!(message.contains("192.0.2.1"), "{message}");
    }
}
