//! `spec.auth` of a Project: how `mcpctl serve PROJECT` identifies its clients, and what it
//! publishes as an OAuth protected resource. Checked when the project is applied, each error
//! naming its field.
//!
//! ```yaml
//! auth:
//!   tokens: /etc/mcp/tokens.txt           # SUBJECT TOKEN lines (absolute path)
//!   jwt:
//!     issuer: https://login.example.com   # keys discovered from its metadata unless a key is given
//!     audience: https://mcp.example.com/mcp   # default: the resource
//!     # jwksUri: https://login.example.com/keys | keyFile: /etc/mcp/idp.pem | secretFile: ...
//!     subjectClaim: email                 # default: sub
//!     leeway: 30                          # seconds, default 60
//!   mtls: { clientCa: /etc/mcp/ca.pem }   # needs --tls-cert/--tls-key
//!   oauth:
//!     resource: https://mcp.example.com/mcp   # default: http(s)://{listen address}/mcp
//!     authorizationServers: [https://login.example.com]   # default: [jwt.issuer]
//!     scopes: [mcp:tools]                 # advertised, and required of every JWT
//! ```

use mcp_middleware::auth::IssuerKeys;
use serde::{Deserialize, Serialize};

/// `spec.auth`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProjectAuth {
    /// A token list file (`SUBJECT TOKEN` per line), absolute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<String>,
    /// JWT bearer tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt: Option<JwtAuth>,
    /// TLS client certificates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtls: Option<MtlsAuth>,
    /// The protected-resource metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<OauthAuth>,
}

/// `spec.auth.jwt`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JwtAuth {
    /// The required `iss`; with no key given, where the keys are discovered.
    pub issuer: String,
    /// The required `aud`; default: the resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// Where the JWK set is (no discovery).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks_uri: Option<String>,
    /// A PEM public key or JWK set file, absolute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<String>,
    /// An HMAC secret file, absolute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_file: Option<String>,
    /// The claim naming the client (default `sub`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject_claim: Option<String>,
    /// Seconds of clock skew allowed (default 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leeway: Option<u64>,
}

/// `spec.auth.mtls`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MtlsAuth {
    /// The CA (PEM) client certificates must be issued by, absolute.
    pub client_ca: String,
}

/// `spec.auth.oauth`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OauthAuth {
    /// The resource identifier; default `http(s)://{listen address}/mcp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// The authorization servers; default the JWT issuer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub authorization_servers: Vec<String>,
    /// Scopes advertised and required of every JWT.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
}

impl ProjectAuth {
    /// The problems of the section, the first found, naming its field (`auth.jwt.issuer`).
    pub fn check(&self) -> Result<(), String> {
        if self.tokens.is_none() && self.jwt.is_none() && self.mtls.is_none() {
            return Err(
                "`auth` needs at least one of `tokens`, `jwt` and `mtls` (without them every client is anonymous: leave `auth` out)"
                    .to_owned(),
            );
        }
        if let Some(path) = &self.tokens {
            absolute("auth.tokens", path)?;
        }
        if let Some(mtls) = &self.mtls {
            absolute("auth.mtls.clientCa", &mtls.client_ca)?;
        }
        if let Some(jwt) = &self.jwt {
            jwt.check()?;
        }
        if let Some(oauth) = &self.oauth {
            if let Some(resource) = &oauth.resource
                && !is_http_url(resource)
            {
                return Err(format!(
                    "`auth.oauth.resource` `{resource}` is not an absolute http(s):// URL without a fragment"
                ));
            }
            for (i, server) in oauth.authorization_servers.iter().enumerate() {
                IssuerKeys::new(server.as_str())
                    .map_err(|err| format!("`auth.oauth.authorizationServers[{i}]`: {err}"))?;
            }
            if oauth.authorization_servers.is_empty() && self.jwt.is_none() {
                return Err(
                    "`auth.oauth` needs `authorizationServers` when there is no `auth.jwt` (whose issuer is the default)"
                        .to_owned(),
                );
            }
            for (i, scope) in oauth.scopes.iter().enumerate() {
                if scope.is_empty() || scope.contains([' ', '"', '\\']) || !scope.is_ascii() {
                    return Err(format!(
                        "`auth.oauth.scopes[{i}]` `{scope}` is not a scope (RFC 6749 §3.3: printable ASCII without spaces, quotes or backslashes)"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Whether the front is published as a protected resource: with `jwt` or `oauth`.
    pub fn publishes_resource(&self) -> bool {
        self.jwt.is_some() || self.oauth.is_some()
    }

    /// The authorization servers the metadata names: `oauth.authorizationServers`, else the
    /// JWT issuer.
    pub fn authorization_servers(&self) -> Vec<String> {
        match (&self.oauth, &self.jwt) {
            (Some(oauth), _) if !oauth.authorization_servers.is_empty() => {
                oauth.authorization_servers.clone()
            }
            (_, Some(jwt)) => vec![jwt.issuer.clone()],
            _ => Vec::new(),
        }
    }
}

impl JwtAuth {
    fn check(&self) -> Result<(), String> {
        IssuerKeys::new(self.issuer.as_str()).map_err(|err| format!("`auth.jwt.issuer`: {err}"))?;
        let given = [
            ("jwksUri", self.jwks_uri.as_ref()),
            ("keyFile", self.key_file.as_ref()),
            ("secretFile", self.secret_file.as_ref()),
        ];
        let set: Vec<&str> = given
            .iter()
            .filter(|(_, v)| v.is_some())
            .map(|(n, _)| *n)
            .collect();
        if set.len() > 1 {
            return Err(format!(
                "`auth.jwt` takes at most one of `jwksUri`, `keyFile` and `secretFile`, not `{}`",
                set.join("` and `")
            ));
        }
        if let Some(uri) = &self.jwks_uri {
            IssuerKeys::with_jwks_uri(self.issuer.as_str(), uri.as_str())
                .map_err(|err| format!("`auth.jwt.jwksUri`: {err}"))?;
        }
        if let Some(path) = &self.key_file {
            absolute("auth.jwt.keyFile", path)?;
        }
        if let Some(path) = &self.secret_file {
            absolute("auth.jwt.secretFile", path)?;
        }
        if self.audience.as_deref() == Some("") {
            return Err("`auth.jwt.audience` is empty".to_owned());
        }
        if self.subject_claim.as_deref() == Some("") {
            return Err("`auth.jwt.subjectClaim` is empty".to_owned());
        }
        if self.leeway.is_some_and(|secs| secs > 3600) {
            return Err(
                "`auth.jwt.leeway` is over 3600 seconds: clock skew is seconds, not hours"
                    .to_owned(),
            );
        }
        Ok(())
    }
}

/// `auth` of an HTTP `Server`: how the proxy authenticates to that server for each caller.
///
/// ```yaml
/// kind: Server
/// metadata: { name: tools }
/// spec:
///   url: https://tools.example.com/mcp
///   auth:
///     tokenExchange:                      # RFC 8693, for each caller's verified JWT
///       endpoint: https://login.example.com/token
///       clientId: mcp-proxy
///       clientSecret: ${env:PROXY_CLIENT_SECRET}   # only as a variable reference
///       audience: https://tools.example.com        # optional, as are scope and resource
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServerAuth {
    /// OAuth 2.0 token exchange (RFC 8693) of the caller's token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_exchange: Option<TokenExchangeAuth>,
}

/// `auth.tokenExchange` of an HTTP `Server`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenExchangeAuth {
    /// The authorization server's token endpoint (`https://`, `http://` only on loopback).
    pub endpoint: String,
    /// The proxy's client id there.
    pub client_id: String,
    /// Its client secret: `${env:VAR}`, resolved by the proxy only (never stored).
    pub client_secret: String,
    /// The `audience` asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// The `scope` asked for (space-separated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The `resource` asked for (RFC 8707).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
}

impl ServerAuth {
    /// The problems of the section, the first found, naming its field
    /// (`auth.tokenExchange.endpoint`).
    pub fn check(&self) -> Result<(), String> {
        let Some(exchange) = &self.token_exchange else {
            return Err(
                "`auth` needs `tokenExchange` (static credentials go in `headers`)".to_owned(),
            );
        };
        let field = "auth.tokenExchange";
        if !is_http_url(&exchange.endpoint) {
            return Err(format!(
                "`{field}.endpoint` `{}` is not an absolute http(s):// URL",
                exchange.endpoint
            ));
        }
        if !exchange.endpoint.starts_with("https://") && !is_loopback_url(&exchange.endpoint) {
            return Err(format!(
                "`{field}.endpoint` `{}` must be https:// (http:// only on loopback: the exchange carries a client secret and the caller's token)",
                exchange.endpoint
            ));
        }
        if exchange.client_id.trim().is_empty() {
            return Err(format!("`{field}.clientId` is empty"));
        }
        let secret = exchange.client_secret.trim();
        let names: Vec<&str> = mcp_middleware::upstream::env_references(secret).collect();
        if !(secret.starts_with("${env:") && secret.ends_with('}') && names.len() == 1)
            || names[0].is_empty()
        {
            return Err(format!(
                "`{field}.clientSecret` must be one `${{env:VAR}}` reference (the secret stays in the proxy's environment, never in the store)"
            ));
        }
        for (name, value) in [
            ("audience", &exchange.audience),
            ("scope", &exchange.scope),
            ("resource", &exchange.resource),
        ] {
            if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
                return Err(format!("`{field}.{name}` is empty (leave it out instead)"));
            }
        }
        if let Some(resource) = &exchange.resource
            && !is_http_url(resource)
        {
            return Err(format!(
                "`{field}.resource` `{resource}` is not an absolute http(s):// URL without a fragment"
            ));
        }
        Ok(())
    }
}

/// Whether an `http://` URL's host is loopback (`localhost`, `127.x`, `[::1]`).
fn is_loopback_url(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("http://") else {
        return false;
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let host = match authority.rsplit_once(':') {
        Some((host, port)) if port.parse::<u16>().is_ok() => host,
        _ => authority,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A file path in the project: absolute, since `mcpctl serve` may run from anywhere.
fn absolute(field: &str, path: &str) -> Result<(), String> {
    if std::path::Path::new(path).is_absolute() {
        Ok(())
    } else {
        Err(format!(
            "`{field}` `{path}` must be an absolute path (the project is served from any directory)"
        ))
    }
}

fn is_http_url(url: &str) -> bool {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    rest.is_some_and(|rest| {
        let authority = rest.split('/').next().unwrap_or_default();
        !authority.is_empty() && !authority.contains('@') && !url.contains('#')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<(), String> {
        let auth: ProjectAuth = yaml_serde::from_str(yaml).map_err(|e| e.to_string())?;
        auth.check()
    }

    #[test]
    fn errors_name_their_field() {
        assert!(parse("jwt: {issuer: 'https://idp.example'}").is_ok());
        assert!(parse("jwt: {issuer: 'http://127.0.0.1:9000'}").is_ok());
        for (yaml, field) in [
            ("jwt: {issuer: 'http://idp.example'}", "auth.jwt.issuer"),
            (
                "jwt: {issuer: 'https://i', jwksUri: 'http://x.example/k'}",
                "auth.jwt.jwksUri",
            ),
            (
                "jwt: {issuer: 'https://i', keyFile: /k, secretFile: /s}",
                "auth.jwt",
            ),
            (
                "jwt: {issuer: 'https://i', keyFile: k.pem}",
                "auth.jwt.keyFile",
            ),
            (
                "jwt: {issuer: 'https://i', leeway: 99999}",
                "auth.jwt.leeway",
            ),
            ("tokens: tokens.txt", "auth.tokens"),
            ("oauth: {scopes: [a]}", "auth"),
            (
                "tokens: /t\noauth: {authorizationServers: ['https://a'], resource: 'mcp'}",
                "auth.oauth.resource",
            ),
            (
                "jwt: {issuer: 'https://i'}\noauth: {scopes: ['a b']}",
                "auth.oauth.scopes[0]",
            ),
            (
                "jwt: {issuer: 'https://i'}\noauth: {authorizationServers: ['http://x.example']}",
                "auth.oauth.authorizationServers[0]",
            ),
        ] {
            let err = parse(yaml).unwrap_err();
            assert!(err.contains(&format!("`{field}")), "{yaml}: {err}");
        }
        let unknown = parse("jwt: {issuer: 'https://i', audiences: [x]}").unwrap_err();
        assert!(unknown.contains("audiences"), "{unknown}");
    }

    #[test]
    fn authorization_servers_default_to_the_issuer() {
        let auth: ProjectAuth =
            yaml_serde::from_str("jwt: {issuer: 'https://idp'}\noauth: {scopes: [s]}").unwrap();
        assert_eq!(auth.authorization_servers(), ["https://idp"]);
        assert!(auth.publishes_resource());
    }

    fn exchange(yaml: &str) -> Result<(), String> {
        let auth: ServerAuth = yaml_serde::from_str(yaml).map_err(|e| e.to_string())?;
        auth.check()
    }

    #[test]
    fn token_exchange_errors_name_their_field() {
        let good = "endpoint: 'https://login.example/token', clientId: p, clientSecret: '${env:S}'";
        assert!(exchange(&format!("tokenExchange: {{{good}}}")).is_ok());
        assert!(
            exchange("tokenExchange: {endpoint: 'http://127.0.0.1:9/t', clientId: p, clientSecret: '${env:S}', audience: a, scope: 'x y', resource: 'https://r'}").is_ok()
        );
        for (yaml, field) in [
            ("{}", "auth"),
            (
                "tokenExchange: {endpoint: 'http://login.example/t', clientId: p, clientSecret: '${env:S}'}",
                "auth.tokenExchange.endpoint",
            ),
            (
                "tokenExchange: {endpoint: 'token', clientId: p, clientSecret: '${env:S}'}",
                "auth.tokenExchange.endpoint",
            ),
            (
                "tokenExchange: {endpoint: 'https://l/t', clientId: ' ', clientSecret: '${env:S}'}",
                "auth.tokenExchange.clientId",
            ),
            (
                "tokenExchange: {endpoint: 'https://l/t', clientId: p, clientSecret: hunter2}",
                "auth.tokenExchange.clientSecret",
            ),
            (
                "tokenExchange: {endpoint: 'https://l/t', clientId: p, clientSecret: 'x${env:S}'}",
                "auth.tokenExchange.clientSecret",
            ),
            (
                "tokenExchange: {endpoint: 'https://l/t', clientId: p, clientSecret: '${env:S}', scope: ''}",
                "auth.tokenExchange.scope",
            ),
            (
                "tokenExchange: {endpoint: 'https://l/t', clientId: p, clientSecret: '${env:S}', resource: r}",
                "auth.tokenExchange.resource",
            ),
        ] {
            let err = exchange(yaml).unwrap_err();
            assert!(err.contains(&format!("`{field}")), "{yaml}: {err}");
            assert!(!err.contains("hunter2"), "{err}");
        }
        let unknown = exchange(&format!("tokenExchange: {{{good}, client_id: q}}")).unwrap_err();
        assert!(unknown.contains("client_id"), "{unknown}");
    }
}
