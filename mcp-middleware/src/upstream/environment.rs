//! Which of the proxy's environment variables a stdio child gets: the policy a
//! [`StdioServer`](super::StdioServer) is started with.
//!
//! The proxy's environment holds its own secrets (an audit key, credentials for other
//! servers), so a child is given only what its policy lets through:
//!
//! - [`EnvPolicy::sdk_default`] (the default): the variables the official MCP SDKs pass to a
//!   stdio server ([`DEFAULT_INHERITED`]: `HOME`, `LOGNAME`, `PATH`, `SHELL`, `TERM`, `USER`,
//!   skipping a value that starts with `()`, a shell function), plus the names added with
//!   [`EnvPolicy::allow`].
//! - [`EnvPolicy::inherit_all`]: the proxy's whole environment (`mcpctl proxy -- CMD`, where the
//!   client's configuration puts the server's variables on the proxy's entry).
//!
//! Whichever it is, a variable named with [`EnvPolicy::deny`] never reaches the child: not
//! inherited, not declared with [`StdioServer::env`](super::StdioServer::env) and not copied
//! into a declared variable through `${env:VAR}` (the server then fails to start, naming the
//! variable, never its value). The variables a server declares itself are always set.

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};

/// The variables the official MCP SDKs let a stdio server inherit on Unix (the TypeScript SDK's
/// `DEFAULT_INHERITED_ENV_VARS`, used by `getDefaultEnvironment`; the Python SDK's list is the
/// same).
pub const DEFAULT_INHERITED: [&str; 6] = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// Which of the proxy's environment variables a stdio child inherits, and which it never gets.
///
/// ```
/// use mcp_middleware::upstream::EnvPolicy;
///
/// let policy = EnvPolicy::sdk_default().allow("LANG").deny("AUDIT_KEY");
/// assert!(policy.inherits("PATH") && policy.inherits("LANG"));
/// assert!(!policy.inherits("AWS_SECRET_ACCESS_KEY"));
/// assert!(policy.denies("AUDIT_KEY"));
///
/// let ad_hoc = EnvPolicy::inherit_all().deny("AUDIT_KEY");
/// assert!(ad_hoc.inherits("ANYTHING") && !ad_hoc.inherits("AUDIT_KEY"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvPolicy {
    /// `None`: everything; `Some(names)`: only these.
    inherit: Option<BTreeSet<OsString>>,
    deny: BTreeSet<OsString>,
}

impl Default for EnvPolicy {
    fn default() -> Self {
        Self::sdk_default()
    }
}

impl EnvPolicy {
    /// Only [`DEFAULT_INHERITED`] (and what [`allow`](Self::allow) adds) is inherited.
    pub fn sdk_default() -> Self {
        Self {
            inherit: Some(DEFAULT_INHERITED.iter().map(OsString::from).collect()),
            deny: BTreeSet::new(),
        }
    }

    /// The proxy's whole environment is inherited, except what [`deny`](Self::deny) names.
    pub fn inherit_all() -> Self {
        Self {
            inherit: None,
            deny: BTreeSet::new(),
        }
    }

    /// Also inherits `name` (no effect under [`inherit_all`](Self::inherit_all)).
    pub fn allow(mut self, name: impl Into<OsString>) -> Self {
        if let Some(names) = &mut self.inherit {
            names.insert(name.into());
        }
        self
    }

    /// Never gives the child `name`, however it would get it.
    pub fn deny(mut self, name: impl Into<OsString>) -> Self {
        self.deny.insert(name.into());
        self
    }

    /// Whether `name` is never given to the child.
    pub fn denies(&self, name: impl AsRef<OsStr>) -> bool {
        self.deny.contains(name.as_ref())
    }

    /// Whether the child inherits the proxy's `name` (when it is set).
    pub fn inherits(&self, name: impl AsRef<OsStr>) -> bool {
        let name = name.as_ref();
        !self.denies(name)
            && self
                .inherit
                .as_ref()
                .is_none_or(|names| names.contains(name))
    }

    /// Whether the whole environment is inherited ([`inherit_all`](Self::inherit_all)).
    pub fn inherits_all(&self) -> bool {
        self.inherit.is_none()
    }

    /// The variables named with [`deny`](Self::deny).
    pub fn denied(&self) -> impl Iterator<Item = &OsStr> {
        self.deny.iter().map(OsString::as_os_str)
    }

    /// The proxy's variables the child inherits, from `vars` (the proxy's environment).
    pub(crate) fn inherited(
        &self,
        vars: impl Iterator<Item = (OsString, OsString)>,
    ) -> Vec<(OsString, OsString)> {
        vars.filter(|(name, value)| {
            // The SDKs skip shell functions (`BASH_FUNC_x%%=() { ...`) in the default set.
            let function = self.inherit.is_some() && value.as_encoded_bytes().starts_with(b"()");
            !function && self.inherits(name)
        })
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Iterator<Item = (OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect::<Vec<_>>()
            .into_iter()
    }

    fn names(inherited: Vec<(OsString, OsString)>) -> Vec<String> {
        inherited
            .into_iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn the_default_passes_the_sdk_set_and_allowed_names_only() {
        let env = [
            ("PATH", "/bin"),
            ("HOME", "/root"),
            ("SHELL", "() { evil; }"),
            ("AUDIT_KEY", "k"),
            ("LANG", "C"),
        ];
        let policy = EnvPolicy::default().allow("LANG");
        assert_eq!(
            names(policy.inherited(vars(&env))),
            ["PATH", "HOME", "LANG"]
        );
        let denied = EnvPolicy::sdk_default().deny("PATH");
        assert_eq!(names(denied.inherited(vars(&env))), ["HOME"]);
    }

    #[test]
    fn inherit_all_passes_everything_not_denied() {
        let env = [("PATH", "/bin"), ("AUDIT_KEY", "k"), ("F", "() x")];
        let policy = EnvPolicy::inherit_all().deny("AUDIT_KEY").allow("ignored");
        assert!(policy.inherits_all());
        assert_eq!(names(policy.inherited(vars(&env))), ["PATH", "F"]);
        assert_eq!(policy.denied().collect::<Vec<_>>(), ["AUDIT_KEY"]);
    }
}
