//! `kind: Project`: servers, prompts and a proxy model, served together as one MCP server.
//!
//! ```yaml
//! kind: Project
//! metadata: { name: demo }
//! spec:
//!   servers: [everything]          # Server names
//!   prompts: [style-guide]         # Prompt names
//!   proxyModel: gate               # default: passthrough
//!   config:                        # per model name, that model's Config
//!     gate: { promptBudgetBytes: 4096 }
//!   alwaysVisible: [echo, "get-*"] # tools (names or globs) gate shows while gated
//!   namespaceSeparator: "__"       # server__tool, when there are several servers
//!   routes:                        # routing paths: names or globs of tools,
//!     hidden: ["admin-*"]          #   prompts and resource URIs
//!     passThrough: [echo]
//!     restricted:                  #   only callers matching an entry see these:
//!       - names: ["deploy-*"]      #   one of the scopes, one of the principals,
//!         scopes: [tools:deploy]   #   every claim (each given condition must hold)
//!         principals: ["token:alice"]
//!   listen: 127.0.0.1:8080         # where `mcpctl serve` listens
//!   auth:                          # how `mcpctl serve` identifies clients (see [`super::auth`])
//!     jwt: { issuer: "https://login.example.com" }
//!   llm:                           # the OpenAI-compatible endpoint models' `ctx.llm()` uses
//!     url: http://127.0.0.1:11434/v1  #   when the client cannot sample ([`ProjectLlm`])
//!     model: llama3.2
//!     apiKey: ${env:OLLAMA_API_KEY}
//! ```
//!
//! `gated: true` (deprecated) is read as `proxyModel: default` and a warning is logged;
//! `gated: true` together with another `proxyModel` is an error.

use std::collections::BTreeMap;

use mcp_middleware::Identity;
use mcp_middleware::routing::Restriction;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::auth::ProjectAuth;
use super::resource::{AnyResource, Kind, Resource, Spec, checked_map};

/// The model a project runs when it names none.
pub const DEFAULT_PROXY_MODEL: &str = "passthrough";
/// The model `gated: true` stands for.
pub const GATED_PROXY_MODEL: &str = "default";
/// The separator between a server's name and its tool's name when it is not set.
pub const DEFAULT_NAMESPACE_SEPARATOR: &str = "__";

/// A project's fields.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectSpec {
    /// The names of its servers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<String>,
    /// The names of its prompts.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub prompts: Vec<String>,
    /// The proxy model it runs ([`DEFAULT_PROXY_MODEL`] when absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy_model: Option<String>,
    /// Model configs by model name. Configs of models outside the chain are kept (so switching
    /// `proxyModel` back and forth loses nothing) and ignored.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub config: BTreeMap<String, Value>,
    /// Tools (exact names or globs) that stay visible while a gating model is closed; merged
    /// into gate's `alwaysVisible`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub always_visible: Vec<String>,
    /// The separator in namespaced names (`server__tool`); [`DEFAULT_NAMESPACE_SEPARATOR`] when
    /// absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace_separator: Option<String>,
    /// Routing paths (hidden, pass-through), applied by `mcpctl proxy` and `serve`.
    #[serde(skip_serializing_if = "Routes::is_empty")]
    pub routes: Routes,
    /// The address `mcpctl serve` listens on, kept for when it exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    /// How `mcpctl serve` identifies clients ([`ProjectAuth`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<Box<ProjectAuth>>,
    /// The OpenAI-compatible endpoint for models' LLM calls ([`ProjectLlm`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llm: Option<Box<ProjectLlm>>,
    /// Set when the file said `gated: ...` (deprecated): what it said.
    #[serde(skip)]
    pub legacy_gated: Option<bool>,
}

/// `spec.llm`: the OpenAI-compatible endpoint (`POST {url}/chat/completions`) that models'
/// `ctx.llm()` uses when the client did not declare sampling.
///
/// The key must be written `${env:VAR}`: it is read from the proxy's environment when a request
/// is sent, so it never sits in the store or shows in `describe`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProjectLlm {
    /// The API's base URL (`https://api.openai.com/v1`) or its full chat completions URL.
    pub url: String,
    /// The model to ask for.
    pub model: String,
    /// The API key, as `${env:VAR}`; absent for an endpoint without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
}

impl ProjectLlm {
    /// The library's endpoint for it.
    pub fn endpoint(&self) -> mcp_middleware::llm::LlmEndpoint {
        let endpoint = mcp_middleware::llm::LlmEndpoint::new(&self.url, &self.model);
        match &self.api_key {
            Some(key) => endpoint.api_key(key),
            None => endpoint,
        }
    }

    /// The first reason it cannot be used, naming the field.
    fn check(&self) -> Result<(), String> {
        if let Some(key) = &self.api_key {
            let name = key
                .strip_prefix("${env:")
                .and_then(|rest| rest.strip_suffix('}'));
            if !name.is_some_and(|name| !name.is_empty() && !name.contains(['$', '{', '}'])) {
                return Err(
                    "`llm.apiKey` must be a reference to an environment variable, `${env:VAR}`: \
                     a key written in the project file would be stored and shown"
                        .to_owned(),
                );
            }
        }
        // The library says `field: why`; here the field is `llm.field`.
        self.endpoint()
            .check()
            .map_err(|why| match why.split_once(": ") {
                Some((field, why)) => format!("`llm.{field}`: {why}"),
                None => format!("`llm`: {why}"),
            })
    }
}

/// Which tools, resources and prompts skip the model chain or are hidden.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Routes {
    /// Names or globs the client never sees.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hidden: Vec<String>,
    /// Names or globs that go straight to the server, past every model but observers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pass_through: Vec<String>,
    /// Names or globs only the callers an entry admits see and call; hidden from the rest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restricted: Vec<Restriction>,
}

impl Routes {
    /// Whether no route is set.
    pub fn is_empty(&self) -> bool {
        self.hidden.is_empty() && self.pass_through.is_empty() && self.restricted.is_empty()
    }

    /// The first reason the routes cannot be applied, naming the field.
    fn check(&self) -> Result<(), String> {
        for (i, entry) in self.restricted.iter().enumerate() {
            let at = format!("`routes.restricted[{i}]`");
            if entry.names.is_empty() {
                return Err(format!(
                    "{at} has no `names`: list the tools, prompts or resources it restricts"
                ));
            }
            if let Some(empty) = entry.names.iter().find(|n| n.as_str().trim().is_empty()) {
                return Err(format!(
                    "{at}.names holds an empty name `{}`",
                    empty.as_str()
                ));
            }
            if entry.is_unconditional() {
                return Err(format!(
                    "{at} sets none of `scopes`, `principals` or `claims`, so it would admit no one: \
                     use `routes.hidden` to hide from everyone"
                ));
            }
            for (field, list) in [("scopes", &entry.scopes), ("principals", &entry.principals)] {
                if list.as_ref().is_some_and(Vec::is_empty) {
                    return Err(format!("{at}.{field} is empty, so it would admit no one"));
                }
            }
            // A scope token has no spaces (RFC 6749 3.3): one with spaces can never be held.
            if let Some(bad) = entry
                .scopes
                .iter()
                .flatten()
                .find(|s| s.is_empty() || s.chars().any(char::is_whitespace))
            {
                return Err(format!(
                    "{at}.scopes holds `{bad}`: a scope is one word, not empty"
                ));
            }
            for principal in entry.principals.iter().flatten() {
                if let Some(why) = Identity::principal_syntax_error(principal) {
                    return Err(format!("{at}.principals: {why}"));
                }
            }
            if entry.claims.as_ref().is_some_and(|c| c.is_empty()) {
                return Err(format!(
                    "{at}.claims is empty: name the claims a caller must have, or leave it out"
                ));
            }
        }
        Ok(())
    }
}

impl ProjectSpec {
    /// The proxy model it runs.
    pub fn model(&self) -> &str {
        self.proxy_model.as_deref().unwrap_or(DEFAULT_PROXY_MODEL)
    }

    /// The namespace separator.
    pub fn separator(&self) -> &str {
        self.namespace_separator
            .as_deref()
            .unwrap_or(DEFAULT_NAMESPACE_SEPARATOR)
    }
}

impl Spec for ProjectSpec {
    const KIND: Kind = Kind::Project;

    fn wrap(resource: Resource<Self>) -> AnyResource {
        AnyResource::Project(resource)
    }

    fn from_any(any: AnyResource) -> Option<Resource<Self>> {
        match any {
            AnyResource::Project(resource) => Some(resource),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for ProjectSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        checked_map::<D, RawProjectSpec, Self>(deserializer)
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawProjectSpec {
    #[serde(default)]
    servers: Vec<String>,
    #[serde(default)]
    prompts: Vec<String>,
    proxy_model: Option<String>,
    #[serde(default)]
    config: BTreeMap<String, Value>,
    #[serde(default)]
    always_visible: Vec<String>,
    namespace_separator: Option<String>,
    #[serde(default)]
    routes: Routes,
    listen: Option<String>,
    auth: Option<Box<ProjectAuth>>,
    llm: Option<Box<ProjectLlm>>,
    gated: Option<bool>,
}

impl TryFrom<RawProjectSpec> for ProjectSpec {
    type Error = String;

    fn try_from(raw: RawProjectSpec) -> Result<Self, String> {
        let proxy_model = match (raw.gated, raw.proxy_model) {
            (Some(true), Some(model)) if model != GATED_PROXY_MODEL => {
                return Err(format!(
                    "`gated: true` cannot be combined with `proxyModel: {model}`: `gated` is deprecated and means `proxyModel: {GATED_PROXY_MODEL}`, so remove `gated`"
                ));
            }
            (Some(true), _) => Some(GATED_PROXY_MODEL.to_owned()),
            (_, model) => model,
        };
        if proxy_model.as_deref() == Some("") {
            return Err("`proxyModel` is empty".to_owned());
        }
        if let Some(separator) = &raw.namespace_separator
            && (separator.is_empty() || separator.chars().any(char::is_whitespace))
        {
            return Err(format!(
                "`namespaceSeparator` `{separator}` must be non-empty and without spaces"
            ));
        }
        for (field, names) in [("servers", &raw.servers), ("prompts", &raw.prompts)] {
            if let Some(twice) = names
                .iter()
                .enumerate()
                .find_map(|(i, n)| names[..i].contains(n).then_some(n))
            {
                return Err(format!("`{field}` names `{twice}` twice"));
            }
        }
        if let Some((model, _)) = raw
            .config
            .iter()
            .find(|(_, v)| !v.is_object() && !v.is_null())
        {
            return Err(format!(
                "`config.{model}` must be a map of that model's config fields"
            ));
        }
        if let Some(auth) = &raw.auth {
            auth.check()?;
        }
        raw.routes.check()?;
        if let Some(llm) = &raw.llm {
            llm.check()?;
        }
        Ok(ProjectSpec {
            servers: raw.servers,
            prompts: raw.prompts,
            proxy_model,
            config: raw.config,
            always_visible: raw.always_visible,
            namespace_separator: raw.namespace_separator,
            routes: raw.routes,
            listen: raw.listen,
            auth: raw.auth,
            llm: raw.llm,
            legacy_gated: raw.gated,
        })
    }
}
