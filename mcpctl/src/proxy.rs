//! `mcpctl proxy PROJECT` and `mcpctl proxy --model M -- CMD ARGS...`: MCP on stdio, in front
//! of a project's servers or of one ad-hoc command.
//!
//! For a project the proxy gets: the project's model (or `--model`), each model's config from
//! the project (gate's `alwaysVisible` merged with the project's `alwaysVisible`), then
//! `--config` and `--set` on top; the project's `routes` (hidden and pass-through);
//! the project's prompts (for models such as gate); and its
//! servers as upstreams ([`upstreams`]: the one place that turns servers into the proxy's
//! upstream side; several servers are served as one, names namespaced).
//!
//! What a child's environment holds ([`EnvPolicy`]): a project's stdio server gets the
//! SDK default set, its declared `env` and what its `inheritEnv` names; an ad-hoc command gets
//! the proxy's whole environment (an MCP client's configuration puts the server's variables on
//! the proxy's entry). Either way [`Secrets`] are denied to every child.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::ArgGroup;
use mcp_middleware::live::Live;
use mcp_middleware::pattern::Pattern;
use mcp_middleware::registry::{self, ModelDescriptor};
use mcp_middleware::routing::Routes;
use mcp_middleware::upstream::{
    EnvPolicy, HttpUpstream, ServerSet, StdioServer, TokenExchange, Upstream, env_references,
};
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
    #[arg(env = "MCPCTL_PROJECT")]
    pub(crate) project: Option<String>,
    /// The proxy model to run (`mcpctl get proxymodels` lists them). Default: the project's
    /// `proxyModel`, or `passthrough`.
    #[arg(long, short = 'm', env = "MCPCTL_MODEL")]
    pub(crate) model: Option<String>,
    /// Seconds a request may wait for the upstream before the client gets an error (0: no limit).
    /// Progress notifications restart the wait.
    #[arg(
        long,
        default_value_t = 300,
        value_name = "SECS",
        env = "MCPCTL_REQUEST_TIMEOUT"
    )]
    pub(crate) request_timeout: u64,
    /// The largest message accepted from either side, in bytes.
    #[arg(long, default_value_t = 64 * 1024 * 1024, value_name = "BYTES", env = "MCPCTL_MAX_MESSAGE_BYTES")]
    pub(crate) max_message_bytes: usize,
    /// How many bytes may wait for the client before the proxy stops reading the upstream
    /// until the client catches up.
    #[arg(long, default_value_t = 16 * 1024 * 1024, value_name = "BYTES", env = "MCPCTL_CLIENT_QUEUE_BYTES")]
    pub(crate) client_queue_bytes: usize,
    /// How many bytes may wait for the upstream to read them before requests are refused
    /// (-32003).
    #[arg(long, default_value_t = 16 * 1024 * 1024, value_name = "BYTES", env = "MCPCTL_UPSTREAM_QUEUE_BYTES")]
    pub(crate) upstream_queue_bytes: usize,
    /// Model configuration: a YAML or JSON file mapping model names to their config (on top of
    /// the project's).
    #[arg(long, value_name = "FILE", env = "MCPCTL_CONFIG")]
    pub(crate) config: Option<PathBuf>,
    /// Set one config field, as MODEL.FIELD=VALUE (after --config; repeatable). VALUE is read as
    /// JSON when it parses, else as a string.
    #[arg(
        long = "set",
        value_name = "MODEL.FIELD=VALUE",
        env = "MCPCTL_SET",
        hide_env_values = true
    )]
    pub(crate) sets: Vec<String>,
    /// Without a project: a streamable HTTP server's MCP endpoint, instead of a command.
    #[arg(
        long,
        value_name = "URL",
        conflicts_with = "command",
        env = "MCPCTL_URL",
        hide_env_values = true
    )]
    pub(crate) url: Option<String>,
    /// With `--url`: a header to send with every request, as `Name: value` (repeatable;
    /// `${env:VAR}` in the value is resolved when the proxy connects).
    #[arg(
        long = "header",
        value_name = "NAME: VALUE",
        requires = "url",
        env = "MCPCTL_HEADER",
        hide_env_values = true
    )]
    pub(crate) headers: Vec<String>,
    /// An OpenAI-compatible endpoint (`.../v1`) for models' LLM calls (`ctx.llm()`, used by
    /// `summarize`) when the client cannot sample; replaces the project's `llm`.
    #[arg(
        long,
        value_name = "URL",
        requires = "llm_model",
        env = "MCPCTL_LLM_URL",
        hide_env_values = true
    )]
    pub(crate) llm_url: Option<String>,
    /// With `--llm-url`: the model to ask for.
    #[arg(
        long,
        value_name = "MODEL",
        requires = "llm_url",
        env = "MCPCTL_LLM_MODEL"
    )]
    pub(crate) llm_model: Option<String>,
    /// With `--llm-url`: the environment variable that holds the endpoint's API key (read when
    /// a request is sent, never shown).
    #[arg(
        long,
        value_name = "VAR",
        requires = "llm_url",
        env = "MCPCTL_LLM_API_KEY_ENV"
    )]
    pub(crate) llm_api_key_env: Option<String>,
    /// A file holding the secret (32 bytes or more) every `requestState` the proxy hands a
    /// 2026-07-28 client is sealed with; replicas serving the same clients share it. Default: a
    /// random key per process.
    #[arg(long, value_name = "FILE", env = "MCPCTL_STATE_KEY_FILE")]
    pub(crate) state_key_file: Option<PathBuf>,
    /// Seconds a `requestState` (an input round of a 2026-07-28 client) stays valid.
    #[arg(long, default_value_t = 300, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..), env = "MCPCTL_REQUEST_STATE_TTL")]
    pub(crate) request_state_ttl: u64,
    /// Without a project: the upstream server's command and its arguments, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub(crate) command: Vec<String>,
}

/// Runs the proxy until the client closes stdin or a stop signal arrives. A project's proxy
/// follows changes to the project and its servers in the store (`crate::live`).
pub(crate) fn run(args: ProxyArgs) -> anyhow::Result<()> {
    // Dropped after the proxy returns: the last spans are flushed then.
    let traces = crate::otel::Traces::from_env(crate::otel::Downstream::Pipe)?;
    let (proxy, reloader) = crate::live::Reloader::start(Arc::new(args), traces.tap())?;
    let _watch = reloader.and_then(crate::live::watch::start);
    Ok(proxy.run_stdio()?)
}

/// The proxy `args` describe (a project, or a model in front of one command), with its session
/// settings: what `proxy` serves on stdio and `serve` over HTTP. `tap` sees every request
/// (traces).
pub(crate) fn build(
    args: &ProxyArgs,
    tap: Option<Arc<dyn mcp_middleware::request_tap::RequestTap>>,
) -> anyhow::Result<Proxy> {
    build_following(args, tap, None)
}

/// [`build`], for a proxy whose sessions follow `live` (`crate::live`).
pub(crate) fn build_following(
    args: &ProxyArgs,
    tap: Option<Arc<dyn mcp_middleware::request_tap::RequestTap>>,
    live: Option<Live>,
) -> anyhow::Result<Proxy> {
    let overrides = model_config::load(args.config.as_deref(), &args.sets)?;
    let mut options = SessionOptions::default();
    options.request_timeout =
        (args.request_timeout > 0).then(|| Duration::from_secs(args.request_timeout));
    options.max_message_bytes = args.max_message_bytes;
    options.client_queue_bytes = args.client_queue_bytes;
    options.upstream_queue_bytes = args.upstream_queue_bytes;
    options.request_tap = tap;
    options.live = live;

    if let Some(path) = &args.state_key_file {
        options.state_key = mcp_middleware::sealed_state::StateKey::from_file(path)
            .with_context(|| format!("--state-key-file {}", path.display()))?;
    }
    options.request_state_ttl = Duration::from_secs(args.request_state_ttl);
    let proxy = match &args.project {
        Some(name) => for_project(
            &Store::from_env()?,
            name,
            args.model.as_deref(),
            overrides,
            args.llm_api_key_env.as_deref(),
        )?,
        None => {
            let mut secrets = Secrets::of(&overrides, &[]);
            secrets.llm_key(args.llm_api_key_env.as_deref());
            ad_hoc(
                args.model.as_deref().unwrap_or("passthrough"),
                ad_hoc_upstream(args, &secrets)?,
                overrides,
            )?
        }
    };
    let proxy = match llm_flags(args)? {
        Some(endpoint) => proxy.llm(endpoint),
        None => proxy,
    };
    Ok(proxy.options(options))
}

/// The endpoint `--llm-url`, `--llm-model` and `--llm-api-key-env` give, checked as `spec.llm`
/// is.
fn llm_flags(args: &ProxyArgs) -> anyhow::Result<Option<mcp_middleware::llm::LlmEndpoint>> {
    let (Some(url), Some(model)) = (&args.llm_url, &args.llm_model) else {
        return Ok(None);
    };
    let mut endpoint = mcp_middleware::llm::LlmEndpoint::new(url, model);
    if let Some(var) = &args.llm_api_key_env {
        if var.is_empty() || var.contains(['$', '{', '}', '=']) {
            bail!("--llm-api-key-env `{var}`: give the variable's name, such as OPENAI_API_KEY");
        }
        endpoint = endpoint.api_key(format!("${{env:{var}}}"));
    }
    if let Err(why) = endpoint.check() {
        bail!("--llm-{why}");
    }
    Ok(Some(endpoint))
}

/// The upstream of `proxy --url URL` or `proxy -- CMD ARGS...`. The command inherits the
/// proxy's environment, less `secrets`.
fn ad_hoc_upstream(args: &ProxyArgs, secrets: &Secrets) -> anyhow::Result<Upstream> {
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
    let policy = secrets.deny_to(EnvPolicy::inherit_all(), None);
    Ok(StdioServer::new(program)
        .args(rest)
        .env_policy(policy)
        .into())
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
    llm_key_env: Option<&str>,
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
    model_project.llm = project.spec.llm.as_ref().map(|llm| llm.endpoint());
    for prompt in &project.spec.prompts {
        let prompt = store.get::<PromptSpec>(prompt)?;
        model_project = model_project
            .prompt(ProjectPrompt::new(prompt.name, prompt.spec.content).tags(prompt.spec.tags));
    }
    let mut secrets = Secrets::of(&configs, &servers);
    let project_key = project
        .spec
        .llm
        .as_ref()
        .and_then(|llm| llm.api_key.as_deref());
    for name in project_key.into_iter().flat_map(env_references) {
        secrets.llm_key(Some(name));
    }
    secrets.llm_key(llm_key_env);
    let mut proxy = upstreams(store, &project, &servers, &secrets)?
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
fn upstreams(
    store: &Store,
    project: &Project,
    servers: &[Server],
    secrets: &Secrets,
) -> anyhow::Result<Proxy> {
    match servers {
        [] => bail!(
            "project `{0}` has no servers: add one with `mcpctl edit project {0} --add-server NAME`",
            project.name
        ),
        [server] => {
            // One server is served as it is, with no status file: drop one left from when the
            // project had several, so `describe` does not show it.
            let _ = std::fs::remove_file(status_file(store, &project.name));
            let recorded = crate::eras::record_for(store, &project.name, &server.name);
            Ok(Proxy::new(upstream(server, secrets)?.era_record(recorded)))
        }
        several => {
            let mut set = ServerSet::new()
                .separator(project.spec.separator())
                .status_file(status_file(store, &project.name));
            for server in several {
                let recorded = crate::eras::record_for(store, &project.name, &server.name);
                set = set.server(
                    &server.name,
                    upstream(server, secrets)?.era_record(recorded),
                );
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
/// when it starts the server or connects to it. A stdio server's environment is the
/// SDK default set, its `env` and its `inheritEnv`, never one of `secrets` it does not declare.
fn upstream(server: &Server, secrets: &Secrets) -> anyhow::Result<Upstream> {
    for text in server_texts(&server.spec) {
        if let Some((name, why)) =
            env_references(text).find_map(|name| Some((name, secrets.own.get(name)?)))
        {
            bail!(
                "server `{}` references `${{env:{name}}}`, but that variable holds {why}, which the proxy keeps from its servers",
                server.name
            );
        }
    }
    Ok(match &server.spec {
        ServerSpec::Stdio(spec) => {
            let mut policy = EnvPolicy::sdk_default();
            for name in &spec.inherit_env {
                if let Some(why) = secrets.why(name, Some(server)) {
                    bail!(
                        "server `{}` lists `{name}` in `inheritEnv`, but the proxy keeps that variable from its servers: it holds {why}",
                        server.name
                    );
                }
                policy = policy.allow(name);
            }
            let mut stdio = StdioServer::new(&spec.command)
                .args(&spec.args)
                .env_policy(secrets.deny_to(policy, Some(server)));
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
            if let Some(exchange) = http.auth.as_ref().and_then(|a| a.token_exchange.as_ref()) {
                remote = remote.token_exchange(token_exchange(exchange));
            }
            remote.into()
        }
    })
}

/// The environment variables the proxy holds secrets in, which no child is given:
/// the one owner of that list.
///
/// - the proxy's own: every model config's `keyEnv` (the audit key's variable) and every
///   `${env:VAR}` in a model's config;
/// - each server's credentials: every `${env:VAR}` in a server's definition (an HTTP server's
///   headers, a stdio server's `env`, arguments, command and directory), denied to every
///   *other* server.
///
/// Identity secrets (`--tokens`, `--jwt-secret-file`, `--jwt-key`) are files today, so no
/// variable holds them; settings that name a variable for a secret belong in this list.
#[derive(Debug, Default)]
struct Secrets {
    /// Variable name -> what it holds, for the proxy's own secrets.
    own: std::collections::BTreeMap<String, String>,
    /// (server, variable) for each server's references.
    servers: Vec<(String, String)>,
}

impl Secrets {
    fn of(configs: &Map<String, Value>, servers: &[Server]) -> Self {
        let mut secrets = Secrets::default();
        // The flags' variables that may carry credentials (a password in a URL, a header's
        // token): an ad-hoc command inherits the environment, and no server may ask for them.
        for (name, holds) in [
            ("MCPCTL_STORE", "the shared store's URL (--store)"),
            ("MCPCTL_URL", "the upstream's URL (--url)"),
            ("MCPCTL_HEADER", "a header for the upstream (--header)"),
            ("MCPCTL_LLM_URL", "the LLM endpoint's URL (--llm-url)"),
            ("MCPCTL_SET", "model settings (--set)"),
        ] {
            secrets.own.insert(name.to_owned(), holds.to_owned());
        }
        for (model, config) in configs {
            secrets.collect_config(model, config);
        }
        for server in servers {
            for text in server_texts(&server.spec) {
                for name in env_references(text) {
                    secrets.servers.push((server.name.clone(), name.to_owned()));
                }
            }
        }
        secrets
    }

    /// The variable that holds the LLM endpoint's key (`spec.llm.apiKey`, `--llm-api-key-env`).
    fn llm_key(&mut self, name: Option<&str>) {
        if let Some(name) = name {
            self.own
                .entry(name.to_owned())
                .or_insert_with(|| "the LLM endpoint's API key".to_owned());
        }
    }

    fn collect_config(&mut self, model: &str, value: &Value) {
        match value {
            Value::Object(map) => {
                for (field, value) in map {
                    if let (true, Some(name)) = (field == "keyEnv", value.as_str()) {
                        self.own
                            .insert(name.to_owned(), format!("`{model}`'s `keyEnv` key"));
                    }
                    self.collect_config(model, value);
                }
            }
            Value::Array(items) => items.iter().for_each(|v| self.collect_config(model, v)),
            Value::String(text) => {
                for name in env_references(text) {
                    self.own
                        .entry(name.to_owned())
                        .or_insert_with(|| format!("a secret of `{model}`'s config"));
                }
            }
            _ => {}
        }
    }

    /// What `name` holds, if it is a secret `server` (or an ad-hoc command) must not get.
    fn why(&self, name: &str, server: Option<&Server>) -> Option<String> {
        if let Some(why) = self.own.get(name) {
            return Some(why.clone());
        }
        let own = |s: &str| server.is_some_and(|server| server.name == s);
        self.servers
            .iter()
            .find(|(s, n)| n == name && !own(s))
            .filter(|_| {
                // A variable the server references itself is its own credential.
                !self.servers.iter().any(|(s, n)| n == name && own(s))
            })
            .map(|(s, _)| format!("a credential of server `{s}`"))
    }

    /// `policy` with every secret `server` (or an ad-hoc command) must not get denied.
    fn deny_to(&self, mut policy: EnvPolicy, server: Option<&Server>) -> EnvPolicy {
        let names = self.own.keys().chain(self.servers.iter().map(|(_, n)| n));
        for name in names {
            if self.why(name, server).is_some() {
                policy = policy.deny(name);
            }
        }
        policy
    }
}

/// Every value of a server's definition that may hold `${env:VAR}`.
fn server_texts(spec: &ServerSpec) -> Vec<&str> {
    match spec {
        ServerSpec::Stdio(s) => std::iter::once(&s.command)
            .chain(&s.args)
            .chain(s.env.values())
            .chain(&s.cwd)
            .map(String::as_str)
            .collect(),
        ServerSpec::Http(h) => std::iter::once(&h.url)
            .chain(h.headers.values())
            .chain(
                h.auth
                    .iter()
                    .filter_map(|a| a.token_exchange.as_ref())
                    .map(|t| &t.client_secret),
            )
            .map(String::as_str)
            .collect(),
    }
}

/// The library's token exchange for a server's `auth.tokenExchange`.
fn token_exchange(spec: &mcpctl::store::auth::TokenExchangeAuth) -> TokenExchange {
    let mut exchange = TokenExchange::new(&spec.endpoint, &spec.client_id, &spec.client_secret);
    if let Some(audience) = &spec.audience {
        exchange = exchange.audience(audience);
    }
    if let Some(scope) = &spec.scope {
        exchange = exchange.scope(scope);
    }
    if let Some(resource) = &spec.resource {
        exchange = exchange.resource(resource);
    }
    exchange
}

/// A project's routing paths for the library: hidden, pass-through and restricted
/// names or globs of tools, prompts and resource URIs.
fn routes(stored: &mcpctl::store::Routes) -> Routes {
    Routes {
        hidden: stored.hidden.iter().map(Pattern::new).collect(),
        pass_through: stored.pass_through.iter().map(Pattern::new).collect(),
        restricted: stored.restricted.clone(),
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

    fn server(name: &str, spec: ServerSpec) -> Server {
        Server {
            name: name.to_owned(),
            spec,
        }
    }

    #[test]
    fn secrets_are_the_proxys_own_and_each_servers_denied_to_the_others() {
        let mut github = mcpctl::store::StdioSpec {
            command: "gh-mcp".into(),
            args: vec![],
            env: [("GITHUB_TOKEN".to_owned(), "${env:GH}".to_owned())].into(),
            inherit_env: vec![],
            cwd: None,
        };
        let remote = ServerSpec::Http(mcpctl::store::HttpSpec {
            url: "https://x/mcp".into(),
            headers: [(
                "Authorization".to_owned(),
                "Bearer ${env:REMOTE}".to_owned(),
            )]
            .into(),
            auth: None,
        });
        let servers = [
            server("github", ServerSpec::Stdio(github.clone())),
            server("remote", remote),
        ];
        let configs = json!({
            "audit": {"path": "a.log", "keyEnv": "AUDIT"},
            "other": {"endpoint": {"auth": "${env:MODEL_SECRET}"}},
        });
        let Value::Object(configs) = configs else {
            unreachable!()
        };
        let secrets = Secrets::of(&configs, &servers);
        let policy = secrets.deny_to(EnvPolicy::sdk_default(), Some(&servers[0]));
        for denied in ["AUDIT", "MODEL_SECRET", "REMOTE"] {
            assert!(policy.denies(denied), "{denied}");
        }
        assert!(
            !policy.denies("GH"),
            "a server's own reference is its credential"
        );
        assert!(secrets.why("GH", Some(&servers[1])).is_some());
        let ad_hoc = secrets.deny_to(EnvPolicy::inherit_all(), None);
        assert!(ad_hoc.denies("GH") && ad_hoc.denies("AUDIT"));

        let mut leaky = github.clone();
        leaky.args = vec!["--key=${env:AUDIT}".into()];
        let err = upstream(&server("leaky", ServerSpec::Stdio(leaky)), &secrets)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("server `leaky` references `${env:AUDIT}`")
                && err.contains("`audit`'s `keyEnv` key"),
            "{err}"
        );

        github.inherit_env = vec!["REMOTE".into()];
        let err = upstream(&server("github", ServerSpec::Stdio(github)), &secrets)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("lists `REMOTE` in `inheritEnv`") && err.contains("server `remote`"),
            "{err}"
        );
    }

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
