//! Routing paths: which tools, prompts and resources the client never sees (*hidden*),
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
//! (`" Admin-Reset\n"` is `admin-reset`). A hidden entry is removed from `tools/list`
//! (`prompts/list`, `resources/list`, `resources/templates/list`) twice: from the upstream's
//! answer before any model sees it, and from the final answer after the models ran, so no model
//! sees it and none can add it back. A request for it (`tools/call`, `prompts/get`,
//! `resources/read`, `resources/subscribe`, `resources/unsubscribe`, a completion for a hidden
//! prompt or resource, a 2026-07-28 `subscriptions/listen` naming a hidden resource) is answered
//! by the session with `-32602` before the chain runs: observers record it as `rejected`, and
//! nothing reaches the upstream. A hook's own call to a hidden tool (`ctx.upstream()`) is
//! refused the same way, and a hidden resource's `notifications/resources/updated` never
//! reaches the client.
//!
//! **One reading, and it is what is forwarded.** The params of those request methods
//! are read strictly (`strict`): a duplicate key at any depth, a lone surrogate escape, an
//! invalid escape, a number outside the f64 range, params that are not an object, or a name or
//! URI that is not a string is refused with `-32602`, since two reasonable parsers (serde_json
//! keeps the last duplicate, others the first; Node's `JSON.parse` accepts `"\ud800"`) could read
//! it differently. The decision is made on the value read, and the proxy forwards that value's
//! own serialisation, spliced into the line in place of the client's params, to the chain (the
//! typed params hooks see come from it), the raw path and the several-servers merger alike. We
//! chose canonical forwarding over refusing everything that is not already canonical because
//! it keeps every unambiguous request working (whitespace, key order, escapes of ordinary
//! characters) while the upstream can only ever read what was checked. It is a documented
//! exception to the proxy's byte identity: only for those methods, and only when routes exist;
//! member order is kept, whitespace and escapes are not.
//!
//! **Resource URIs** are checked in their RFC 3986 normalised form (`uri`): dot segments
//! removed (`%2e%2e` too), unreserved percent-encodings decoded, scheme and host lower-cased;
//! the normalised URI is what is forwarded. When something is hidden, a URI that is not an
//! absolute RFC 3986/3987 URI, or that carries an encoded `/`, `\` or NUL (`%2F`, `%5C`, `%00`,
//! any case), is refused. A hidden pattern holding RFC 6570 expressions (`{id}`, `{+path}`,
//! `{/a}`, `{.x}`, `{?q}`, `{&r}`, `{;p}`, `{#f}`) hides the template's listing entry and every
//! URI the template matches (each expression matching any text, which errs on the side of
//! hiding). A listing entry is compared the same way.
//!
//! **Listings fail closed.** When something is hidden, an upstream listing that cannot be read
//! unambiguously (or whose entries member is not an array) is not passed on: the client gets
//! `-32603` saying the listing was withheld.
//!
//! **Restricted** names ([`Restriction`]) are hidden, exactly as above, from every caller an
//! entry does not admit, and from no one else: the router decides per caller, on the
//! session's [`Identity`] (the client's for its requests, the same for a hook's own upstream
//! calls and code mode's inner calls). A name several entries restrict is visible only to a
//! caller all of them admit; `hidden` wins over `restricted`. The refusal is worded as for a
//! hidden name, and any restriction makes listings strict (withheld when unreadable) and
//! their 2026-07-28 results `cacheScope: "private"`, since what they list depends on who asks.
//!
//! **Pass-through** names are compared exactly as written. A request for one takes the raw
//! forwarding path, as if no model were loaded (observers still see it). Its `tools/list` entry
//! is the upstream's: when a model changes, drops or invents an entry of that name, the final
//! listing has the upstream's entry instead (where the model left it, or at the end).
//!
//! **Where it runs.** The routes live in the [`Chain`](crate::chain::Chain), which every session
//! shares, and run as its built-in outermost and innermost steps (`chain/routes.rs`), the only
//! callers of `Router::decide`: the outermost step decides a client request's path before
//! the session picks between the raw path and the hooks, on stdio and HTTP, for either protocol
//! era (the 2026-07-28 bridge serves `subscriptions/listen` from the checked params), and
//! filters what the models made of a listing; the innermost step decides again on what the
//! chain sends the upstream (a hook may have rewritten it) and filters the upstream's listing
//! before the models see it. List requests go through the hooks when something is hidden, so
//! their answers can be filtered. With no routes configured none of this runs: nothing is
//! parsed that was not parsed before.

use std::fmt;

use rmcp::model::{ErrorCode, ErrorData};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::auth::Identity;
use crate::jsonrpc;
use crate::pattern::Pattern;
use crate::upstream::Upstream;

mod restrict;
mod uri;

pub use restrict::{Restriction, scopes_of};

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
    /// What only some callers see and call: to everyone else it is hidden.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restricted: Vec<Restriction>,
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

    /// Restricts what `restriction` names to the callers it admits.
    pub fn restrict(mut self, restriction: Restriction) -> Self {
        self.restricted.push(restriction);
        self
    }

    /// Whether no route is set.
    pub fn is_empty(&self) -> bool {
        self.hidden.is_empty() && self.pass_through.is_empty() && self.restricted.is_empty()
    }
}

/// How the session handles one client request.
#[derive(Debug)]
pub(crate) enum Route {
    /// As without routes: the chain if a model hooks the method, else the raw path.
    Chain,
    /// The raw path, whatever the models hook.
    PassThrough,
    /// Refused before the chain (it names something hidden, or cannot be read unambiguously);
    /// the error to answer with.
    Refused(ErrorData),
    /// A listing with hidden entries to remove: through a chain task, even if no model hooks
    /// the method.
    Listing,
}

/// [`Routes`] ready for matching: hidden patterns lower-cased (and their template and
/// normalised-URI forms added), the upstream's namespaces known.
pub(crate) struct Router {
    hidden: Vec<Pattern>,
    /// Each restriction with its names compiled as hidden patterns are.
    restricted: Vec<(Vec<Pattern>, Restriction)>,
    pass_through: Vec<Pattern>,
    /// For several servers: their names (lower-cased) and the separator.
    namespaces: Option<(Vec<String>, String)>,
    /// Which router this is: a number no other router of the process has, so what a model
    /// cached under one set of routes is known stale under the next (`Context::configuration`).
    version: u64,
}

impl fmt::Debug for Router {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Router")
            .field("hidden", &self.hidden)
            .field("restricted", &self.restricted)
            .field("pass_through", &self.pass_through)
            .finish_non_exhaustive()
    }
}

/// The router's decision on one client request.
#[derive(Debug)]
pub(crate) struct Decision {
    /// The path the request takes.
    pub(crate) route: Route,
    /// When the router read the params: their canonical serialisation, which is what goes on
    /// (to the chain and the upstream) instead of the client's text.
    pub(crate) params: Option<String>,
}

impl Decision {
    fn chain() -> Self {
        Self {
            route: Route::Chain,
            params: None,
        }
    }
}

/// What a name in a request names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Tool,
    Prompt,
    Resource,
}

impl Kind {
    fn noun(self) -> &'static str {
        match self {
            Self::Tool => "tool",
            Self::Prompt => "prompt",
            Self::Resource => "resource",
        }
    }
}

/// One name a request is about.
#[derive(Debug)]
struct Named {
    text: String,
    kind: Kind,
}

/// A request's params as routes read them.
struct Read {
    /// What is forwarded: the serialisation of the value that was checked.
    canonical: String,
    /// What was checked.
    names: Vec<Named>,
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

/// Whether a request for `method` names what routes decide on: its params are then read
/// strictly and forwarded canonically.
fn covers(method: &str) -> bool {
    matches!(
        method,
        "tools/call"
            | "prompts/get"
            | "resources/read"
            | "resources/subscribe"
            | "resources/unsubscribe"
            | "completion/complete"
            | "subscriptions/listen"
    )
}

/// Whether `method` is a request MCP defines (client to server, either era). A request for any
/// other method (a vendor's, an extension's) is checked by its params' `name` and `uri` when
/// routes hide something: a server set routes such requests by those members (`upstream::set`),
/// so they must not reach what is hidden either.
fn is_mcp_request(method: &str) -> bool {
    matches!(
        method,
        "initialize"
            | "ping"
            | "server/discover"
            | "logging/setLevel"
            | "tools/list"
            | "prompts/list"
            | "resources/list"
            | "resources/templates/list"
            | "tasks/get"
            | "tasks/list"
            | "tasks/result"
            | "tasks/cancel"
    ) || covers(method)
}

/// Whether a request for `method` may take the pass-through path.
fn may_pass_through(method: &str) -> bool {
    matches!(
        method,
        "tools/call"
            | "prompts/get"
            | "resources/read"
            | "resources/subscribe"
            | "resources/unsubscribe"
    )
}

fn invalid_params(message: String) -> ErrorData {
    ErrorData::new(ErrorCode(jsonrpc::INVALID_PARAMS as i32), message, None)
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
        let restricted = routes
            .restricted
            .iter()
            .map(|rule| (compile(&rule.names), rule.clone()))
            .collect();
        static VERSIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Some(Self {
            hidden: compile(&routes.hidden),
            restricted,
            pass_through: routes.pass_through.clone(),
            namespaces,
            version: VERSIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        })
    }

    /// Which router this is (see the field): never 0, which stands for no routes.
    pub(crate) fn version(&self) -> u64 {
        self.version
    }

    /// Whether listings must be filtered (for some caller).
    fn hides(&self) -> bool {
        !self.hidden.is_empty() || !self.restricted.is_empty()
    }

    /// Whether the params of a `method` request are read and checked: the methods that name
    /// tools, prompts and resources, and (when something is hidden) every method MCP does not
    /// define.
    fn checks(&self, method: &str) -> bool {
        covers(method) || (self.hides() && !is_mcp_request(method))
    }

    /// Whether `name` (a tool or prompt name, or a URI) is hidden from `who`, under any
    /// spelling: hidden for everyone, or restricted to callers `who` is not.
    fn is_hidden(&self, name: &str, who: &Identity) -> bool {
        if !self.hides() {
            return false;
        }
        let denied: Vec<&Pattern> = self
            .restricted
            .iter()
            .filter(|(_, rule)| !rule.admits(who))
            .flat_map(|(patterns, _)| patterns)
            .collect();
        if self.hidden.is_empty() && denied.is_empty() {
            return false;
        }
        let name = normalize(name);
        let hidden = |candidate: &str| {
            self.hidden.iter().any(|p| p.matches(candidate))
                || denied.iter().any(|p| p.matches(candidate))
        };
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

    /// Whether the resource `uri` (or URI template) is hidden: as written, or in its RFC 3986
    /// normalised form.
    fn is_hidden_uri(&self, uri: &str, who: &Identity) -> bool {
        self.is_hidden(uri, who)
            || uri::normalized_if_uri(uri).is_some_and(|n| self.is_hidden(&n, who))
    }

    fn is_hidden_as(&self, name: &str, kind: Kind, who: &Identity) -> bool {
        match kind {
            Kind::Resource => self.is_hidden_uri(name, who),
            Kind::Tool | Kind::Prompt => self.is_hidden(name, who),
        }
    }

    /// Whether `name` passes through (and is not hidden from `who`).
    fn passes_through(&self, name: &str, who: &Identity) -> bool {
        if self.pass_through.is_empty() || self.is_hidden(name, who) {
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

    /// How the session handles a client request for `method` from `who`, and what it
    /// forwards.
    pub(crate) fn decide(&self, method: &str, params: Option<&str>, who: &Identity) -> Decision {
        if listing(method).is_some() {
            return Decision {
                route: if self.hides() {
                    Route::Listing
                } else {
                    Route::Chain
                },
                params: None,
            };
        }
        let Some(text) = params.filter(|_| self.checks(method)) else {
            return Decision::chain();
        };
        let read = match self.read(method, text) {
            Ok(read) => read,
            Err(error) => {
                return Decision {
                    route: Route::Refused(error),
                    params: None,
                };
            }
        };
        let route = if let Some(error) = self.refusal(method, &read.names, who) {
            Route::Refused(error)
        } else if may_pass_through(method)
            && !read.names.is_empty()
            && read.names.iter().all(|n| self.passes_through(&n.text, who))
        {
            Route::PassThrough
        } else {
            Route::Chain
        };
        Decision {
            route,
            params: Some(read.canonical),
        }
    }

    /// A request the chain sends upstream, decided as a client's is ([`Router::decide`]): the
    /// error if it names something hidden or cannot be read unambiguously, else the params to
    /// send (the canonical serialisation of what was checked, `None` to send them as they are).
    /// Whether it would pass through does not matter here: it is already past the models.
    pub(crate) fn check(
        &self,
        method: &str,
        params: Option<&str>,
        who: &Identity,
    ) -> Result<Option<String>, ErrorData> {
        match self.decide(method, params, who) {
            Decision {
                route: Route::Refused(error),
                ..
            } => Err(error),
            Decision { params, .. } => Ok(params),
        }
    }

    /// The same refusal for hidden and restricted names, so a caller cannot tell which.
    fn refusal(&self, method: &str, names: &[Named], who: &Identity) -> Option<ErrorData> {
        let named = names
            .iter()
            .find(|n| self.is_hidden_as(&n.text, n.kind, who))?;
        Some(invalid_params(format!(
            "unknown {} `{}`: it is hidden by this proxy's routes (`{method}` was not sent to the server)",
            named.kind.noun(),
            named.text
        )))
    }

    /// Reads the params of a covered request strictly ([`crate::strict_json::parse`]) and collects the
    /// names they hold; resource URIs are normalised in place (when something is hidden).
    fn read(&self, method: &str, text: &str) -> Result<Read, ErrorData> {
        let value = crate::strict_json::parse(text).map_err(|err| {
            invalid_params(format!(
                "the params of `{method}` cannot be read unambiguously ({err}); this proxy's \
                 routes refuse what they cannot check, so it was not sent to the server"
            ))
        })?;
        let Value::Object(mut params) = value else {
            return Err(invalid_params(format!(
                "the params of `{method}` must be a JSON object; it was not sent to the server"
            )));
        };
        let mut names = Vec::new();
        match method {
            "tools/call" => name_member(&params, "name", Kind::Tool, method, &mut names)?,
            "prompts/get" => name_member(&params, "name", Kind::Prompt, method, &mut names)?,
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
                if let Some(slot) = params.get_mut("uri") {
                    self.checked_uri(slot, method, "uri", &mut names)?;
                }
            }
            "completion/complete" => match params.get("ref") {
                None => {}
                Some(Value::Object(reference)) => {
                    name_member(reference, "name", Kind::Prompt, method, &mut names)?;
                    // A `ref/resource` names a URI or a URI template: checked as written and
                    // normalised, forwarded as written.
                    name_member(reference, "uri", Kind::Resource, method, &mut names)?;
                }
                Some(_) => {
                    return Err(invalid_params(format!(
                        "member `ref` of `{method}` must be an object; it was not sent to the server"
                    )));
                }
            },
            "subscriptions/listen" => {
                let uris = params
                    .get_mut("notifications")
                    .map(|filter| match filter {
                        Value::Object(filter) => Ok(filter.get_mut("resourceSubscriptions")),
                        _ => Err(()),
                    })
                    .transpose()
                    .map_err(|()| {
                        invalid_params(format!(
                            "member `notifications` of `{method}` must be an object; it was not sent"
                        ))
                    })?
                    .flatten();
                match uris {
                    None => {}
                    Some(Value::Array(uris)) => {
                        for uri in uris {
                            self.checked_uri(uri, method, "resourceSubscriptions", &mut names)?;
                        }
                    }
                    Some(_) => {
                        return Err(invalid_params(format!(
                            "member `notifications.resourceSubscriptions` of `{method}` must be an \
                             array of URIs; it was not sent"
                        )));
                    }
                }
            }
            other if !is_mcp_request(other) => {
                // A vendor method's `name` may be a tool's or a prompt's: checked as both.
                if let Some(Value::String(name)) = params.get("name") {
                    for kind in [Kind::Tool, Kind::Prompt] {
                        names.push(Named {
                            text: name.clone(),
                            kind,
                        });
                    }
                }
                if let Some(slot @ Value::String(_)) = params.get_mut("uri") {
                    self.checked_uri(slot, method, "uri", &mut names)?;
                }
            }
            _ => {}
        }
        let canonical = serde_json::to_string(&params)
            .map_err(|err| ErrorData::internal_error(format!("params unwritable: {err}"), None))?;
        Ok(Read { canonical, names })
    }

    /// A resource URI in a request: refused if it cannot be checked, replaced by its
    /// normalised form (what was checked) when something is hidden.
    fn checked_uri(
        &self,
        slot: &mut Value,
        method: &str,
        member: &str,
        names: &mut Vec<Named>,
    ) -> Result<(), ErrorData> {
        let Value::String(raw) = slot else {
            return Err(invalid_params(format!(
                "member `{member}` of `{method}` must be a string URI; it was not sent to the server"
            )));
        };
        if !self.hides() {
            names.push(Named {
                text: raw.clone(),
                kind: Kind::Resource,
            });
            return Ok(());
        }
        let normalized = uri::normalize(raw).map_err(|bad| {
            invalid_params(format!(
                "resource `{raw}` is refused by this proxy's routes: {bad} (`{method}` was not \
                 sent to the server)"
            ))
        })?;
        names.push(Named {
            text: raw.clone(),
            kind: Kind::Resource,
        });
        if normalized != *raw {
            names.push(Named {
                text: normalized.clone(),
                kind: Kind::Resource,
            });
            *slot = Value::String(normalized);
        }
        Ok(())
    }

    /// Whether an upstream's `notifications/resources/updated` must not reach the client: it
    /// is about a hidden resource, or it cannot be read unambiguously.
    pub(crate) fn hides_update(&self, params: Option<&str>, who: &Identity) -> bool {
        if !self.hides() {
            return false;
        }
        let Some(text) = params else {
            return false;
        };
        match crate::strict_json::parse(text) {
            Ok(Value::Object(params)) => match params.get("uri") {
                Some(Value::String(uri)) => self.is_hidden_uri(uri, who),
                None => false,
                Some(_) => true,
            },
            _ => true,
        }
    }

    /// Whether `method` is a listing: its answers pass [`Router::filter_upstream_listing`] on
    /// the way to the models and [`Router::finish_listing`] on the way to the client.
    pub(crate) fn is_listing(&self, method: &str) -> bool {
        listing(method).is_some()
    }

    /// Whether a listing's `entry` is hidden (its name compared as `key` calls for).
    fn entry_hidden(&self, entry: &Value, key: &str, who: &Identity) -> bool {
        let name = name_of(entry, key);
        match key {
            "uri" | "uriTemplate" => self.is_hidden_uri(name, who),
            _ => self.is_hidden(name, who),
        }
    }

    /// A listing's result read strictly, and its entries. `Ok(None)`: nothing to filter (no
    /// entries member, or nothing hidden and the result unreadable: then it goes on as it is).
    /// An error when something is hidden and the result cannot be read unambiguously: the
    /// listing is withheld rather than passed on unfiltered.
    fn read_listing(
        &self,
        method: &str,
        member: &str,
        raw: &str,
    ) -> Result<Option<Map<String, Value>>, ErrorData> {
        let withheld = |why: String| {
            ErrorData::new(
                ErrorCode(jsonrpc::INTERNAL_ERROR as i32),
                format!(
                    "the answer to `{method}` cannot be read unambiguously ({why}), so this proxy \
                     cannot remove the entries its routes hide: the listing was withheld"
                ),
                None,
            )
        };
        let result = match crate::strict_json::parse(raw) {
            Ok(Value::Object(result)) => result,
            Ok(_) if self.hides() => return Err(withheld("it is not a JSON object".into())),
            Err(err) if self.hides() => return Err(withheld(err.to_string())),
            _ => return Ok(None),
        };
        match result.get(member) {
            Some(Value::Array(_)) => Ok(Some(result)),
            None => Ok(None),
            Some(_) if self.hides() => Err(withheld(format!("member `{member}` is not an array"))),
            Some(_) => Ok(None),
        }
    }

    /// The upstream's answer to a listing, on its way to a hook: hidden entries removed. Also
    /// returns the upstream's pass-through entries, which the final answer keeps as they are.
    pub(crate) fn filter_upstream_listing(
        &self,
        method: &str,
        raw: String,
        who: &Identity,
    ) -> Result<(String, Option<Vec<Value>>), ErrorData> {
        let Some((member, key)) = listing(method) else {
            return Ok((raw, None));
        };
        let Some(mut result) = self.read_listing(method, member, &raw)? else {
            return Ok((raw, None));
        };
        let Some(Value::Array(entries)) = result.get_mut(member) else {
            return Ok((raw, None));
        };
        let before = entries.len();
        entries.retain(|entry| !self.entry_hidden(entry, key, who));
        let kept: Vec<Value> = if self.pass_through.is_empty() {
            Vec::new()
        } else {
            entries
                .iter()
                .filter(|entry| self.passes_through(name_of(entry, key), who))
                .cloned()
                .collect()
        };
        let raw = if entries.len() == before {
            raw
        } else {
            write_listing(method, &result)?
        };
        Ok((raw, Some(kept)))
    }

    /// The final answer to a listing, after the models: hidden entries removed (a model may
    /// have added one), pass-through entries the upstream's own (`upstream`: what it listed in
    /// this request, `None` if it was not asked).
    pub(crate) fn finish_listing(
        &self,
        method: &str,
        raw: String,
        upstream: Option<Vec<Value>>,
        who: &Identity,
    ) -> Result<String, ErrorData> {
        let Some((member, key)) = listing(method) else {
            return Ok(raw);
        };
        let Some(mut result) = self.read_listing(method, member, &raw)? else {
            return Ok(raw);
        };
        let Some(Value::Array(entries)) = result.get_mut(member) else {
            return Ok(raw);
        };
        let mut changed = false;
        let mut upstream =
            upstream.map(|entries| entries.into_iter().map(Some).collect::<Vec<_>>());
        let mut out = Vec::with_capacity(entries.len());
        for entry in entries.drain(..) {
            if self.entry_hidden(&entry, key, who) {
                changed = true;
                continue;
            }
            let name = name_of(&entry, key);
            let original = match &mut upstream {
                Some(listed) if self.passes_through(name, who) => Some(
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
        // What a caller is shown depends on who it is: a 2026-07-28 result (it has
        // `resultType` or cache hints) must not be cached for anyone else.
        if !self.restricted.is_empty()
            && (result.contains_key("cacheScope") || result.contains_key("resultType"))
            && result.get("cacheScope") != Some(&Value::from("private"))
        {
            result.insert("cacheScope".into(), "private".into());
            changed = true;
        }
        if changed {
            write_listing(method, &result)
        } else {
            Ok(raw)
        }
    }
}

/// For the fuzz target and property tests, not an API: what `routes`, in front of one server,
/// forward upstream for a client request `method` with `params`. `Err` (the message) when the
/// request is refused, else the params that are sent (`None`: none).
///
/// ```
/// use mcp_middleware::routing::{Routes, forwarded};
///
/// let routes = Routes::new().hide("get-env");
/// assert!(forwarded(&routes, "tools/call", Some(r#"{"\ud800":0,"name":"get-env"}"#)).is_err());
/// assert_eq!(
///     forwarded(&routes, "tools/call", Some(r#"{ "name" : "echo" }"#)).unwrap().as_deref(),
///     Some(r#"{"name":"echo"}"#)
/// );
/// ```
#[doc(hidden)]
pub fn forwarded(
    routes: &Routes,
    method: &str,
    params: Option<&str>,
) -> Result<Option<String>, String> {
    let upstream = Upstream::Stdio(crate::upstream::StdioServer::new("routes"));
    let Some(router) = Router::new(routes, &upstream) else {
        return Ok(params.map(str::to_owned));
    };
    let decision = router.decide(method, params, &Identity::Anonymous);
    match decision.route {
        Route::Refused(error) => Err(error.message.into_owned()),
        _ => Ok(decision.params.or_else(|| params.map(str::to_owned))),
    }
}

/// For the fuzz target and property tests, not an API: an upstream's answer `raw` to the
/// listing `method` as the client gets it through `routes` (no model changing it), or the
/// error that withholds it.
///
/// ```
/// use mcp_middleware::routing::{Routes, listed};
///
/// let routes = Routes::new().hide("get-env");
/// let out = listed(&routes, "tools/list", r#"{"tools":[{"name":"get-env"},{"name":"echo"}]}"#);
/// assert_eq!(out.unwrap(), r#"{"tools":[{"name":"echo"}]}"#);
/// assert!(listed(&routes, "tools/list", r#"{"tools":[{"name":"get-env","name":"x"}]}"#).is_err());
/// ```
#[doc(hidden)]
pub fn listed(routes: &Routes, method: &str, raw: &str) -> Result<String, String> {
    let upstream = Upstream::Stdio(crate::upstream::StdioServer::new("routes"));
    let Some(router) = Router::new(routes, &upstream) else {
        return Ok(raw.to_owned());
    };
    let who = Identity::Anonymous;
    let (raw, kept) = router
        .filter_upstream_listing(method, raw.to_owned(), &who)
        .map_err(|e| e.message.into_owned())?;
    router
        .finish_listing(method, raw, kept, &who)
        .map_err(|e| e.message.into_owned())
}

/// Patterns as the router compares them: lower-cased, plus the glob of a URI template (it
/// hides every URI it expands to) and a URI pattern's normalised form.
fn compile(patterns: &[Pattern]) -> Vec<Pattern> {
    let mut compiled = Vec::new();
    for pattern in patterns {
        let lower = pattern.as_str().to_lowercase();
        let extra = [
            uri::template_glob(&lower),
            uri::normalized_if_uri(pattern.as_str()).map(|n| n.to_lowercase()),
        ];
        compiled.push(Pattern::new(lower));
        for extra in extra.into_iter().flatten() {
            if !compiled.iter().any(|p: &Pattern| p.as_str() == extra) {
                compiled.push(Pattern::new(extra));
            }
        }
    }
    compiled
}

fn write_listing(method: &str, result: &Map<String, Value>) -> Result<String, ErrorData> {
    serde_json::to_string(result).map_err(|err| {
        ErrorData::internal_error(format!("the filtered `{method}` answer: {err}"), None)
    })
}

/// A string member `key` of `object`, pushed onto `names`; refused when present but not a
/// string (no reading of it could be checked).
fn name_member(
    object: &Map<String, Value>,
    key: &str,
    kind: Kind,
    method: &str,
    names: &mut Vec<Named>,
) -> Result<(), ErrorData> {
    match object.get(key) {
        None => Ok(()),
        Some(Value::String(name)) => {
            names.push(Named {
                text: name.clone(),
                kind,
            });
            Ok(())
        }
        Some(_) => Err(invalid_params(format!(
            "member `{key}` of `{method}` must be a string; it was not sent to the server"
        ))),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::{ServerSet, StdioServer};
    use serde_json::json;

    const ANON: Identity = Identity::Anonymous;

    fn single(routes: Routes) -> Router {
        Router::new(&routes, &Upstream::Stdio(StdioServer::new("x"))).unwrap()
    }

    fn set(routes: Routes) -> Router {
        let set = ServerSet::new()
            .server("github", StdioServer::new("a"))
            .server("files", StdioServer::new("b"));
        Router::new(&routes, &Upstream::Set(set)).unwrap()
    }

    fn route(router: &Router, method: &str, params: Option<&str>) -> Route {
        router.decide(method, params, &ANON).route
    }

    #[test]
    fn checked_params_keep_their_numbers() {
        // Checked params are forwarded re-serialised: each number must survive that exactly,
        // and forwarding the result again must change nothing (fuzz/routing found a double
        // that moved by one unit in the last place, and an integer past u64 that kept moving).
        let router = single(Routes::new().hide("get-env"));
        let sent = |params: &str| router.decide("tools/call", Some(params), &ANON).params;
        let exact = r#"{"name":"echo","arguments":{"v":7.777776777777779e+108,"w":0.1,"n":-0.0,"i":18446744073709551615}}"#;
        assert_eq!(sent(exact).unwrap(), exact);
        let huge = format!(r#"{{"name":"echo","x":7{}1}}"#, "7".repeat(107));
        let once = sent(&huge).unwrap();
        assert_eq!(sent(&once).unwrap(), once, "not a fixed point: {once}");
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
            assert!(router.is_hidden(name, &ANON), "{name:?}");
        }
        for name in ["admin", "xadmin-x", "resets", "re set"] {
            assert!(!router.is_hidden(name, &ANON), "{name:?}");
        }
    }

    #[test]
    fn namespaced_names_match_by_their_server_name_too() {
        let router = set(Routes::new().hide("delete_*").pass_through("echo"));
        assert!(router.is_hidden("github__delete_repo", &ANON));
        assert!(router.is_hidden("GitHub__Delete_Repo", &ANON));
        assert!(router.is_hidden("files__ delete_file", &ANON));
        assert!(!router.is_hidden("github__list", &ANON));
        assert!(router.passes_through("files__echo", &ANON));
        assert!(router.passes_through("echo", &ANON));
        let exact = set(Routes::new().hide("github__*"));
        assert!(exact.is_hidden("github__anything", &ANON));
        assert!(!exact.is_hidden("files__anything", &ANON));
    }

    #[test]
    fn hidden_beats_pass_through() {
        let router = single(Routes::new().hide("echo").pass_through("e*"));
        assert!(!router.passes_through("echo", &ANON));
        assert!(router.passes_through("else", &ANON));
        let call = |name: &str| json!({"name": name}).to_string();
        assert!(matches!(
            route(&router, "tools/call", Some(&call("echo"))),
            Route::Refused(_)
        ));
        assert!(matches!(
            route(&router, "tools/call", Some(&call("else"))),
            Route::PassThrough
        ));
        assert!(matches!(
            route(&router, "tools/call", Some(&call("other"))),
            Route::Chain
        ));
    }

    #[test]
    fn a_duplicate_name_member_cannot_smuggle_a_hidden_tool() {
        let router = single(Routes::new().hide("admin").pass_through("echo"));
        let params = r#"{"name":"echo","arguments":{},"name":"admin"}"#;
        assert!(matches!(
            route(&router, "tools/call", Some(params)),
            Route::Refused(_)
        ));
        let escaped = r#"{"name":"adm\u0069n"}"#;
        assert!(matches!(
            route(&router, "tools/call", Some(escaped)),
            Route::Refused(_)
        ));
    }

    #[test]
    fn resources_prompts_and_completions_are_routed_too() {
        let router = single(Routes::new().hide("file:///secret/*").hide("internal-*"));
        let read = json!({"uri": "file:///secret/key"}).to_string();
        assert!(matches!(
            route(&router, "resources/read", Some(&read)),
            Route::Refused(_)
        ));
        assert!(matches!(
            route(&router, "resources/subscribe", Some(&read)),
            Route::Refused(_)
        ));
        let prompt = json!({"name": "internal-notes"}).to_string();
        assert!(matches!(
            route(&router, "prompts/get", Some(&prompt)),
            Route::Refused(_)
        ));
        let completion = json!({"ref": {"type": "ref/prompt", "name": "internal-x"}, "argument": {"name": "a", "value": ""}}).to_string();
        assert!(matches!(
            route(&router, "completion/complete", Some(&completion)),
            Route::Refused(_)
        ));
        assert!(matches!(route(&router, "tools/list", None), Route::Listing));
        assert!(matches!(route(&router, "ping", None), Route::Chain));
        let Route::Refused(error) = route(&router, "resources/read", Some(&read)) else {
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
        let (filtered, kept) = router
            .filter_upstream_listing("tools/list", upstream, &ANON)
            .unwrap();
        let filtered: Value = serde_json::from_str(&filtered).unwrap();
        assert_eq!(filtered["tools"].as_array().unwrap().len(), 2);
        assert_eq!(filtered["x-extra"], 1);
        // A model rewrote echo, dropped nothing else, and added a hidden tool back.
        let from_models = json!({"tools": [
            {"name": "echo", "description": "rewritten"}, {"name": "t"}, {"name": "admin-new"}
        ]})
        .to_string();
        let last: Value = serde_json::from_str(
            &router
                .finish_listing("tools/list", from_models, kept.clone(), &ANON)
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            last["tools"],
            json!([{"name": "echo", "description": "upstream's"}, {"name": "t"}])
        );
        // A model dropped echo: it comes back at the end.
        let dropped = json!({"tools": [{"name": "t"}]}).to_string();
        let last: Value = serde_json::from_str(
            &router
                .finish_listing("tools/list", dropped, kept, &ANON)
                .unwrap(),
        )
        .unwrap();
        assert_eq!(last["tools"][1]["name"], "echo");
        // Nothing to change: the bytes stay as they were.
        let untouched = r#"{"tools" : [ {"name":"t"} ]}"#.to_owned();
        assert_eq!(
            router
                .finish_listing("tools/list", untouched.clone(), Some(Vec::new()), &ANON)
                .unwrap(),
            untouched
        );
    }

    #[test]
    fn what_two_parsers_could_read_differently_is_refused() {
        let router = single(Routes::new().hide("get-env").hide("secret-*"));
        for params in [
            r#"{"\ud800":0,"name":"get-env","arguments":{}}"#,
            r#"{"name":1e999,"name":"get-env"}"#,
            r#"{"name":"\q","name":"get-env"}"#,
            r#"{"name":"echo","name":"get-env"}"#,
            r#"{"name":"echo","arguments":{"a":1,"a":2}}"#,
            r#"{"name":"echo","arguments":{"x":"\udfff"}}"#,
            r#"{"name":["get-env"]}"#,
            r#"["get-env"]"#,
        ] {
            let Route::Refused(error) = route(&router, "tools/call", Some(params)) else {
                panic!("forwarded: {params}");
            };
            assert_eq!(error.code.0, -32602, "{params}");
        }
        for (method, params) in [
            ("prompts/get", r#"{"name":"x","name":"secret-p"}"#),
            (
                "completion/complete",
                r#"{"ref":{"type":"ref/prompt","name":"x","name":"secret-p"}}"#,
            ),
            ("resources/read", r#"{"uri":"demo://a","uri":"demo://b"}"#),
            (
                "subscriptions/listen",
                r#"{"notifications":{"resourceSubscriptions":"demo://a"}}"#,
            ),
        ] {
            assert!(
                matches!(route(&router, method, Some(params)), Route::Refused(_)),
                "{method} {params}"
            );
        }
    }

    #[test]
    fn what_was_checked_is_what_is_forwarded() {
        let router = single(Routes::new().hide("get-env"));
        let decision = router.decide(
            "tools/call",
            Some(r#"{ "name" : "\u0065cho", "arguments": {"n": 1.50} }"#),
            &ANON,
        );
        assert!(matches!(decision.route, Route::Chain));
        assert_eq!(
            decision.params.as_deref(),
            Some(r#"{"name":"echo","arguments":{"n":1.5}}"#)
        );
    }

    #[test]
    fn hidden_resources_are_refused_under_every_spelling_and_template() {
        let router = single(
            Routes::new()
                .hide("demo://resource/static/document/architecture.md")
                .hide("demo://resource/dynamic/text/{id}"),
        );
        for uri in [
            "demo://resource/static/document/architecture.md",
            "demo://resource/static/x/../document/architecture.md",
            "demo://resource/static/x/%2e%2e/document/architecture.md",
            "DEMO://Resource/static/document/%61rchitecture.md",
            "demo://resource/static/document%2Farchitecture.md",
            "demo://resource/static/document%5carchitecture.md",
            "demo://resource/static/document/architecture.md%00",
            "demo://resource/dynamic/text/1",
            "demo://resource/dynamic/text/%31",
            "demo://resource/dynamic/blob/../text/7",
            "not a uri",
        ] {
            let read = json!({ "uri": uri }).to_string();
            for method in [
                "resources/read",
                "resources/subscribe",
                "resources/unsubscribe",
            ] {
                assert!(
                    matches!(route(&router, method, Some(&read)), Route::Refused(_)),
                    "{method} {uri}"
                );
            }
            let listen = json!({"notifications": {"resourceSubscriptions": ["demo://resource/static/document/other.md", uri]}}).to_string();
            assert!(
                matches!(
                    route(&router, "subscriptions/listen", Some(&listen)),
                    Route::Refused(_)
                ),
                "listen {uri}"
            );
        }
        let other = json!({"uri": "demo://resource/static/x/../document/other.md"}).to_string();
        let decision = router.decide("resources/read", Some(&other), &ANON);
        assert!(matches!(decision.route, Route::Chain));
        assert_eq!(
            decision.params.as_deref(),
            Some(r#"{"uri":"demo://resource/static/document/other.md"}"#)
        );
        assert!(router.hides_update(Some(r#"{"uri":"demo://resource/dynamic/text/3"}"#), &ANON));
        assert!(router.hides_update(Some(r#"{"uri":"x","uri":"y"}"#), &ANON));
        assert!(!router.hides_update(
            Some(r#"{"uri":"demo://resource/static/document/other.md"}"#),
            &ANON
        ));
    }

    #[test]
    fn an_unreadable_listing_is_withheld_and_hidden_spellings_are_removed() {
        let router = single(
            Routes::new()
                .hide("get-env")
                .hide("demo://resource/static/document/architecture.md")
                .hide("demo://resource/dynamic/text/{id}"),
        );
        for raw in [
            r#"{"tools":[{"name":"get-env"}],"tools":[]}"#,
            r#"{"tools":[{"name":"\ud800get-env"}]}"#,
            r#"{"tools":[{"name":"echo","n":1e999}]}"#,
            r#"{"tools":{"name":"get-env"}}"#,
            r#"[]"#,
            r#"{"tools":["#,
        ] {
            let err = router
                .filter_upstream_listing("tools/list", raw.to_owned(), &ANON)
                .unwrap_err();
            assert_eq!(err.code.0, -32603, "{raw}");
            assert!(err.message.contains("withheld"), "{}", err.message);
            assert!(
                router
                    .finish_listing("tools/list", raw.to_owned(), None, &ANON)
                    .is_err()
            );
        }
        let resources = json!({"resources": [
            {"uri": "demo://resource/static/x/../document/architecture.md"},
            {"uri": "DEMO://resource/dynamic/text/5"},
            {"uri": "demo://resource/static/document/other.md"}
        ]})
        .to_string();
        let (out, _) = router
            .filter_upstream_listing("resources/list", resources, &ANON)
            .unwrap();
        assert_eq!(
            out,
            r#"{"resources":[{"uri":"demo://resource/static/document/other.md"}]}"#
        );
        let templates = json!({"resourceTemplates": [
            {"uriTemplate": "demo://resource/dynamic/text/{id}"},
            {"uriTemplate": "demo://resource/dynamic/blob/{id}"}
        ]})
        .to_string();
        let (out, _) = router
            .filter_upstream_listing("resources/templates/list", templates, &ANON)
            .unwrap();
        assert_eq!(
            out,
            r#"{"resourceTemplates":[{"uriTemplate":"demo://resource/dynamic/blob/{id}"}]}"#
        );
    }

    fn token(subject: &str) -> Identity {
        Identity::Token {
            subject: subject.to_owned(),
        }
    }

    #[test]
    fn restricted_is_hidden_from_callers_it_does_not_admit() {
        let router = single(
            Routes::new()
                .hide("secret")
                .restrict(Restriction::new("Admin-*").principal("token:alice"))
                .restrict(Restriction::new("secret").principal("token:alice"))
                .restrict(Restriction::new("file:///ops/{name}").principal("token:alice")),
        );
        let (alice, bob) = (token("alice"), token("bob"));
        for name in ["admin-reset", " ADMIN-reset\n", "\u{200B}admin-x"] {
            assert!(!router.is_hidden(name, &alice), "{name:?}");
            assert!(router.is_hidden(name, &bob), "{name:?}");
            assert!(router.is_hidden(name, &ANON), "{name:?}");
        }
        // Hidden wins over restricted.
        assert!(router.is_hidden("secret", &alice));
        assert!(!router.is_hidden("echo", &bob));
        assert!(!router.is_hidden_uri("file:///ops/a", &alice));
        assert!(router.is_hidden_uri("file:///ops/a", &bob));
        assert!(router.is_hidden_uri("FILE:///x/../ops/a", &bob));
        let call = json!({"name": "ADMIN-reset "}).to_string();
        assert!(matches!(
            router.decide("tools/call", Some(&call), &alice).route,
            Route::Chain
        ));
        let Route::Refused(error) = router.decide("tools/call", Some(&call), &bob).route else {
            panic!("bob was not refused");
        };
        let hidden = router
            .check("tools/call", Some(r#"{"name":"secret"}"#), &bob)
            .unwrap_err();
        // The same answer as for a hidden name: a caller cannot tell the two apart.
        assert_eq!(
            error.message.replace("ADMIN-reset ", "X"),
            hidden.message.replace("secret", "X")
        );
        assert!(router.check("tools/call", Some(&call), &bob).is_err());
        assert!(router.hides_update(Some(r#"{"uri":"file:///ops/a"}"#), &bob));
        assert!(!router.hides_update(Some(r#"{"uri":"file:///ops/a"}"#), &alice));
    }

    #[test]
    fn every_entry_naming_a_name_must_admit_the_caller() {
        let router = single(
            Routes::new()
                .restrict(
                    Restriction::new("admin-*")
                        .principal("token:alice")
                        .principal("token:bob"),
                )
                .restrict(Restriction::new("admin-reset").principal("token:alice")),
        );
        assert!(!router.is_hidden("admin-reset", &token("alice")));
        assert!(router.is_hidden("admin-reset", &token("bob")));
        assert!(!router.is_hidden("admin-other", &token("bob")));
        assert!(router.is_hidden("admin-other", &token("carol")));
    }

    #[test]
    fn restricted_listings_differ_per_caller_and_are_private() {
        let router = single(
            Routes::new()
                .restrict(Restriction::new("admin-*").principal("token:alice"))
                .pass_through("admin-reset"),
        );
        let upstream = r#"{"tools":[{"name":"echo"},{"name":"Admin-Reset"}]}"#;
        for (who, count) in [(token("alice"), 2), (token("bob"), 1)] {
            let (raw, kept) = router
                .filter_upstream_listing("tools/list", upstream.to_owned(), &who)
                .unwrap();
            let out: Value = serde_json::from_str(
                &router
                    .finish_listing("tools/list", raw, kept, &who)
                    .unwrap(),
            )
            .unwrap();
            assert_eq!(out["tools"].as_array().unwrap().len(), count, "{who:?}");
        }
        // A 2026-07-28 result is marked private, whatever the upstream said.
        let public = r#"{"resultType":"complete","ttlMs":60000,"cacheScope":"public","tools":[]}"#;
        let out: Value = serde_json::from_str(
            &router
                .finish_listing("tools/list", public.to_owned(), None, &token("bob"))
                .unwrap(),
        )
        .unwrap();
        assert_eq!(out["cacheScope"], "private");
        // An unreadable listing is withheld, as with hidden names.
        assert!(
            router
                .filter_upstream_listing(
                    "tools/list",
                    r#"{"tools":{}}"#.to_owned(),
                    &token("alice")
                )
                .is_err()
        );
    }
}
