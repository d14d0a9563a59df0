//! `mcpctl get projects|servers|prompts` and `mcpctl describe project|server|prompt NAME`:
//! reading the store. `-o yaml` prints documents that `mcpctl apply -f` takes back unchanged.

use std::io::Write as _;

use anyhow::Context as _;
use mcp_middleware::chain::layers_of;
use mcpctl::store::validate::{chain_configs, find_model};
use mcpctl::store::{
    Kind, Project, ProjectSpec, Prompt, PromptSpec, Resource, Server, ServerSpec, Spec, Store,
};
use serde_json::{Value, json};

use crate::cli::{DescribeArgs, GetArgs};
use crate::output::{Output, print_documents, print_table};

/// The store named by the environment.
pub(crate) fn store() -> anyhow::Result<Store> {
    Ok(Store::from_env()?)
}

/// How long a command that changed the store waits for the running proxies to reload it.
const RELOAD_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Returns once every proxy that follows `store` runs its current revision (so a tool the
/// change hid is refused from the next request on); an error naming each proxy that refused
/// the change (it runs the configuration before it). A proxy still reloading after
/// [`RELOAD_WAIT`] is named in a warning: the change is stored either way.
pub(crate) fn wait_until_in_force(store: &Store) -> anyhow::Result<()> {
    let revision = store.revision();
    let behind = mcpctl::store::running::wait_until_in_force(store, revision, RELOAD_WAIT);
    let (refused, late): (Vec<_>, Vec<_>) = behind.into_iter().partition(|b| b.refused.is_some());
    for proxy in &late {
        tracing::warn!("{proxy} (waited {} s)", RELOAD_WAIT.as_secs());
    }
    if refused.is_empty() {
        return Ok(());
    }
    let reasons: Vec<String> = refused.iter().map(ToString::to_string).collect();
    anyhow::bail!("the change is stored, but {}", reasons.join("; and "))
}

/// A resource as its YAML/JSON document.
pub(crate) fn document<S: Spec>(resource: &Resource<S>) -> anyhow::Result<Value> {
    serde_json::to_value(resource.to_document())
        .with_context(|| format!("cannot show {} `{}`", S::KIND, resource.name))
}

/// Lists resources of one kind.
pub(crate) fn get<S: Listed>(args: &GetArgs) -> anyhow::Result<()> {
    let store = store()?;
    let resources: Vec<Resource<S>> = if args.names.is_empty() {
        store.list()?
    } else {
        args.names
            .iter()
            .map(|name| store.get(name))
            .collect::<Result<_, _>>()?
    };
    match args.output.output {
        Output::Table => {
            let rows: Vec<Vec<String>> = resources.iter().map(S::row).collect();
            if rows.is_empty() {
                eprintln!("no {} in {}", S::KIND.plural(), store.root().display());
                return Ok(());
            }
            print_table(S::HEADER, &rows)
        }
        output => {
            let documents = resources
                .iter()
                .map(document)
                .collect::<anyhow::Result<Vec<_>>>()?;
            print_documents(output, &documents, args.names.len() == 1)
        }
    }
}

/// How a kind is shown in `get`'s table.
pub(crate) trait Listed: Spec {
    /// The column names.
    const HEADER: &'static [&'static str];
    /// One row.
    fn row(resource: &Resource<Self>) -> Vec<String>;
}

impl Listed for ProjectSpec {
    const HEADER: &'static [&'static str] = &["NAME", "PROXYMODEL", "SERVERS", "PROMPTS"];
    fn row(p: &Project) -> Vec<String> {
        vec![
            p.name.clone(),
            p.spec.model().to_owned(),
            or_dash(p.spec.servers.join(",")),
            or_dash(p.spec.prompts.join(",")),
        ]
    }
}

impl Listed for ServerSpec {
    const HEADER: &'static [&'static str] = &["NAME", "TRANSPORT", "TARGET"];
    fn row(s: &Server) -> Vec<String> {
        vec![
            s.name.clone(),
            s.spec.transport().to_owned(),
            s.spec.target(),
        ]
    }
}

impl Listed for PromptSpec {
    const HEADER: &'static [&'static str] = &["NAME", "TAGS", "BYTES"];
    fn row(p: &Prompt) -> Vec<String> {
        vec![
            p.name.clone(),
            or_dash(p.spec.tags.join(",")),
            p.spec.content.len().to_string(),
        ]
    }
}

/// `describe project NAME`.
pub(crate) fn describe_project(args: &DescribeArgs) -> anyhow::Result<()> {
    let store = store()?;
    let project = store.get::<ProjectSpec>(&args.name)?;
    let servers: Vec<Server> = project
        .spec
        .servers
        .iter()
        .map(|n| store.get::<ServerSpec>(n))
        .collect::<Result<_, _>>()?;
    let prompts: Vec<Prompt> = project
        .spec
        .prompts
        .iter()
        .map(|n| store.get::<PromptSpec>(n))
        .collect::<Result<_, _>>()?;
    // The model may have gone from this binary since the project was applied: say so, don't fail.
    let (chain, configs, model_error) = match find_model(&project) {
        Ok(model) => {
            let configs = chain_configs(&project.spec, model);
            let chain: Vec<&str> = layers_of(model).iter().map(|l| l.name).collect();
            (chain, Some(configs), None)
        }
        Err(err) => (Vec::new(), None, Some(err.to_string())),
    };
    let file = store.path_of(Kind::Project, &project.name);
    let status = server_status(&store, &project.name, &project.spec.servers);
    let eras = crate::eras::server_eras(&store, &project.name, &project.spec.servers);
    if args.output.output != Output::Table {
        let mut described = document(&project)?;
        described["status"] = json!({
            "file": file.display().to_string(),
            "chain": chain,
            "modelError": model_error,
            "effectiveConfig": configs.as_ref().map(|c| Value::Object(c.configs.clone())),
            "unusedConfig": configs.as_ref().map(|c| c.ignored.clone()).unwrap_or_default(),
            "servers": servers.iter().map(|s| json!({
                "name": s.name, "transport": s.spec.transport(), "target": s.spec.target(),
            })).collect::<Vec<_>>(),
            "prompts": prompts.iter().map(|p| json!({
                "name": p.name, "tags": p.spec.tags, "bytes": p.spec.content.len(),
            })).collect::<Vec<_>>(),
            "serverStatus": status,
            "serverEras": eras,
        });
        return print_documents(args.output.output, &[described], true);
    }
    let spec = &project.spec;
    let mut out = std::io::stdout().lock();
    writeln!(out, "Name:                {}", project.name)?;
    writeln!(out, "File:                {}", file.display())?;
    writeln!(out, "Proxy model:         {}", spec.model())?;
    match &model_error {
        Some(err) => writeln!(out, "Chain:               (unavailable: {err})")?,
        None => writeln!(out, "Chain:               {}", chain.join(" -> "))?,
    }
    writeln!(out, "Namespace separator: {}", spec.separator())?;
    writeln!(out, "Servers:")?;
    if servers.is_empty() {
        writeln!(out, "  (none)")?;
    }
    for server in &servers {
        writeln!(
            out,
            "  {}  {}  {}",
            server.name,
            server.spec.transport(),
            server.spec.target()
        )?;
    }
    if let Some(Value::Array(states)) = &status {
        writeln!(
            out,
            "Server status (as the last proxy of this project saw it):"
        )?;
        for state in states {
            let field = |key: &str| state.get(key).and_then(Value::as_str).unwrap_or("-");
            match state.get("reason").and_then(Value::as_str) {
                Some(reason) => writeln!(out, "  {}  {}: {reason}", field("name"), field("state"))?,
                None => writeln!(out, "  {}  {}", field("name"), field("state"))?,
            }
        }
    }
    if let Some(Value::Array(eras)) = &eras {
        writeln!(out, "Server eras (as last seen, not probed now):")?;
        for seen in eras {
            let name = seen.get("name").and_then(Value::as_str).unwrap_or("-");
            writeln!(out, "  {name}  {}", crate::eras::describe(seen))?;
        }
    }
    writeln!(out, "Prompts:")?;
    if prompts.is_empty() {
        writeln!(out, "  (none)")?;
    }
    for prompt in &prompts {
        writeln!(
            out,
            "  {}  [{}]  {} bytes",
            prompt.name,
            prompt.spec.tags.join(", "),
            prompt.spec.content.len()
        )?;
    }
    writeln!(
        out,
        "Always visible:      {}",
        or_dash(spec.always_visible.join(", "))
    )?;
    writeln!(out, "Config (as stored):")?;
    write_yaml(&mut out, &serde_json::to_value(&spec.config)?, "  ")?;
    if let Some(configs) = &configs {
        writeln!(out, "Config (what the chain gets):")?;
        write_yaml(&mut out, &Value::Object(configs.configs.clone()), "  ")?;
        if !configs.ignored.is_empty() {
            writeln!(
                out,
                "Unused config:       {} (not in the chain)",
                configs.ignored.join(", ")
            )?;
        }
        if configs.always_visible_unused {
            writeln!(
                out,
                "Unused:              alwaysVisible (no gate in the chain)"
            )?;
        }
    }
    if !spec.routes.is_empty() {
        writeln!(out, "Routes:")?;
        writeln!(
            out,
            "  hidden:       {}",
            or_dash(spec.routes.hidden.join(", "))
        )?;
        writeln!(
            out,
            "  passThrough:  {}",
            or_dash(spec.routes.pass_through.join(", "))
        )?;
        for entry in &spec.routes.restricted {
            writeln!(out, "  restricted:   {}", restriction(entry))?;
        }
    }
    if let Some(listen) = &spec.listen {
        writeln!(out, "Listen:              {listen}")?;
    }
    if let Some(llm) = &spec.llm {
        // The key as stored: a `${env:VAR}` reference (apply refuses anything else).
        let key = llm.api_key.as_deref().unwrap_or("-");
        writeln!(
            out,
            "LLM endpoint:        {} (model {}, key {key})",
            llm.url, llm.model
        )?;
    }
    Ok(())
}

/// `describe server NAME`. Values are shown exactly as stored: `${env:VAR}` stays a placeholder.
pub(crate) fn describe_server(args: &DescribeArgs) -> anyhow::Result<()> {
    let store = store()?;
    let server = store.get::<ServerSpec>(&args.name)?;
    let used_by = users(&store, |p| p.spec.servers.contains(&server.name))?;
    let secrets = placeholders(&server.spec);
    if args.output.output != Output::Table {
        let mut described = document(&server)?;
        described["status"] = json!({
            "file": store.path_of(Kind::Server, &server.name).display().to_string(),
            "usedBy": used_by,
            "environmentVariables": secrets,
        });
        return print_documents(args.output.output, &[described], true);
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "Name:       {}", server.name)?;
    writeln!(
        out,
        "File:       {}",
        store.path_of(Kind::Server, &server.name).display()
    )?;
    writeln!(out, "Transport:  {}", server.spec.transport())?;
    match &server.spec {
        ServerSpec::Stdio(stdio) => {
            writeln!(out, "Command:    {}", stdio.command)?;
            writeln!(out, "Args:       {}", or_dash(quote_all(&stdio.args)))?;
            writeln!(out, "Cwd:        {}", stdio.cwd.as_deref().unwrap_or("-"))?;
            writeln!(out, "Env:")?;
            if stdio.env.is_empty() {
                writeln!(out, "  (none)")?;
            }
            for (key, value) in &stdio.env {
                writeln!(out, "  {key}={value}")?;
            }
            writeln!(
                out,
                "Inherits:   {} (the SDK default set){}",
                mcp_middleware::upstream::DEFAULT_INHERITED.join(", "),
                if stdio.inherit_env.is_empty() {
                    String::new()
                } else {
                    format!(", and {} (inheritEnv)", stdio.inherit_env.join(", "))
                }
            )?;
        }
        ServerSpec::Http(http) => {
            writeln!(out, "URL:        {}", http.url)?;
            writeln!(out, "Headers:")?;
            if http.headers.is_empty() {
                writeln!(out, "  (none)")?;
            }
            for (key, value) in &http.headers {
                writeln!(out, "  {key}: {value}")?;
            }
            if let Some(exchange) = http.auth.as_ref().and_then(|a| a.token_exchange.as_ref()) {
                // As written: the secret is a `${env:VAR}` reference, never its value.
                writeln!(
                    out,
                    "Token exchange: {} as client `{}` (secret {}){}",
                    exchange.endpoint,
                    exchange.client_id,
                    exchange.client_secret,
                    [
                        ("audience", &exchange.audience),
                        ("scope", &exchange.scope),
                        ("resource", &exchange.resource)
                    ]
                    .iter()
                    .filter_map(|(k, v)| v.as_ref().map(|v| format!(", {k} {v}")))
                    .collect::<String>()
                )?;
            }
        }
    }
    if !secrets.is_empty() {
        writeln!(
            out,
            "From env:   {} (resolved only by the proxy, when it starts the server)",
            secrets.join(", ")
        )?;
    }
    writeln!(out, "Used by:    {}", or_dash(used_by.join(", ")))?;
    Ok(())
}

/// `describe prompt NAME`.
pub(crate) fn describe_prompt(args: &DescribeArgs) -> anyhow::Result<()> {
    let store = store()?;
    let prompt = store.get::<PromptSpec>(&args.name)?;
    let used_by = users(&store, |p| p.spec.prompts.contains(&prompt.name))?;
    if args.output.output != Output::Table {
        let mut described = document(&prompt)?;
        described["status"] = json!({
            "file": store.path_of(Kind::Prompt, &prompt.name).display().to_string(),
            "usedBy": used_by,
            "bytes": prompt.spec.content.len(),
        });
        return print_documents(args.output.output, &[described], true);
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "Name:     {}", prompt.name)?;
    writeln!(out, "Tags:     {}", or_dash(prompt.spec.tags.join(", ")))?;
    writeln!(out, "Bytes:    {}", prompt.spec.content.len())?;
    writeln!(out, "Used by:  {}", or_dash(used_by.join(", ")))?;
    writeln!(out, "Content:")?;
    for line in prompt.spec.content.lines() {
        writeln!(out, "  {line}")?;
    }
    Ok(())
}

/// The servers' states written by the last proxy of a project with several servers, if any,
/// for the servers it has now.
fn server_status(store: &Store, project: &str, servers: &[String]) -> Option<Value> {
    let text = std::fs::read_to_string(crate::proxy::status_file(store, project)).ok()?;
    let Value::Array(states) = serde_json::from_str(&text).ok()? else {
        return None;
    };
    let current: Vec<Value> = states
        .into_iter()
        .filter(|s| {
            s.get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| servers.iter().any(|server| server == n))
        })
        .collect();
    (!current.is_empty()).then_some(Value::Array(current))
}

fn users(store: &Store, uses: impl Fn(&Project) -> bool) -> anyhow::Result<Vec<String>> {
    Ok(store
        .list::<ProjectSpec>()?
        .into_iter()
        .filter(|p| uses(p))
        .map(|p| p.name)
        .collect())
}

/// The variables named by `${env:VAR}` placeholders in a server's values, sorted, once each.
fn placeholders(spec: &ServerSpec) -> Vec<String> {
    let values: Vec<&String> = match spec {
        ServerSpec::Stdio(s) => std::iter::once(&s.command)
            .chain(s.args.iter())
            .chain(s.env.values())
            .chain(s.cwd.iter())
            .collect(),
        ServerSpec::Http(h) => std::iter::once(&h.url)
            .chain(h.headers.values())
            .chain(
                h.auth
                    .iter()
                    .filter_map(|a| a.token_exchange.as_ref())
                    .map(|t| &t.client_secret),
            )
            .collect(),
    };
    let mut names: Vec<String> = values
        .into_iter()
        .flat_map(|value| mcp_middleware::upstream::env_references(value).map(str::to_owned))
        .collect();
    names.sort();
    names.dedup();
    names
}

fn write_yaml(out: &mut impl std::io::Write, value: &Value, indent: &str) -> anyhow::Result<()> {
    if value.as_object().is_some_and(|m| m.is_empty()) {
        writeln!(out, "{indent}(none)")?;
        return Ok(());
    }
    for line in yaml_serde::to_string(value)?.lines() {
        writeln!(out, "{indent}{line}")?;
    }
    Ok(())
}

fn quote_all(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if a.is_empty() || a.contains(char::is_whitespace) {
                format!("{a:?}")
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// One `routes.restricted` entry on a line: its names, then who may see them.
fn restriction(entry: &mcp_middleware::routing::Restriction) -> String {
    let names: Vec<&str> = entry.names.iter().map(|n| n.as_str()).collect();
    let mut who = Vec::new();
    if let Some(scopes) = &entry.scopes {
        who.push(format!("scopes {}", scopes.join(" | ")));
    }
    if let Some(principals) = &entry.principals {
        who.push(format!("principals {}", principals.join(" | ")));
    }
    if let Some(claims) = &entry.claims {
        let claims: Vec<String> = claims.iter().map(|(k, v)| format!("{k}={v}")).collect();
        who.push(format!("claims {}", claims.join(" & ")));
    }
    format!("{} only for {}", names.join(", "), who.join(" and "))
}

pub(crate) fn or_dash(text: String) -> String {
    if text.is_empty() {
        "-".to_owned()
    } else {
        text
    }
}
