//! Per-caller restrictions: which callers a restricted tool, prompt or resource is for. The
//! router ([`super::Router`]) hides a restricted name from every caller this module says does
//! not match, exactly as it hides a `hidden` name from everyone.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::auth::Identity;
use crate::pattern::Pattern;

/// One `routes.restricted` entry: `names` (names or globs, compared as `hidden` compares them)
/// that only callers matching every given condition see and call. A caller matches when it
/// holds at least one of `scopes` (if given), is one of `principals` (if given, in the syntax
/// of [`Identity::principal`]) and has every `claims` value (if given). Everyone else gets
/// what `hidden` gives them.
///
/// An entry with no condition, or with an empty list of scopes or principals, matches no one
/// (the store refuses such entries at apply; the library fails closed).
///
/// ```
/// use mcp_middleware::{Identity, routing::Restriction};
///
/// let admins: Restriction = serde_json::from_str(
///     r#"{"names": ["admin-*"], "principals": ["token:alice"]}"#,
/// ).unwrap();
/// assert!(admins.admits(&Identity::Token { subject: "alice".into() }));
/// assert!(!admins.admits(&Identity::Token { subject: "bob".into() }));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Restriction {
    /// The tools, prompts and resource URIs restricted (names or globs).
    pub names: Vec<Pattern>,
    /// OAuth scopes, one of which the caller's JWT must hold (`scope`, space-separated, or
    /// `scp`, an array).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
    /// Principals (`token:alice`, `local:NAME`, `jwt:ISSUER:SUBJECT`, ...), one of which the
    /// caller must be.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principals: Option<Vec<String>>,
    /// JWT claims the caller must all have, each equal to the value given (or, for a claim
    /// that is an array, holding it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claims: Option<Map<String, Value>>,
}

impl Restriction {
    /// Restricts what `pattern` matches to the callers the conditions added next admit.
    pub fn new(pattern: impl Into<String>) -> Self {
        Self {
            names: vec![Pattern::new(pattern)],
            ..Self::default()
        }
    }

    /// Admits a caller holding `scope` (or any other scope added).
    pub fn scope(mut self, scope: impl Into<String>) -> Self {
        self.scopes.get_or_insert_with(Vec::new).push(scope.into());
        self
    }

    /// Admits the caller `principal` (or any other principal added).
    pub fn principal(mut self, principal: impl Into<String>) -> Self {
        self.principals
            .get_or_insert_with(Vec::new)
            .push(principal.into());
        self
    }

    /// Whether this entry sets no condition at all (it then admits no one).
    pub fn is_unconditional(&self) -> bool {
        self.scopes.is_none() && self.principals.is_none() && self.claims.is_none()
    }

    /// Whether `who` matches every condition given.
    pub fn admits(&self, who: &Identity) -> bool {
        if self.is_unconditional() {
            return false;
        }
        if let Some(scopes) = &self.scopes {
            let held = scopes_of(who);
            if !scopes.iter().any(|s| held.iter().any(|h| h == s)) {
                return false;
            }
        }
        if let Some(principals) = &self.principals {
            let principal = who.principal();
            if !principals.contains(&principal) {
                return false;
            }
        }
        if let Some(wanted) = &self.claims {
            let Some(claims) = who.claims() else {
                return false;
            };
            for (name, value) in wanted {
                let held = claims.get(name).is_some_and(|held| {
                    held == value || held.as_array().is_some_and(|items| items.contains(value))
                });
                if !held {
                    return false;
                }
            }
        }
        true
    }
}

/// The OAuth scopes a caller holds: a JWT's `scope` (a space-separated string) and `scp` (an
/// array of strings, or a space-separated string as some issuers write it). Other callers, and
/// claims of other shapes, hold none.
pub fn scopes_of(who: &Identity) -> Vec<&str> {
    let Some(claims) = who.claims() else {
        return Vec::new();
    };
    let mut held = Vec::new();
    if let Some(Value::String(text)) = claims.get("scope") {
        held.extend(text.split_whitespace());
    }
    match claims.get("scp") {
        Some(Value::String(text)) => held.extend(text.split_whitespace()),
        Some(Value::Array(items)) => held.extend(items.iter().filter_map(Value::as_str)),
        _ => {}
    }
    held
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn jwt(claims: Value) -> Identity {
        let Value::Object(claims) = claims else {
            unreachable!("test claims are an object")
        };
        Identity::Jwt {
            subject: "carol".into(),
            issuer: Some("https://issuer.example".into()),
            claims,
        }
    }

    fn entry(text: &str) -> Restriction {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn scopes_from_scope_or_scp() {
        let rule = entry(r#"{"names":["x"],"scopes":["tools:admin","other"]}"#);
        assert!(rule.admits(&jwt(json!({"scope": "read tools:admin"}))));
        assert!(rule.admits(&jwt(json!({"scp": ["tools:admin"]}))));
        assert!(rule.admits(&jwt(json!({"scp": "a other"}))));
        assert!(!rule.admits(&jwt(json!({"scope": "read tools:admins"}))));
        assert!(!rule.admits(&jwt(json!({"scope": ["tools:admin"], "scp": 3}))));
        assert!(!rule.admits(&jwt(json!({}))));
        assert!(!rule.admits(&Identity::Token {
            subject: "tools:admin".into()
        }));
        assert!(!rule.admits(&Identity::Anonymous));
    }

    #[test]
    fn principals_in_principal_syntax() {
        let rule = entry(r#"{"names":["x"],"principals":["token:alice","local:ops"]}"#);
        assert!(rule.admits(&Identity::Token {
            subject: "alice".into()
        }));
        assert!(rule.admits(&Identity::LocalUser { name: "ops".into() }));
        assert!(!rule.admits(&Identity::Token {
            subject: "bob".into()
        }));
        assert!(!rule.admits(&Identity::Token {
            subject: "Alice".into()
        }));
        assert!(!rule.admits(&Identity::LocalUser {
            name: "alice".into()
        }));
        assert!(!rule.admits(&Identity::Anonymous));
        let by_jwt =
            entry(r#"{"names":["x"],"principals":["jwt:https%3A%2F%2Fissuer.example:carol"]}"#);
        assert!(by_jwt.admits(&jwt(json!({}))));
    }

    #[test]
    fn claims_all_required() {
        let rule = entry(r#"{"names":["x"],"claims":{"team":"ops","level":3}}"#);
        assert!(rule.admits(&jwt(json!({"team": "ops", "level": 3}))));
        assert!(rule.admits(&jwt(json!({"team": ["dev", "ops"], "level": 3}))));
        assert!(!rule.admits(&jwt(json!({"team": "ops"}))));
        assert!(!rule.admits(&jwt(json!({"team": "ops", "level": "3"}))));
        assert!(!rule.admits(&Identity::Token {
            subject: "ops".into()
        }));
    }

    #[test]
    fn every_condition_given_must_hold() {
        let rule = entry(
            r#"{"names":["x"],"scopes":["admin"],"principals":["jwt:https%3A%2F%2Fissuer.example:carol"],"claims":{"team":"ops"}}"#,
        );
        assert!(rule.admits(&jwt(json!({"scope": "admin", "team": "ops"}))));
        assert!(!rule.admits(&jwt(json!({"scope": "admin"}))));
        assert!(!rule.admits(&jwt(json!({"team": "ops"}))));
    }

    #[test]
    fn no_condition_or_empty_lists_admit_no_one() {
        let alice = Identity::Token {
            subject: "alice".into(),
        };
        assert!(!entry(r#"{"names":["x"]}"#).admits(&alice));
        assert!(!entry(r#"{"names":["x"],"principals":[]}"#).admits(&alice));
        assert!(!entry(r#"{"names":["x"],"scopes":[]}"#).admits(&jwt(json!({"scope": "a"}))));
        assert!(serde_json::from_str::<Restriction>(r#"{"names":["x"],"user":"a"}"#).is_err());
    }
}
