//! [`ProtectedResource`]: the front as an OAuth 2.1 resource server (the MCP authorization
//! spec): its protected-resource metadata (RFC 9728) at
//! `/.well-known/oauth-protected-resource` and at the path-suffixed
//! `/.well-known/oauth-protected-resource/mcp`, the `resource_metadata` every `401` points
//! to, and the scopes a token must carry (`403 insufficient_scope` otherwise).

use serde_json::{Value, json};

use crate::auth::Identity;

/// The well-known path of the metadata (RFC 9728 §3).
pub(crate) const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// What the front publishes as a protected resource, and the scopes it requires.
///
/// ```
/// use mcp_middleware::http::{HttpOptions, ProtectedResource};
///
/// let options = HttpOptions::default().protected_resource(
///     ProtectedResource::new()
///         .resource("https://mcp.example.com/mcp")
///         .authorization_server("https://login.example.com")
///         .scope("mcp:tools"),
/// );
/// assert_eq!(options.protected_resource.unwrap().scopes, ["mcp:tools"]);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProtectedResource {
    /// The resource identifier (RFC 8707). `None`: exactly `http(s)://{listen address}{path}`
    /// of the running front.
    pub resource: Option<String>,
    /// `authorization_servers`: the issuers clients get tokens from.
    pub authorization_servers: Vec<String>,
    /// `scopes_supported`, and the scopes every JWT must carry, all of them (in `scope`,
    /// space-separated, or `scp`, an array); a JWT lacking one gets `403`. Token-list and
    /// certificate identities are configured by the operator and are not asked for scopes.
    pub scopes: Vec<String>,
    /// Whether the JWT verifier's audience, when it has none, is the resource (so a token
    /// issued for another resource is refused, RFC 8707).
    pub audience_is_resource: bool,
}

impl ProtectedResource {
    /// Nothing set: the resource is the front's URL.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the resource identifier.
    pub fn resource(mut self, resource: impl Into<String>) -> Self {
        self.resource = Some(resource.into());
        self
    }

    /// Adds an authorization server.
    pub fn authorization_server(mut self, issuer: impl Into<String>) -> Self {
        self.authorization_servers.push(issuer.into());
        self
    }

    /// Adds a required scope.
    pub fn scope(mut self, scope: impl Into<String>) -> Self {
        self.scopes.push(scope.into());
        self
    }

    /// Makes the resource the JWT audience when none is set.
    pub fn audience_is_resource(mut self, yes: bool) -> Self {
        self.audience_is_resource = yes;
        self
    }
}

/// The metadata of a running front: its resource and where the metadata is.
#[derive(Debug, Clone)]
pub(crate) struct Published {
    pub(crate) resource: String,
    /// The URL of the metadata document (the path-suffixed form).
    pub(crate) metadata_url: String,
    pub(crate) document: String,
    pub(crate) scopes: Vec<String>,
}

impl Published {
    /// `config` for a front at `base` (`http(s)://host:port`) serving `path`.
    pub(crate) fn new(config: &ProtectedResource, base: &str, path: &str) -> Self {
        let resource = config
            .resource
            .clone()
            .unwrap_or_else(|| format!("{base}{path}"));
        let metadata_url = format!("{}{WELL_KNOWN}{path}", origin_of(&resource).unwrap_or(base));
        let document = json!({
            "resource": resource,
            "authorization_servers": config.authorization_servers,
            "scopes_supported": config.scopes,
            "bearer_methods_supported": ["header"],
        })
        .to_string();
        Self {
            resource,
            metadata_url,
            document,
            scopes: config.scopes.clone(),
        }
    }

    /// The required scopes `identity` lacks (none for identities that are not JWTs).
    pub(crate) fn missing_scopes(&self, identity: &Identity) -> Vec<String> {
        let Identity::Jwt { claims, .. } = identity else {
            return Vec::new();
        };
        let held: Vec<&str> = match (claims.get("scope"), claims.get("scp")) {
            (Some(Value::String(scope)), _) => scope.split(' ').filter(|s| !s.is_empty()).collect(),
            (_, Some(Value::Array(scp))) => scp.iter().filter_map(Value::as_str).collect(),
            (_, Some(Value::String(scp))) => scp.split(' ').collect(),
            _ => Vec::new(),
        };
        self.scopes
            .iter()
            .filter(|wanted| !held.contains(&wanted.as_str()))
            .cloned()
            .collect()
    }

    /// Whether `path` is where the metadata is served.
    pub(crate) fn serves(path: &str, endpoint: &str) -> bool {
        path == WELL_KNOWN || path.strip_prefix(WELL_KNOWN) == Some(endpoint)
    }
}

/// `scheme://authority` of a URL.
fn origin_of(url: &str) -> Option<&str> {
    let after = url.find("://")? + 3;
    Some(match url[after..].find('/') {
        Some(slash) => &url[..after + slash],
        None => url,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    fn jwt(claims: Value) -> Identity {
        let Value::Object(claims) = claims else {
            unreachable!()
        };
        Identity::Jwt {
            subject: "a".into(),
            issuer: None,
            claims,
        }
    }

    #[test]
    fn metadata_names_the_front() {
        let config = ProtectedResource::new()
            .authorization_server("https://idp")
            .scope("mcp");
        let published = Published::new(&config, "http://127.0.0.1:9", "/mcp");
        assert_eq!(published.resource, "http://127.0.0.1:9/mcp");
        assert_eq!(
            published.metadata_url,
            "http://127.0.0.1:9/.well-known/oauth-protected-resource/mcp"
        );
        let doc: Value = serde_json::from_str(&published.document).unwrap();
        assert_eq!(doc["authorization_servers"][0], "https://idp");
        assert_eq!(doc["bearer_methods_supported"][0], "header");
        let custom = Published::new(
            &config.clone().resource("https://mcp.example.com/mcp"),
            "http://127.0.0.1:9",
            "/mcp",
        );
        assert_eq!(
            custom.metadata_url,
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert!(Published::serves(WELL_KNOWN, "/mcp"));
        assert!(Published::serves(&format!("{WELL_KNOWN}/mcp"), "/mcp"));
        assert!(!Published::serves(&format!("{WELL_KNOWN}/x"), "/mcp"));
    }

    #[test]
    fn scopes_come_from_scope_or_scp() {
        let config = ProtectedResource::new().scope("a").scope("b");
        let published = Published::new(&config, "http://h", "/mcp");
        assert!(
            published
                .missing_scopes(&jwt(json!({"scope": "b a c"})))
                .is_empty()
        );
        assert!(
            published
                .missing_scopes(&jwt(json!({"scp": ["a", "b"]})))
                .is_empty()
        );
        assert_eq!(published.missing_scopes(&jwt(json!({"scope": "a"}))), ["b"]);
        assert_eq!(published.missing_scopes(&jwt(json!({}))), ["a", "b"]);
        assert_eq!(
            published
                .missing_scopes(&jwt(Value::Object(Map::new())))
                .len(),
            2
        );
        let token = Identity::Token {
            subject: "ci".into(),
        };
        assert!(published.missing_scopes(&token).is_empty());
    }
}
