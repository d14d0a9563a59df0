//! `mcpctl proxy PROJECT` and `mcpctl proxy --model M -- CMD ARGS...`: MCP on stdio, in front
//! of a project's servers or of one ad-hoc command.
//!
//! For a project the proxy gets: the project's model (or `--model`), each model's config from
//! the project (gate's `alwaysVisible` merged with the project's `alwaysVisible`), then
//! `--config` and `--set` on top; the project's `routes` (hidden and pass-through, SPEC P7);
//! the project's prompts (for models such as gate); and its
//! servers as upstreams ([`upstreams`]: the one place that turns servers into the proxy's
//! upstream side; several servers are served as one, names namespaced).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::ArgGroup;
use mcp_middleware::pattern::Pattern;
use mcp_middleware::registry::{self, ModelDescriptor};
use mcp_middleware::routing::Routes;
use mcp_middleware::upstream::{HttpUpstream, ServerSet, StdioServer, Upstream};
use mcp_middleware::{Project as ModelProject, ProjectPrompt, Proxy, SessionOptions};
use mcpctl::store::validate::{chain_configs, warn_unused};
use mcpctl::store::{Project, ProjectSpec, PromptSpec, Server, ServerSpec, Store};
use serde_json::{Map, Value};

use crate::model_config;

/// `proxy`'s arguments.
#[derive(Debug, clap::Args)]
#[command(group(ArgGroup::new("target").required(true).args(["project", "command", "url"])))]
pub(crate) struct ProxyArgs {
    /// A project from the store (`mcpctl get projects`): its servers, prompts, model and config.
    pub(crate) project: Option<String>,
    /// The proxy model to run (`mcpctl get proxymodels` lists them). Default: the project's
    /// `proxyModel`, or `passthrough`.
    #[arg(long, short = 'm')]
    pub(crate) model: Option<String>,
    /// Seconds a request may wait for the upstream before the client gets an error (0: no limit).
    /// Progress notifications restart the wait.
    #[arg(long, default_value_t = 300, value_name = "SECS")]
    pub(crate) request_timeout: u64,
    /// The largest message accepted from either side, in bytes.
    #[arg(long, default_value_t = 64 * 1024 * 1024, value_name = "BYTES")]
    pub(crate) max_message_bytes: usize,
    /// How many bytes may wait for the client before the proxy stops reading the upstream
    /// until the client catches up.
    #[arg(long, default_value_t = 16 * 1024 * 1024, value_name = "BYTES")]
    pub(crate) client_queue_bytes: usize,
    /// How many bytes may wait for the upstream to read them before requests are refused
    /// (-32003).
    #[arg(long, default_value_t = 16 * 1024 * 1024, value_name = "BYTES")]
    pub(crate) upstream_queue_bytes: usize,
    /// Model configuration: a YAML or JSON file mapping model names to their config (on top of
    /// the project's).
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Set one config field, as MODEL.FIELD=VALUE (after --config; repeatable). VALUE is read as
    /// JSON when it parses, else as a string.
    #[arg(long = "set", value_name = "MODEL.FIELD=VALUE")]
    pub(crate) sets: Vec<String>,
    /// Without a project: a streamable HTTP server's MCP endpoint, instead of a command.
    #[arg(long, value_name = "URL", conflicts_with = "command")]
    pub(crate) url: Option<String>,
    /// With `--url`: a header to send with every request, as `Name: value` (repeatable;
    /// `${env:VAR}` in the value is resolved when the proxy connects).
    #[arg(long = "header", value_name = "NAME: VALUE", requires = "url")]
    pub(crate) headers: Vec<String>,
    /// Without a project: the upstream server's command and its arguments, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub(crate) command: Vec<String>,
}

/// Runs the proxy until the client closes stdin or a stop signal arrives.
pub(crate) fn run(args: ProxyArgs) -> anyhow::Result<()> {
    Ok(build(&args)?.run_stdio()?)
}

/// The proxy `args` describe (a project, or a model in front of one command), with its session
/// settings: what `proxy` serves on stdio and `serve` over HTTP.
pub(crate) fn build(args: &ProxyArgs) -> anyhow::Result<Proxy> {
    let overrides = model_config::load(args.config.as_deref(), &args.sets)?;
    let mut options = SessionOptions::default();
    options.request_timeout =
        (args.request_timeout > 0).then(|| Duration::from_secs(args.request_timeout));
    options.max_message_bytes = args.max_message_bytes;
    options.client_queue_bytes = args.client_queue_bytes;
    options.upstream_queue_bytes = args.upstream_queue_bytes;
    let proxy = match &args.project {
        Some(name) => for_project(&Store::from_env()?, name, args.model.as_deref(), overrides)?,
        None => ad_hoc(
            args.model.as_deref().unwrap_or("passthrough"),
            ad_hoc_upstream(args)?,
            overrides,
        )?,
    };
    Ok(proxy.options(options))
}

/// The upstream of `proxy --url URL` or `proxy -- CMD ARGS...`.
fn ad_hoc_upstream(args: &ProxyArgs) -> anyhow::Result<Upstream> {
    if let Some(url) = &args.url {
        let mut remote = HttpUpstream::new(url);
        for header in &args.headers {
            let Some((name, value)) = header.split_once(':') else {
                bail!("--header `{header}`: expected `Name: value`");
            };
            remote = remote.header(name.trim(), value.trim());
        }
        return Ok(remote.into());
    }
    let Some((program, rest)) = args.command.split_first() else {
        bail!("no upstream command: give it after `--`, e.g. `mcpctl proxy -- node server.js`");
    };
    Ok(StdioServer::new(program).args(rest).into())
}

/// `proxy --model M -- CMD ARGS...` (or `--url URL`).
fn ad_hoc(model: &str, upstream: Upstream, configs: Map<String, Value>) -> anyhow::Result<Proxy> {
    let model = registry::find(model)?;
    let mut proxy = Proxy::new(upstream).model_descriptor(model);
    for (name, config) in configs {
        proxy = proxy.config(name, config);
    }
    Ok(proxy)
}

/// The proxy for the stored project `name`, with `model` instead of the project's when given
/// and `overrides` on top of the project's config.
pub(crate) fn for_project(
    store: &Store,
    name: &str,
    model: Option<&str>,
    overrides: Map<String, Value>,
) -> anyhow::Result<Proxy> {
    let mut project: Project = store.get::<ProjectSpec>(name)?;
    if let Some(model) = model {
        registry::find(model)?;
        project.spec.proxy_model = Some(model.to_owned());
    }
    let descriptor = mcpctl::store::validate::find_model(&project)?;
    let chain = chain_configs(&project.spec, descriptor);
    warn_unused(&project, &chain);
    let mut configs = chain.configs;
    for (model, value) in overrides {
        merge(configs.entry(model).or_insert(Value::Null), value);
    }
    let servers: Vec<Server> = project
        .spec
        .servers
        .iter()
        .map(|server| store.get::<ServerSpec>(server))
        .collect::<Result<_, _>>()?;
    let mut model_project = ModelProject::new(&project.name);
    model_project.servers = project.spec.servers.clone();
    for prompt in &project.spec.prompts {
        let prompt = store.get::<PromptSpec>(prompt)?;
        model_project = model_project
            .prompt(ProjectPrompt::new(prompt.name, prompt.spec.content).tags(prompt.spec.tags));
    }
    let mut proxy = upstreams(store, &project, &servers)?
        .model_descriptor(descriptor)
        .project(model_project)
        .routes(routes(&project.spec.routes));
    for (model, config) in configs {
        proxy = proxy.config(model, config);
    }
    check_chain(&proxy, descriptor, name)?;
    Ok(proxy)
}

/// The proxy's upstream side for a project's servers: one server is served as it is; several
/// are merged into one surface ([`ServerSet`]: `server{separator}tool` names, resources and
/// prompts routed back), each server's state written to the project's status file (which
/// `describe project` shows). HTTP servers are reached over streamable HTTP.
fn upstreams(store: &Store, project: &Project, servers: &[Server]) -> anyhow::Result<Proxy> {
    match servers {
        [] => bail!(
            "project `{0}` has no servers: add one with `mcpctl edit project {0} --add-server NAME`",
            project.name
        ),
        [server] => {
            // One server is served as it is, with no status file: drop one left from when the
            // project had several, so `describe` does not show it.
            let _ = std::fs::remove_file(status_file(store, &project.name));
            Ok(Proxy::new(upstream(server)?))
        }
        several => {
            let mut set = ServerSet::new()
                .separator(project.spec.separator())
                .status_file(status_file(store, &project.name));
            for server in several {
                set = set.server(&server.name, upstream(server)?);
            }
            Ok(Proxy::new(set))
        }
    }
}

/// Where the proxy of a project with several servers keeps their state (running, or down and
/// why): `$MCPCTL_HOME/status/PROJECT.json`, rewritten by the last proxy that ran.
pub(crate) fn status_file(store: &Store, project: &str) -> PathBuf {
    store.root().join("status").join(format!("{project}.json"))
}

/// The upstream for a stored server: a child process on stdio, or a streamable HTTP server.
/// Values go to the library as written: a `${env:VAR}` placeholder is the library's to resolve,
/// when it starts the server or connects to it (SPEC T6).
fn upstream(server: &Server) -> anyhow::Result<Upstream> {
    Ok(match &server.spec {
        ServerSpec::Stdio(spec) => {
            let mut stdio = StdioServer::new(&spec.command).args(&spec.args);
            for (key, value) in &spec.env {
                stdio = stdio.env(key, value);
            }
            if let Some(cwd) = &spec.cwd {
                stdio = stdio.current_dir(cwd);
            }
            stdio.into()
        }
        ServerSpec::Http(http) => {
            let mut remote = HttpUpstream::new(&http.url);
            for (name, value) in &http.headers {
                remote = remote.header(name, value);
            }
            remote.into()
        }
    })
}

/// A project's routing paths (SPEC P7) for the library: hidden and pass-through names or globs
/// of tools, prompts and resource URIs.
fn routes(stored: &mcpctl::store::Routes) -> Routes {
    Routes {
        hidden: stored.hidden.iter().map(Pattern::new).collect(),
        pass_through: stored.pass_through.iter().map(Pattern::new).collect(),
    }
}

/// Fails now, naming the project, if the model refuses its config.
fn check_chain(
    proxy: &Proxy,
    model: &'static ModelDescriptor,
    project: &str,
) -> anyhow::Result<()> {
    proxy.chain().with_context(|| {
        format!(
            "project `{project}` cannot run proxy model `{}`",
            model.name
        )
    })?;
    Ok(())
}

/// Lays `over` onto `base`: maps merge key by key (recursively), anything else replaces.
fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (key, value) in over {
                merge(base.entry(key).or_insert(Value::Null), value);
            }
        }
        (base, over) => *base = over,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn overrides_merge_into_the_project_config() {
        let mut base = json!({"alwaysVisible": ["a"], "promptBudgetBytes": 10});
        merge(&mut base, json!({"promptBudgetBytes": 20, "x": {"y": 1}}));
        assert_eq!(
            base,
            json!({"alwaysVisible": ["a"], "promptBudgetBytes": 20, "x": {"y": 1}})
        );
    }
}
