//! `kind: Server`: an MCP server the proxy starts as a child process (stdio) or reaches by URL.
//!
//! ```yaml
//! kind: Server
//! metadata: { name: github }
//! spec:
//!   command: npx                     # stdio: command, args, env, cwd
//!   args: [-y, "@modelcontextprotocol/server-github"]
//!   env:
//!     GITHUB_TOKEN: ${env:GITHUB_TOKEN}   # kept as written; resolved only by the proxy
//!   inheritEnv: [LANG, HTTPS_PROXY]  # the proxy's variables it also gets, by name
//!   cwd: /srv/github
//! ---
//! kind: Server
//! metadata: { name: remote }
//! spec:
//!   url: https://mcp.example.com/mcp # HTTP: url and headers
//!   headers:
//!     Authorization: Bearer ${env:REMOTE_TOKEN}
//! ```
//!
//! Values are stored exactly as written: `${env:VAR}` placeholders stay placeholders in the
//! store, in `get` and in `describe`; only the proxy resolves them, when it starts
//! the server.
//!
//! A stdio server's environment is the official SDKs' default set (`HOME`, `LOGNAME`, `PATH`,
//! `SHELL`, `TERM`, `USER`), its `env`, and the proxy's variables `inheritEnv` names; nothing
//! else of the proxy's environment (see `mcp_middleware::upstream::EnvPolicy`).

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use super::auth::ServerAuth;
use super::resource::{AnyResource, Kind, Resource, Spec, checked_map};

/// How to reach a server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum ServerSpec {
    /// A child process spoken to over its stdin and stdout.
    Stdio(StdioSpec),
    /// A server spoken to over streamable HTTP.
    Http(HttpSpec),
}

/// A server run as a child process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StdioSpec {
    /// The program (looked up on `PATH`).
    pub command: String,
    /// Its arguments.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment variables set for it; values may hold `${env:VAR}` placeholders.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The proxy's own variables it inherits besides the SDK default set, by name.
    #[serde(rename = "inheritEnv", skip_serializing_if = "Vec::is_empty")]
    pub inherit_env: Vec<String>,
    /// Its working directory (the proxy's when absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

/// A server reached over HTTP.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HttpSpec {
    /// Its MCP endpoint.
    pub url: String,
    /// Headers sent with every request; values may hold `${env:VAR}` placeholders.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// How the proxy authenticates to it per caller (token exchange).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<ServerAuth>,
}

impl ServerSpec {
    /// A stdio server running `command`.
    pub fn stdio(command: impl Into<String>) -> Self {
        ServerSpec::Stdio(StdioSpec {
            command: command.into(),
            args: Vec::new(),
            env: BTreeMap::new(),
            inherit_env: Vec::new(),
            cwd: None,
        })
    }

    /// `stdio` or `http`.
    pub fn transport(&self) -> &'static str {
        match self {
            ServerSpec::Stdio(_) => "stdio",
            ServerSpec::Http(_) => "http",
        }
    }

    /// The command line or the URL, for listings.
    pub fn target(&self) -> String {
        match self {
            ServerSpec::Stdio(stdio) => std::iter::once(stdio.command.as_str())
                .chain(stdio.args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            ServerSpec::Http(http) => http.url.clone(),
        }
    }
}

impl Spec for ServerSpec {
    const KIND: Kind = Kind::Server;

    fn wrap(resource: Resource<Self>) -> AnyResource {
        AnyResource::Server(resource)
    }

    fn from_any(any: AnyResource) -> Option<Resource<Self>> {
        match any {
            AnyResource::Server(resource) => Some(resource),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for ServerSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        checked_map::<D, RawServerSpec, Self>(deserializer)
    }
}

/// Every field either transport may have; which ones are set decides the transport.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServerSpec {
    command: Option<String>,
    #[serde(default)]
    args: Option<Vec<String>>,
    #[serde(default)]
    env: Option<BTreeMap<String, String>>,
    #[serde(default, rename = "inheritEnv")]
    inherit_env: Option<Vec<String>>,
    cwd: Option<String>,
    url: Option<String>,
    #[serde(default)]
    headers: Option<BTreeMap<String, String>>,
    #[serde(default)]
    auth: Option<ServerAuth>,
}

impl TryFrom<RawServerSpec> for ServerSpec {
    type Error = String;

    fn try_from(raw: RawServerSpec) -> Result<Self, String> {
        match (raw.command, raw.url) {
            (Some(_), Some(_)) => {
                Err("a server has either `command` (stdio) or `url` (HTTP), not both".to_owned())
            }
            (None, None) => Err("a server needs `command` (stdio) or `url` (HTTP)".to_owned()),
            (Some(command), None) => {
                if raw.auth.is_some() {
                    return Err("`auth` is for HTTP servers (`url`)".to_owned());
                }
                if raw.headers.is_some() {
                    return Err(
                        "`headers` is for HTTP servers (`url`); a stdio server takes `env`"
                            .to_owned(),
                    );
                }
                if command.trim().is_empty() {
                    return Err("`command` is empty".to_owned());
                }
                let env = raw.env.unwrap_or_default();
                if let Some(bad) = env.keys().find(|k| k.is_empty() || k.contains(['=', '\0'])) {
                    return Err(format!(
                        "`env` key `{bad}` is not a valid environment variable name"
                    ));
                }
                let inherit_env = raw.inherit_env.unwrap_or_default();
                for (i, name) in inherit_env.iter().enumerate() {
                    if !valid_variable_name(name) {
                        return Err(format!(
                            "`inheritEnv` entry `{name}` is not an environment variable name (letters, digits and `_`, not starting with a digit)"
                        ));
                    }
                    if inherit_env[..i].contains(name) {
                        return Err(format!("`inheritEnv` names `{name}` twice"));
                    }
                }
                Ok(ServerSpec::Stdio(StdioSpec {
                    command,
                    args: raw.args.unwrap_or_default(),
                    env,
                    inherit_env,
                    cwd: raw.cwd,
                }))
            }
            (None, Some(url)) => {
                if let Some(field) = [
                    raw.args.is_some().then_some("args"),
                    raw.env.is_some().then_some("env"),
                    raw.inherit_env.is_some().then_some("inheritEnv"),
                    raw.cwd.is_some().then_some("cwd"),
                ]
                .into_iter()
                .flatten()
                .next()
                {
                    return Err(format!(
                        "`{field}` is for stdio servers (`command`); an HTTP server takes `headers`"
                    ));
                }
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(format!("`url` `{url}` is not an http:// or https:// URL"));
                }
                let headers = raw.headers.unwrap_or_default();
                if let Some(auth) = &raw.auth {
                    auth.check()?;
                    if headers
                        .keys()
                        .any(|h| h.eq_ignore_ascii_case("authorization"))
                    {
                        return Err("`headers.Authorization` and `auth.tokenExchange` both set the upstream's `Authorization`: keep one".to_owned());
                    }
                }
                Ok(ServerSpec::Http(HttpSpec {
                    url,
                    headers,
                    auth: raw.auth,
                }))
            }
        }
    }
}

/// A portable environment variable name (POSIX: letters, digits and `_`, not starting with a
/// digit): what `inheritEnv` may name.
fn valid_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
