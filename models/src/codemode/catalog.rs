//! The per-server view: which tools belong to which namespace, under which method names.
//!
//! Built from the listing the models below code mode return (so hidden tools are not in it),
//! the project's servers and the separator of namespaced names ([`Project::separator`]):
//!
//! - no project (an ad-hoc proxy of one server): every upstream tool under `upstream`;
//! - a project of one server (served as it is): every upstream tool under that server's
//!   namespace;
//! - a project of several servers: a tool named `server{separator}tool` under `server`'s
//!   namespace, as `tool`;
//! - the synthetic tools of models below code mode (and anything else no server claims) under
//!   `proxy`.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use mcp_middleware::Project;
use mcp_middleware::types::{JsonObject, Tool};
use serde::Serialize;

use super::naming;

/// One tool as code sees it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Entry {
    /// The namespace identifier.
    pub(crate) namespace: String,
    /// The method name.
    pub(crate) method: String,
    /// The tool's name on its server (what indexing by name takes).
    pub(crate) original: String,
    /// The name the call is sent under (the listing's).
    #[serde(skip)]
    pub(crate) listed: String,
    /// The tool's title, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) title: Option<String>,
    /// The description.
    pub(crate) description: String,
    /// The input schema.
    #[serde(skip)]
    pub(crate) input_schema: JsonObject,
    /// The output schema, if any.
    #[serde(skip)]
    pub(crate) output_schema: Option<JsonObject>,
}

/// One namespace: a server (or `proxy`) and its tools.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Namespace {
    /// The identifier code uses.
    pub(crate) name: String,
    /// The server's name in the project (`upstream` ad hoc, `proxy` for synthetic tools).
    pub(crate) server: String,
    /// Its tools, by method name.
    #[serde(skip)]
    pub(crate) tools: Vec<Entry>,
}

/// Every namespace of a session, in the project's server order (then `proxy`).
#[derive(Debug, Default)]
pub(crate) struct Catalog {
    pub(crate) namespaces: Vec<Namespace>,
    /// Each tool's compiled input schema (in [`Catalog::entries`] order), made on first use:
    /// compiling is the dearest part of a call, so it is done once per session and tool.
    validators: Vec<OnceLock<Option<jsonschema::Validator>>>,
}

impl Catalog {
    /// The catalog for `tools` (a listing), `project` and the synthetic tool names below.
    pub(crate) fn build(tools: &[Tool], project: Option<&Project>, synthetic: &[&str]) -> Self {
        // (namespace server name, original tool name, tool), servers in project order.
        let mut servers: Vec<String> = match project {
            Some(project) if !project.servers.is_empty() => project.servers.clone(),
            _ => vec![naming::AD_HOC.to_owned()],
        };
        let separator = project.and_then(|p| p.separator.clone());
        let mut grouped: BTreeMap<usize, Vec<(String, &Tool)>> = BTreeMap::new();
        let proxy_index = servers.len();
        for tool in tools {
            let name = tool.name.as_ref();
            let (index, original) = if synthetic.contains(&name) {
                (proxy_index, name.to_owned())
            } else {
                match &separator {
                    None => (0, name.to_owned()),
                    Some(separator) => {
                        split(name, &servers, separator).unwrap_or((proxy_index, name.to_owned()))
                    }
                }
            };
            grouped.entry(index).or_default().push((original, tool));
        }
        servers.push(naming::PROXY.to_owned());
        let server_names: Vec<&str> = servers[..proxy_index].iter().map(String::as_str).collect();
        let mut identifiers = match project {
            Some(project) if !project.servers.is_empty() => {
                naming::assign(&server_names, naming::namespace)
            }
            _ => vec![naming::AD_HOC.to_owned()],
        };
        identifiers.push(naming::PROXY.to_owned());
        let namespaces = servers
            .iter()
            .enumerate()
            .filter_map(|(index, server)| {
                let tools = grouped.remove(&index).unwrap_or_default();
                if index == proxy_index && tools.is_empty() {
                    return None;
                }
                let originals: Vec<&str> = tools.iter().map(|(o, _)| o.as_str()).collect();
                let methods = naming::assign(&originals, naming::method);
                let namespace = identifiers[index].clone();
                let mut entries: Vec<Entry> = tools
                    .iter()
                    .zip(methods)
                    .map(|((original, tool), method)| Entry {
                        namespace: namespace.clone(),
                        method,
                        original: original.clone(),
                        listed: tool.name.to_string(),
                        title: tool
                            .title
                            .clone()
                            .or_else(|| tool.annotations.as_ref().and_then(|a| a.title.clone())),
                        description: tool.description.as_deref().unwrap_or_default().to_owned(),
                        input_schema: (*tool.input_schema).clone(),
                        output_schema: tool.output_schema.as_deref().cloned(),
                    })
                    .collect();
                entries.sort_by(|a, b| a.method.cmp(&b.method));
                Some(Namespace {
                    name: namespace,
                    server: server.clone(),
                    tools: entries,
                })
            })
            .collect::<Vec<Namespace>>();
        let count = namespaces.iter().map(|ns| ns.tools.len()).sum();
        Self {
            namespaces,
            validators: (0..count).map(|_| OnceLock::new()).collect(),
        }
    }

    /// The validator of the tool at `index` (in [`Catalog::entries`] order); `None` when its
    /// schema cannot be compiled (the call is then not checked here, only by the server).
    pub(crate) fn validator(&self, index: usize) -> Option<&jsonschema::Validator> {
        let entry = self.entries().nth(index)?;
        self.validators
            .get(index)?
            .get_or_init(|| {
                let schema = serde_json::Value::Object(entry.input_schema.clone());
                jsonschema::validator_for(&schema)
                    .inspect_err(|err| {
                        tracing::debug!(tool = %entry.listed, %err, "input schema not usable for validation");
                    })
                    .ok()
            })
            .as_ref()
    }

    /// The namespace called `name`.
    pub(crate) fn namespace(&self, name: &str) -> Option<&Namespace> {
        self.namespaces.iter().find(|ns| ns.name == name)
    }

    /// Every tool.
    pub(crate) fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.namespaces.iter().flat_map(|ns| ns.tools.iter())
    }

    /// The tool `namespace.name`, by method name or original name.
    pub(crate) fn find(&self, namespace: &str, name: &str) -> Option<&Entry> {
        let ns = self.namespace(namespace)?;
        ns.tools
            .iter()
            .find(|e| e.method == name)
            .or_else(|| ns.tools.iter().find(|e| e.original == name))
    }

    /// A tool named like `everything.echo` (or `everything["get-sum"]`), as `inspect` takes it.
    pub(crate) fn find_qualified(&self, qualified: &str) -> Option<&Entry> {
        let qualified = qualified.trim();
        if let Some((ns, rest)) = qualified.split_once('[') {
            let name = rest
                .trim_end_matches(']')
                .trim_matches(|c| c == '"' || c == '\'');
            return self.find(ns.trim(), name);
        }
        let (ns, name) = qualified.split_once('.')?;
        self.find(ns, name)
    }

    /// The qualified names closest to `wanted`, for "did you mean".
    pub(crate) fn suggestions(&self, wanted: &str, limit: usize) -> Vec<&Entry> {
        let names: Vec<String> = self
            .entries()
            .map(|e| format!("{}.{}", e.namespace, e.method))
            .collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut found: Vec<&Entry> = naming::closest(wanted, &refs, limit)
            .into_iter()
            .filter_map(|q| self.find_qualified(q))
            .collect();
        if found.is_empty()
            && let Some((ns, method)) = wanted.split_once('.')
        {
            // A known method under the wrong namespace, or a near method in the right one.
            let methods: Vec<&str> = self
                .namespace(ns)
                .map(|n| n.tools.iter().map(|e| e.method.as_str()).collect())
                .unwrap_or_default();
            found = naming::closest(method, &methods, limit)
                .into_iter()
                .filter_map(|m| self.find(ns, m))
                .collect();
        }
        found
    }
}

/// `server{separator}tool` -> (the server's index, `tool`); the longest server name wins.
fn split(name: &str, servers: &[String], separator: &str) -> Option<(usize, String)> {
    servers
        .iter()
        .enumerate()
        .filter_map(|(index, server)| {
            let rest = name
                .strip_prefix(server.as_str())?
                .strip_prefix(separator)?;
            Some((server.len(), index, rest))
        })
        .max_by_key(|(len, _, _)| *len)
        .map(|(_, index, rest)| (index, rest.to_owned()))
}
