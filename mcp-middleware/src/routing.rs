//! Routing paths (SPEC P7): which tools, prompts and resources the client never sees (*hidden*),
//! which go straight to the server past every model (*pass-through*), and which run through the
//! model chain (everything else).
//!
//! ```
//! use mcp_middleware::{Proxy, routing::Routes, upstream::StdioServer};
//!
//! let routes = Routes::new().hide("admin-*").hide("file:///etc/*").pass_through("echo");
//! let proxy = Proxy::new(StdioServer::new("my-server")).routes(routes);
//! # let _ = proxy;
//! ```
//!
//! **What a pattern matches.** An exact name or a glob ([`Pattern`]), matched against tool and
//! prompt names and resource URIs (resource templates by their `uriTemplate`). In front of
//! several servers ([`ServerSet`](crate::upstream::ServerSet)) a pattern matches the name the
//! client sees (`server__tool`) or the server's own name for it (`tool`), so `delete_*` hides
//! `github__delete_repo` and `files__delete_file` alike.
//!
//! **Hidden** beats pass-through, and errs on the side of hiding: the name a client sends is
//! compared without surrounding whitespace or control characters and without regard to case
//! (`" Admin-Reset\n"` is `admin-reset`), and when a request names its tool twice (a JSON object
//! with a duplicate key) every name must pass. A hidden entry is removed from `tools/list`
//! (`prompts/list`, `resources/list`, `resources/templates/list`) twice: from the upstream's
//! answer before any model sees it, and from the final answer after the models ran, so no model
//! sees it and none can add it back. A request for it (`tools/call`, `prompts/get`,
//! `resources/read`, `resources/subscribe`, `resources/unsubscribe`, a completion for a hidden
//! prompt or resource) is answered by the session with `-32602` before the chain runs:
//! observers record it as `rejected`, and nothing reaches the upstream. A hook's own call to a
//! hidden tool (`ctx.upstream()`) is refused the same way.
//!
//! **Pass-through** names are compared exactly as written. A request for one takes the raw
//! forwarding path, as if no model were loaded (observers still see it). Its `tools/list` entry
//! is the upstream's: when a model changes, drops or invents an entry of that name, the final
//! listing has the upstream's entry instead (where the model left it, or at the end).
//!
//! **Where it runs.** The routes live in the [`Chain`](crate::chain::Chain), which every session
//! shares. The session consults them for the request methods above before it decides between
//! the raw path and the chain; list requests go through a chain task when something is hidden,
//! so their answers can be filtered; `Context::upstream_raw` filters what hooks receive. With
//! no routes configured none of this runs: nothing is parsed that was not parsed before.

use std::fmt;

use rmcp::model::{ErrorCode, ErrorData};
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::jsonrpc;
use crate::pattern::Pattern;
use crate::upstream::Upstream;

/// The routing paths of a proxy: names (or globs) of tools, prompts and resource URIs that are
/// hidden, and those that pass through past the models.
///
/// ```
/// use mcp_middleware::routing::Routes;
///
/// let routes = Routes::new().hide("admin-*").pass_through("echo");
/// assert_eq!(routes.hidden[0].as_str(), "admin-*");
/// assert!(!routes.is_empty());
/// let yaml_like: Routes = serde_json::from_str(r#"{"passThrough": ["echo"]}"#).unwrap();
/// assert_eq!(yaml_like.pass_through[0].as_str(), "echo");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Routes {
    /// What the client never sees and cannot call or read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hidden: Vec<Pattern>,
    /// What goes straight to the server, past every model but observers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pass_through: Vec<Pattern>,
}

impl Routes {
    /// No routes: everything runs through the model chain.
    pub fn new() -> Self {
        Self::default()
    }

    /// Hides what `pattern` matches.
    pub fn hide(mut self, pattern: impl Into<String>) -> Self {
        self.hidden.push(Pattern::new(pattern));
        self
    }

    /// Lets what `pattern` matches pass through past the models.
    pub fn pass_through(mut self, pattern: impl Into<String>) -> Self {
        self.pass_through.push(Pattern::new(pattern));
        self
    }

    /// Whether no route is set.
    pub fn is_empty(&self) -> bool {
        self.hidden.is_empty() && self.pass_through.is_empty()
    }
}

/// How the session handles one client request.
#[derive(Debug)]
pub(crate) enum Route {
    /// As without routes: the chain if a model hooks the method, else the raw path.
    Chain,
    /// The raw path, whatever the models hook.
    PassThrough,
    /// Refused before the chain; the error to answer with.
    Hidden(ErrorData),
    /// A listing with hidden entries to remove: through a chain task, even if no model hooks
    /// the method.
    Listing,
}

/// [`Routes`] ready for matching: hidden patterns lower-cased, the upstream's namespaces known.
pub(crate) struct Router {
    hidden: Vec<Pattern>,
    pass_through: Vec<Pattern>,
    /// For several servers: their names (lower-cased) and the separator.
    namespaces: Option<(Vec<String>, String)>,
}

impl fmt::Debug for Router {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Router")
            .field("hidden", &self.hidden)
            .field("pass_through", &self.pass_through)
            .finish_non_exhaustive()
    }
}

/// The list methods, the member holding their entries, and the member of an entry that names it.
const LISTINGS: [(&str, &str, &str); 4] = [
    ("tools/list", "tools", "name"),
    ("prompts/list", "prompts", "name"),
    ("resources/list", "resources", "uri"),
    (
        "resources/templates/list",
        "resourceTemplates",
        "uriTemplate",
    ),
];

fn listing(method: &str) -> Option<(&'static str, &'static str)> {
    LISTINGS
        .iter()
        .find(|(m, _, _)| *m == method)
        .map(|(_, member, key)| (*member, *key))
}

/// What a request method is about: the params member that names it, and its kind (for errors).
fn subject(method: &str) -> Option<(&'static str, &'static str)> {
    match method {
        "tools/call" => Some(("name", "tool")),
        "prompts/get" => Some(("name", "prompt")),
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
            Some(("uri", "resource"))
        }
        _ => None,
    }
}

impl Router {
    /// `None` when `routes` is empty: routing then costs nothing.
    pub(crate) fn new(routes: &Routes, upstream: &Upstream) -> Option<Self> {
        if routes.is_empty() {
            return None;
        }
        let namespaces = match upstream {
            Upstream::Set(set) => Some((
                set.names().iter().map(|name| name.to_lowercase()).collect(),
                set.namespace_separator().to_lowercase(),
            )),
            _ => None,
        };
        Some(Self {
            hidden: routes
                .hidden
                .iter()
                .map(|p| Pattern::new(p.as_str().to_lowercase()))
                .collect(),
            pass_through: routes.pass_through.clone(),
            namespaces,
        })
    }

    /// Whether listings must be filtered.
    fn hides(&self) -> bool {
        !self.hidden.is_empty()
    }

    /// Whether `name` (a tool or prompt name, or a URI) is hidden, under any spelling.
    fn is_hidden(&self, name: &str) -> bool {
        if self.hidden.is_empty() {
            return false;
        }
        let name = normalize(name);
        let hidden = |candidate: &str| self.hidden.iter().any(|p| p.matches(candidate));
        if hidden(&name) {
            return true;
        }
        // `server__ Tool` reaches the server as ` Tool`: compare `tool` and `server__tool`.
        self.namespaces.iter().any(|(servers, separator)| {
            servers.iter().any(|server| {
                let Some(inner) = strip_prefix_ignore_case(&name, server)
                    .and_then(|rest| strip_prefix_ignore_case(rest, separator))
                else {
                    return false;
                };
                let inner = normalize(inner);
                hidden(&inner) || hidden(&format!("{server}{separator}{inner}"))
            })
        })
    }

    /// Whether `name` passes through (and is not hidden).
    fn passes_through(&self, name: &str) -> bool {
        if self.pass_through.is_empty() || self.is_hidden(name) {
            return false;
        }
        self.pass_through.iter().any(|p| p.matches(name))
            || self
                .inner_names(name)
                .any(|inner| self.pass_through.iter().any(|p| p.matches(inner)))
    }

    /// For several servers: `name` without each server prefix it starts with.
    fn inner_names<'n>(&'n self, name: &'n str) -> impl Iterator<Item = &'n str> + 'n {
        self.namespaces
            .iter()
            .flat_map(move |(servers, separator)| {
                servers.iter().filter_map(move |server| {
                    let rest = strip_prefix_ignore_case(name, server)?;
                    strip_prefix_ignore_case(rest, separator)
                })
            })
    }

    /// How the session handles a client request for `method`.
    pub(crate) fn route(&self, method: &str, params: Option<&str>) -> Route {
        if listing(method).is_some() {
            return if self.hides() {
                Route::Listing
            } else {
                Route::Chain
            };
        }
        let names = match self.names_in(method, params) {
            Some(names) if !names.is_empty() => names,
            _ => return Route::Chain,
        };
        if let Some(error) = self.refusal(method, &names) {
            return Route::Hidden(error);
        }
        if subject(method).is_some() && names.iter().all(|(name, _)| self.passes_through(name)) {
            return Route::PassThrough;
        }
        Route::Chain
    }

    /// The error for a request that names something hidden, if it does: what a hook's own
    /// upstream request is checked with too.
    pub(crate) fn check(&self, method: &str, params: Option<&str>) -> Result<(), ErrorData> {
        if !self.hides() {
            return Ok(());
        }
        match self.names_in(method, params) {
            Some(names) => self.refusal(method, &names).map_or(Ok(()), Err),
            None => Ok(()),
        }
    }

    fn refusal(&self, method: &str, names: &[(String, &'static str)]) -> Option<ErrorData> {
        let (name, kind) = names.iter().find(|(name, _)| self.is_hidden(name))?;
        Some(ErrorData::new(
            ErrorCode(jsonrpc::INVALID_PARAMS as i32),
            format!(
                "unknown {kind} `{name}`: it is hidden by this proxy's routes (`{method}` was not sent to the server)"
            ),
            None,
        ))
    }

    /// The names a request is about, with their kinds; `None` for methods routes ignore.
    fn names_in(&self, method: &str, params: Option<&str>) -> Option<Vec<(String, &'static str)>> {
        if let Some((key, kind)) = subject(method) {
            let values = values_of(params?, key)?;
            return Some(
                values
                    .into_iter()
                    .filter_map(|v| match v {
                        Value::String(name) => Some((name, kind)),
                        _ => None,
                    })
                    .collect(),
            );
        }
        if method == "completion/complete" {
            let params: Map<String, Value> = serde_json::from_str(params?).ok()?;
            let reference = params.get("ref")?;
            let named = |key: &str, kind| {
                reference
                    .get(key)
                    .and_then(Value::as_str)
                    .map(|name| (name.to_owned(), kind))
            };
            return Some(
                named("name", "prompt")
                    .into_iter()
                    .chain(named("uri", "resource"))
                    .collect(),
            );
        }
        None
    }

    /// Whether `method` is a listing: its answers pass [`Router::filter_upstream_listing`] on
    /// the way to the models and [`Router::finish_listing`] on the way to the client.
    pub(crate) fn is_listing(&self, method: &str) -> bool {
        listing(method).is_some()
    }

    /// The upstream's answer to a listing, on its way to a hook: hidden entries removed. Also
    /// returns the upstream's pass-through entries, which the final answer keeps as they are.
    pub(crate) fn filter_upstream_listing(
        &self,
        method: &str,
        raw: String,
    ) -> (String, Option<Vec<Value>>) {
        let Some((member, key)) = listing(method) else {
            return (raw, None);
        };
        let Ok(mut result) = serde_json::from_str::<Map<String, Value>>(&raw) else {
            return (raw, None);
        };
        let Some(Value::Array(entries)) = result.get_mut(member) else {
            return (raw, None);
        };
        let before = entries.len();
        entries.retain(|entry| !self.is_hidden(name_of(entry, key)));
        let kept: Vec<Value> = if self.pass_through.is_empty() {
            Vec::new()
        } else {
            entries
                .iter()
                .filter(|entry| self.passes_through(name_of(entry, key)))
                .cloned()
                .collect()
        };
        let raw = if entries.len() == before {
            raw
        } else {
            serde_json::to_string(&result).unwrap_or(raw)
        };
        (raw, Some(kept))
    }

    /// The final answer to a listing, after the models: hidden entries removed (a model may
    /// have added one), pass-through entries the upstream's own (`upstream`: what it listed in
    /// this request, `None` if it was not asked).
    pub(crate) fn finish_listing(
        &self,
        method: &str,
        raw: String,
        upstream: Option<Vec<Value>>,
    ) -> String {
        let Some((member, key)) = listing(method) else {
            return raw;
        };
        let Ok(mut result) = serde_json::from_str::<Map<String, Value>>(&raw) else {
            return raw;
        };
        let Some(Value::Array(entries)) = result.get_mut(member) else {
            return raw;
        };
        let mut changed = false;
        let mut upstream =
            upstream.map(|entries| entries.into_iter().map(Some).collect::<Vec<_>>());
        let mut out = Vec::with_capacity(entries.len());
        for entry in entries.drain(..) {
            let name = name_of(&entry, key);
            if self.is_hidden(name) {
                changed = true;
                continue;
            }
            let original = match &mut upstream {
                Some(listed) if self.passes_through(name) => Some(
                    listed
                        .iter_mut()
                        .find(|e| e.as_ref().is_some_and(|e| name_of(e, key) == name))
                        .and_then(Option::take),
                ),
                _ => None,
            };
            match original {
                None => out.push(entry),
                Some(Some(original)) => {
                    changed |= original != entry;
                    out.push(original);
                }
                // A pass-through name the upstream did not list: a model invented it.
                Some(None) => changed = true,
            }
        }
        for missing in upstream.into_iter().flatten().flatten() {
            changed = true;
            out.push(missing);
        }
        *entries = out;
        if changed {
            serde_json::to_string(&result).unwrap_or(raw)
        } else {
            raw
        }
    }
}

fn name_of<'v>(entry: &'v Value, key: &str) -> &'v str {
    entry.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// `name` as hidden patterns compare it: without surrounding whitespace, control or invisible
/// format characters, lower-cased.
fn normalize(name: &str) -> String {
    name.trim_matches(|c: char| c.is_whitespace() || c.is_control() || is_invisible(c))
        .to_lowercase()
}

/// Zero-width and byte-order marks, which some servers strip and which no name needs.
fn is_invisible(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200F}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}' | '\u{00AD}')
}

fn strip_prefix_ignore_case<'n>(name: &'n str, prefix: &str) -> Option<&'n str> {
    let head = name.get(..prefix.len())?;
    if head.eq_ignore_ascii_case(prefix) || head.to_lowercase() == prefix {
        name.get(prefix.len()..)
    } else {
        None
    }
}

/// Every value of member `key` in the JSON object `params` (a duplicate key gives several),
/// reading nothing else into memory. `None` if `params` is not an object.
fn values_of(params: &str, key: &str) -> Option<Vec<Value>> {
    let mut deserializer = serde_json::Deserializer::from_str(params);
    KeyValues { key }.deserialize(&mut deserializer).ok()
}

struct KeyValues<'k> {
    key: &'k str,
}

impl<'de> DeserializeSeed<'de> for KeyValues<'_> {
    type Value = Vec<Value>;

    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for KeyValues<'_> {
    type Value = Vec<Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == self.key {
                found.push(map.next_value::<Value>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::{ServerSet, StdioServer};
    use serde_json::json;

    fn single(routes: Routes) -> Router {
        Router::new(&routes, &Upstream::Stdio(StdioServer::new("x"))).unwrap()
    }

    fn set(routes: Routes) -> Router {
        let set = ServerSet::new()
            .server("github", StdioServer::new("a"))
            .server("files", StdioServer::new("b"));
        Router::new(&routes, &Upstream::Set(set)).unwrap()
    }

    #[test]
    fn no_routes_no_router() {
        assert!(Router::new(&Routes::new(), &Upstream::Stdio(StdioServer::new("x"))).is_none());
    }

    #[test]
    fn hidden_names_match_under_any_spelling() {
        let router = single(Routes::new().hide("admin-*").hide("Reset"));
        for name in [
            "admin-x",
            "ADMIN-X",
            " admin-x",
            "admin-x\n",
            "\u{200B}admin-x",
            "reset",
            "RESET\t",
        ] {
            assert!(router.is_hidden(name), "{name:?}");
        }
        for name in ["admin", "xadmin-x", "resets", "re set"] {
            assert!(!router.is_hidden(name), "{name:?}");
        }
    }

    #[test]
    fn namespaced_names_match_by_their_server_name_too() {
        let router = set(Routes::new().hide("delete_*").pass_through("echo"));
        assert!(router.is_hidden("github__delete_repo"));
        assert!(router.is_hidden("GitHub__Delete_Repo"));
        assert!(router.is_hidden("files__ delete_file"));
        assert!(!router.is_hidden("github__list"));
        assert!(router.passes_through("files__echo"));
        assert!(router.passes_through("echo"));
        let exact = set(Routes::new().hide("github__*"));
        assert!(exact.is_hidden("github__anything"));
        assert!(!exact.is_hidden("files__anything"));
    }

    #[test]
    fn hidden_beats_pass_through() {
        let router = single(Routes::new().hide("echo").pass_through("e*"));
        assert!(!router.passes_through("echo"));
        assert!(router.passes_through("else"));
        let call = |name: &str| json!({"name": name}).to_string();
        assert!(matches!(
            router.route("tools/call", Some(&call("echo"))),
            Route::Hidden(_)
        ));
        assert!(matches!(
            router.route("tools/call", Some(&call("else"))),
            Route::PassThrough
        ));
        assert!(matches!(
            router.route("tools/call", Some(&call("other"))),
            Route::Chain
        ));
    }

    #[test]
    fn a_duplicate_name_member_cannot_smuggle_a_hidden_tool() {
        let router = single(Routes::new().hide("admin").pass_through("echo"));
        let params = r#"{"name":"echo","arguments":{},"name":"admin"}"#;
        assert!(matches!(
            router.route("tools/call", Some(params)),
            Route::Hidden(_)
        ));
        let escaped = r#"{"name":"adm\u0069n"}"#;
        assert!(matches!(
            router.route("tools/call", Some(escaped)),
            Route::Hidden(_)
        ));
    }

    #[test]
    fn resources_prompts_and_completions_are_routed_too() {
        let router = single(Routes::new().hide("file:///secret/*").hide("internal-*"));
        let read = json!({"uri": "file:///secret/key"}).to_string();
        assert!(matches!(
            router.route("resources/read", Some(&read)),
            Route::Hidden(_)
        ));
        assert!(matches!(
            router.route("resources/subscribe", Some(&read)),
            Route::Hidden(_)
        ));
        let prompt = json!({"name": "internal-notes"}).to_string();
        assert!(matches!(
            router.route("prompts/get", Some(&prompt)),
            Route::Hidden(_)
        ));
        let completion = json!({"ref": {"type": "ref/prompt", "name": "internal-x"}, "argument": {"name": "a", "value": ""}}).to_string();
        assert!(matches!(
            router.route("completion/complete", Some(&completion)),
            Route::Hidden(_)
        ));
        assert!(matches!(router.route("tools/list", None), Route::Listing));
        assert!(matches!(router.route("ping", None), Route::Chain));
        let Route::Hidden(error) = router.route("resources/read", Some(&read)) else {
            unreachable!()
        };
        assert_eq!(error.code.0, -32602);
        assert!(
            error.message.contains("file:///secret/key"),
            "{}",
            error.message
        );
    }

    #[test]
    fn listings_lose_hidden_entries_and_keep_the_upstreams_pass_through_entries() {
        let router = single(Routes::new().hide("admin-*").pass_through("echo"));
        let upstream = json!({"tools": [
            {"name": "admin-reset"}, {"name": "echo", "description": "upstream's"}, {"name": "t"}
        ], "x-extra": 1})
        .to_string();
        let (filtered, kept) = router.filter_upstream_listing("tools/list", upstream);
        let filtered: Value = serde_json::from_str(&filtered).unwrap();
        assert_eq!(filtered["tools"].as_array().unwrap().len(), 2);
        assert_eq!(filtered["x-extra"], 1);
        // A model rewrote echo, dropped nothing else, and added a hidden tool back.
        let from_models = json!({"tools": [
            {"name": "echo", "description": "rewritten"}, {"name": "t"}, {"name": "admin-new"}
        ]})
        .to_string();
        let last: Value =
            serde_json::from_str(&router.finish_listing("tools/list", from_models, kept.clone()))
                .unwrap();
        assert_eq!(
            last["tools"],
            json!([{"name": "echo", "description": "upstream's"}, {"name": "t"}])
        );
        // A model dropped echo: it comes back at the end.
        let dropped = json!({"tools": [{"name": "t"}]}).to_string();
        let last: Value =
            serde_json::from_str(&router.finish_listing("tools/list", dropped, kept)).unwrap();
        assert_eq!(last["tools"][1]["name"], "echo");
        // Nothing to change: the bytes stay as they were.
        let untouched = r#"{"tools" : [ {"name":"t"} ]}"#.to_owned();
        assert_eq!(
            router.finish_listing("tools/list", untouched.clone(), Some(Vec::new())),
            untouched
        );
    }
}
