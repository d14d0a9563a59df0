//! `mcpctl import FILE`: the MCP servers a client's configuration file lists, as `Server`
//! resources and a `Project` holding them.
//!
//! Secrets stay out of the store: every literal `env` or header value becomes a `${env:VAR}`
//! reference (resolved only by the proxy, from its environment), as do the values of
//! secret-looking flags (`--api-key=...`), query parameters (`?token=...`) and passwords in URLs
//! (`postgres://user:PASSWORD@host`). The command prints the variables to set.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use mcpctl::store::{
    AnyResource, Kind, ProjectSpec, Resource, Server, ServerSpec, Store, valid_name,
};
use serde_json::{Map, Value, json};

use super::{jsonc, upper_snake};

/// `import`'s arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct ImportArgs {
    /// The client's file: Claude Desktop's `claude_desktop_config.json`, Claude Code's
    /// `.mcp.json`, Cursor's `mcp.json` or VS Code's `.vscode/mcp.json`.
    file: PathBuf,
    /// The project's name (default: the file's name, `claude_desktop_config.json` ->
    /// `claude-desktop-config`; `claude-code`, `cursor` or `vscode` for `.mcp.json`,
    /// `.cursor/mcp.json` or `.vscode/mcp.json`).
    #[arg(long, value_name = "NAME")]
    project: Option<String>,
    /// Replace servers and a project that already exist with these names (refused otherwise).
    #[arg(long)]
    overwrite: bool,
}

/// A variable the imported servers read, to set where mcpctl runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Variable {
    /// Its name.
    pub(crate) name: String,
    /// The server that reads it.
    pub(crate) server: String,
    /// What it stands for in the file.
    pub(crate) from: String,
}

/// What a client's file holds, as mcpctl resources.
#[derive(Debug, Default)]
pub(crate) struct Imported {
    /// One per entry, in the file's order.
    pub(crate) servers: Vec<Server>,
    /// The variables to set, in the order first met.
    pub(crate) variables: Vec<Variable>,
    /// Entries skipped, names changed, keys ignored.
    pub(crate) notes: Vec<String>,
}

/// Runs `mcpctl import`.
pub(crate) fn run(args: &ImportArgs) -> anyhow::Result<()> {
    let label = args.file.display().to_string();
    let text =
        std::fs::read_to_string(&args.file).with_context(|| format!("cannot read {label}"))?;
    let absolute = std::path::absolute(&args.file).unwrap_or_else(|_| args.file.clone());
    let imported = read(&label, &text, &workspace_of(&absolute))?;
    let project = match &args.project {
        Some(name) if valid_name(name) => name.clone(),
        Some(name) => bail!(
            "--project `{name}` is not a valid name: 1 to 63 letters, digits, `-`, `_` or `.`, starting with a letter or digit"
        ),
        None => project_name(&absolute),
    };
    let store = Store::from_env()?;
    if !args.overwrite {
        refuse_existing(&store, &imported, &project)?;
    }
    let mut resources: Vec<AnyResource> = imported
        .servers
        .iter()
        .cloned()
        .map(AnyResource::Server)
        .collect();
    resources.push(AnyResource::Project(Resource {
        name: project.clone(),
        spec: ProjectSpec {
            servers: imported.servers.iter().map(|s| s.name.clone()).collect(),
            ..ProjectSpec::default()
        },
    }));
    for note in &imported.notes {
        eprintln!("mcpctl: note: {note}");
    }
    for applied in store.apply(resources)? {
        crate::output::outln!("{applied}")?;
    }
    if !imported.variables.is_empty() {
        crate::output::outln!(
            "\nThe servers read these variables; set them where mcpctl runs (the store keeps only their names):"
        )?;
        let rows: Vec<Vec<String>> = imported
            .variables
            .iter()
            .map(|v| vec![v.name.clone(), v.server.clone(), v.from.clone()])
            .collect();
        crate::output::print_table(&["VARIABLE", "SERVER", "FROM"], &rows)?;
    }
    crate::output::outln!("\nTry it: mcpctl client {project} tools list")?;
    Ok(())
}

/// Refuses to replace what exists, naming all of it at once.
fn refuse_existing(store: &Store, imported: &Imported, project: &str) -> anyhow::Result<()> {
    let mut existing: Vec<String> = imported
        .servers
        .iter()
        .filter(|s| store.path_of(Kind::Server, &s.name).is_file())
        .map(|s| format!("server/{}", s.name))
        .collect();
    if store.path_of(Kind::Project, project).is_file() {
        existing.push(format!("project/{project}"));
    }
    if !existing.is_empty() {
        bail!(
            "{} already {} in {}: nothing was imported; run again with --overwrite to replace {}{}",
            existing.join(", "),
            if existing.len() == 1 {
                "exists"
            } else {
                "exist"
            },
            store.root().display(),
            if existing.len() == 1 { "it" } else { "them" },
            if existing.iter().any(|e| e.starts_with("project/")) {
                ", or name the project with --project"
            } else {
                ""
            }
        );
    }
    Ok(())
}

/// VS Code's `${workspaceFolder}` for a file: the folder holding `.vscode/`, else the file's own.
fn workspace_of(file: &Path) -> PathBuf {
    let dir = file.parent().unwrap_or(Path::new("."));
    match dir.file_name() {
        Some(name) if name == ".vscode" => dir.parent().unwrap_or(dir).to_owned(),
        _ => dir.to_owned(),
    }
}

/// The default project name: the client's name for the files named alike by every project
/// (`.mcp.json` -> `claude-code`, `.cursor/mcp.json` -> `cursor`, `.vscode/mcp.json` ->
/// `vscode`), else the file's stem, lower-cased, `_` as `-`, leading dots dropped.
pub(crate) fn project_name(file: &Path) -> String {
    let name = file.file_name().map(|s| s.to_string_lossy().into_owned());
    let dir = file
        .parent()
        .and_then(Path::file_name)
        .map(|s| s.to_string_lossy().into_owned());
    match (name.as_deref(), dir.as_deref()) {
        (Some(".mcp.json"), _) => return "claude-code".to_owned(),
        (Some("mcp.json"), Some(".cursor")) => return "cursor".to_owned(),
        (Some("mcp.json"), Some(".vscode")) => return "vscode".to_owned(),
        _ => {}
    }
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    sanitize(&stem.replace('_', "-"), "imported")
}

/// `name` made a valid resource name: other characters become `-`, leading ones that cannot
/// start a name are dropped, at most 63 characters; `empty` when nothing is left.
fn sanitize(name: &str, empty: &str) -> String {
    let mapped: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let trimmed: String = mapped
        .trim_start_matches(|c: char| !c.is_ascii_alphanumeric())
        .chars()
        .take(63)
        .collect();
    if trimmed.is_empty() {
        empty.to_owned()
    } else {
        trimmed
    }
}

/// Reads a client's file (`label` names it in errors) into servers. `workspace` is what VS
/// Code's `${workspaceFolder}` stands for.
pub(crate) fn read(label: &str, text: &str, workspace: &Path) -> anyhow::Result<Imported> {
    let stripped = jsonc::strip(text).with_context(|| format!("{label} is not JSON"))?;
    let root: Value =
        serde_json::from_str(&stripped.text).with_context(|| format!("{label} is not JSON"))?;
    let Value::Object(root) = root else {
        bail!("{label}: expected a JSON object at the top level");
    };
    let (key, entries) = match (root.get("mcpServers"), root.get("servers")) {
        (Some(servers), _) => ("mcpServers", servers),
        (None, Some(servers)) => ("servers", servers),
        (None, None) => bail!(
            "{label}: no `mcpServers` (Claude Desktop, Claude Code, Cursor) or `servers` (VS Code) object at the top level"
        ),
    };
    let Value::Object(entries) = entries else {
        bail!("{label}: `{key}` is not an object of servers by name");
    };
    let mut reader = Reader {
        label,
        workspace,
        inputs: inputs(&root),
        taken: BTreeMap::new(),
        imported: Imported::default(),
    };
    for (name, entry) in entries {
        let server = sanitize(name, "server");
        if reader.imported.servers.iter().any(|s| s.name == server) {
            bail!("{label}: servers `{name}` and another both become `{server}`: rename one");
        }
        if let Some(spec) = reader
            .server(&server, entry)
            .with_context(|| format!("{label}: server `{name}`"))?
        {
            if server != *name {
                reader
                    .imported
                    .notes
                    .push(format!("server `{name}` is imported as `{server}`"));
            }
            reader
                .imported
                .servers
                .push(Resource { name: server, spec });
        }
    }
    if reader.imported.servers.is_empty() {
        bail!("{label}: no servers to import under `{key}`");
    }
    Ok(reader.imported)
}

/// VS Code's `inputs`, id -> description.
fn inputs(root: &Map<String, Value>) -> BTreeMap<String, String> {
    root.get("inputs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|input| {
            let id = input.get("id")?.as_str()?;
            let description = input.get("description").and_then(Value::as_str);
            Some((id.to_owned(), description.unwrap_or_default().to_owned()))
        })
        .collect()
}

/// Keys an entry may have that mcpctl does not use; dropped with a note.
const KNOWN_IGNORED: &[&str] = &[
    "disabled",
    "autoApprove",
    "alwaysAllow",
    "timeout",
    "description",
    "gallery",
    "version",
    "dev",
    "oauth",
];

struct Reader<'a> {
    label: &'a str,
    workspace: &'a Path,
    inputs: BTreeMap<String, String>,
    /// Variable names handed out, with the literal each stands for (`None`: the file's own
    /// reference), so two different secrets never share a name.
    taken: BTreeMap<String, Option<String>>,
    imported: Imported,
}

impl Reader<'_> {
    /// One entry as a server spec, or `None` when it is skipped.
    fn server(&mut self, name: &str, entry: &Value) -> anyhow::Result<Option<ServerSpec>> {
        let Value::Object(entry) = entry else {
            bail!("expected an object with `command` (stdio) or `url` (HTTP)");
        };
        if entry.get("disabled") == Some(&Value::Bool(true)) {
            self.imported.notes.push(format!(
                "server `{name}` is disabled in {}: skipped",
                self.label
            ));
            return Ok(None);
        }
        let kind = entry.get("type").map(|t| t.as_str().unwrap_or("?"));
        let stdio = match (
            kind,
            entry.contains_key("command"),
            entry.contains_key("url"),
        ) {
            (Some("stdio"), _, true) => bail!("`type: stdio` with a `url`"),
            (Some("stdio"), false, _) => bail!("`type: stdio` without a `command`"),
            (Some("stdio"), true, false) => true,
            (Some("http" | "sse" | "streamable-http" | "streamableHttp"), true, _) => {
                bail!("`type: {}` with a `command`", kind.unwrap_or_default())
            }
            (Some("http" | "sse" | "streamable-http" | "streamableHttp"), false, false) => {
                bail!("`type: {}` without a `url`", kind.unwrap_or_default())
            }
            (Some("http" | "sse" | "streamable-http" | "streamableHttp"), false, true) => false,
            (Some(other), _, _) => {
                bail!("unknown `type` `{other}`: expected `stdio`, `http` or `sse`")
            }
            (None, true, true) => bail!("both `command` (stdio) and `url` (HTTP): keep one"),
            (None, false, false) => bail!("neither `command` (stdio) nor `url` (HTTP)"),
            (None, command, _) => command,
        };
        if kind == Some("sse") {
            self.imported.notes.push(format!(
                "server `{name}` is `type: sse` (the older HTTP+SSE transport); mcpctl speaks streamable HTTP to its `url`"
            ));
        }
        let fields: &[&str] = if stdio {
            &["type", "command", "args", "env", "cwd", "envFile"]
        } else {
            &["type", "url", "headers"]
        };
        let ignored: Vec<&str> = entry
            .keys()
            .map(String::as_str)
            .filter(|k| !fields.contains(k))
            .collect();
        if !ignored.is_empty() {
            let unknown = ignored.iter().any(|k| !KNOWN_IGNORED.contains(k));
            self.imported.notes.push(format!(
                "server `{name}`: {} not used by mcpctl{}: ignored",
                ignored
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                if unknown { " (or unknown)" } else { "" }
            ));
        }
        let spec = if stdio {
            self.stdio(name, entry)?
        } else {
            self.http(name, entry)?
        };
        if spec.is_null() {
            return Ok(None);
        }
        serde_json::from_value(spec)
            .map(Some)
            .map_err(anyhow::Error::from)
    }

    fn stdio(&mut self, name: &str, entry: &Map<String, Value>) -> anyhow::Result<Value> {
        let command = self.expand(
            name,
            "command",
            string(entry, "command")?.unwrap_or_default(),
        )?;
        let mut args = Vec::new();
        for (i, arg) in strings(entry, "args")?.iter().enumerate() {
            args.push(self.expand(name, &format!("args[{i}]"), arg)?);
        }
        if is_mcpctl(&command) && args.first().is_some_and(|a| a == "proxy") {
            self.imported.notes.push(format!(
                "server `{name}` is mcpctl itself serving {}: skipped",
                args.get(1)
                    .map_or("a project".to_owned(), |p| format!("project `{p}`"))
            ));
            return Ok(Value::Null);
        }
        self.hide_arguments(name, &mut args);
        let mut env = BTreeMap::new();
        for (key, value) in string_map(entry, "env")? {
            let value = self.expand(name, &format!("env.{key}"), &value)?;
            // The variable is named after the key; another server's different value under the
            // same key gets the server's name in front.
            let names = [env_name(&key), upper_snake(&format!("{name}_{key}"))];
            let value = self.hide(name, &names, value, format!("env {key}"));
            env.insert(key, value);
        }
        if let Some(file) = string(entry, "envFile")? {
            let file = self.expand(name, "envFile", file)?;
            for key in env_file_keys(&self.workspace.join(&file))? {
                if !env.contains_key(&key) {
                    self.reference(name, &key, format!("envFile {file}"));
                    env.insert(key.clone(), format!("${{env:{key}}}"));
                }
            }
        }
        let cwd = match string(entry, "cwd")? {
            Some(cwd) => Some(self.expand(name, "cwd", cwd)?),
            None => None,
        };
        let mut spec = json!({"command": command, "args": args, "env": env});
        if let Some(cwd) = cwd {
            spec["cwd"] = json!(cwd);
        }
        Ok(spec)
    }

    fn http(&mut self, name: &str, entry: &Map<String, Value>) -> anyhow::Result<Value> {
        let url = self.expand(name, "url", string(entry, "url")?.unwrap_or_default())?;
        let url = self.hide_in_url(name, "url", &url);
        let mut headers = BTreeMap::new();
        for (header, value) in string_map(entry, "headers")? {
            let value = self.expand(name, &format!("headers.{header}"), &value)?;
            let names = [upper_snake(&format!("{name}_{header}"))];
            let scheme = ["authorization", "proxy-authorization"]
                .contains(&header.to_ascii_lowercase().as_str())
                .then(|| value.split_once(' '))
                .flatten()
                .filter(|(scheme, rest)| {
                    !rest.is_empty() && scheme.chars().all(|c| c.is_ascii_alphabetic())
                });
            let value = match scheme {
                // `Bearer TOKEN` keeps its scheme: the variable holds the token alone.
                Some((scheme, token)) if !token.contains("${env:") => {
                    let from = format!("header {header}, after `{scheme} `");
                    format!("{scheme} {}", self.literal(name, &names, token, from))
                }
                _ => self.hide(name, &names, value, format!("header {header}")),
            };
            headers.insert(header, value);
        }
        Ok(json!({"url": url, "headers": headers}))
    }

    /// A value kept when it already reads a variable, else replaced by one named after `key`.
    fn hide(&mut self, server: &str, names: &[String], value: String, from: String) -> String {
        // An empty value holds no secret; one that reads a variable already is kept as it is.
        if value.is_empty() || value.contains("${env:") {
            return value;
        }
        self.literal(server, names, &value, from)
    }

    /// `${env:VAR}` standing for the literal `value`: VAR is the first of `names` that no
    /// other value has, else the last with a number added.
    fn literal(&mut self, server: &str, names: &[String], value: &str, from: String) -> String {
        let last = names.last().cloned().unwrap_or_else(|| "VALUE".to_owned());
        let mut attempt = 0;
        loop {
            let var = match names.get(attempt) {
                Some(name) => name.clone(),
                None => format!("{last}_{}", attempt + 2 - names.len()),
            };
            attempt += 1;
            match self.taken.get(&var) {
                None => {
                    self.taken.insert(var.clone(), Some(value.to_owned()));
                    self.imported.variables.push(Variable {
                        name: var.clone(),
                        server: server.to_owned(),
                        from,
                    });
                    return format!("${{env:{var}}}");
                }
                Some(Some(same)) if same == value => return format!("${{env:{var}}}"),
                Some(_) => {}
            }
        }
    }

    /// Records that `server` reads the variable `var` the file itself named.
    fn reference(&mut self, server: &str, var: &str, from: String) {
        let listed = self
            .imported
            .variables
            .iter()
            .any(|v| v.name == var && v.server == server);
        self.taken.entry(var.to_owned()).or_insert(None);
        if !listed {
            self.imported.variables.push(Variable {
                name: var.to_owned(),
                server: server.to_owned(),
                from,
            });
        }
    }

    /// Replaces the client's placeholders in `text` with mcpctl's: `${env:VAR}` and Claude
    /// Code's `${VAR}` (a `:-default` is dropped) read VAR; VS Code's `${input:ID}` reads
    /// `ID` in upper snake case; `${workspaceFolder}` and `${userHome}` become paths.
    fn expand(&mut self, server: &str, field: &str, text: &str) -> anyhow::Result<String> {
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                out.push_str(&rest[start..]);
                rest = "";
                break;
            };
            let inner = &after[..end];
            rest = &after[end + 1..];
            if let Some(var) = inner.strip_prefix("env:") {
                if !valid_variable(var) {
                    bail!("`${{{inner}}}` in {field} does not name an environment variable");
                }
                self.reference(server, var, format!("`${{env:{var}}}` in {field}"));
                out.push_str(&format!("${{env:{var}}}"));
            } else if let Some(id) = inner.strip_prefix("input:") {
                let var = upper_snake(id);
                let from = match self.inputs.get(id).filter(|d| !d.is_empty()) {
                    Some(description) => format!("VS Code input `{id}` ({description})"),
                    None => format!("VS Code input `{id}`"),
                };
                self.reference(server, &var, from);
                out.push_str(&format!("${{env:{var}}}"));
            } else if inner == "workspaceFolder" {
                out.push_str(&self.workspace.display().to_string());
            } else if inner == "userHome" {
                out.push_str(&super::home()?.display().to_string());
            } else {
                let (var, default) = match inner.split_once(":-") {
                    Some((var, default)) => (var, Some(default)),
                    None => (inner, None),
                };
                if !valid_variable(var) {
                    bail!(
                        "`${{{inner}}}` in {field} is not a placeholder mcpctl knows (`${{env:VAR}}`, `${{VAR}}`, `${{input:ID}}`, `${{workspaceFolder}}`, `${{userHome}}`)"
                    );
                }
                let from = match default {
                    Some(default) => {
                        format!("`${{{var}}}` in {field} (its default `{default}` is not kept)")
                    }
                    None => format!("`${{{var}}}` in {field}"),
                };
                self.reference(server, var, from);
                out.push_str(&format!("${{env:{var}}}"));
            }
        }
        out.push_str(rest);
        Ok(out)
    }

    /// Secret-looking flags' values (`--api-key=X`, `--token X`) and URL passwords in
    /// arguments become references.
    fn hide_arguments(&mut self, server: &str, args: &mut [String]) {
        let mut i = 0;
        while i < args.len() {
            let arg = args[i].clone();
            if arg.starts_with('-') {
                let flag_name = arg.trim_start_matches('-');
                if let Some((flag, value)) = flag_name.split_once('=') {
                    if secret_name(flag) && !value.is_empty() && !value.contains("${env:") {
                        let names = [upper_snake(&format!("{server}_{flag}"))];
                        let reference =
                            self.literal(server, &names, value, format!("argument --{flag}"));
                        args[i] = format!("{}={reference}", &arg[..arg.len() - value.len() - 1]);
                    }
                } else if secret_name(flag_name)
                    && let Some(next) = args.get(i + 1).cloned()
                    && !next.starts_with('-')
                    && !next.contains("${env:")
                {
                    let names = [upper_snake(&format!("{server}_{flag_name}"))];
                    args[i + 1] =
                        self.literal(server, &names, &next, format!("argument after {arg}"));
                    i += 1;
                }
            } else {
                args[i] = self.hide_in_url(server, &format!("args[{i}]"), &arg);
            }
            i += 1;
        }
    }

    /// A URL's password (`scheme://user:PASSWORD@host`) and secret-looking query parameters
    /// (`?api_key=X`) become references.
    fn hide_in_url(&mut self, server: &str, field: &str, text: &str) -> String {
        let Some(scheme_end) = text.find("://") else {
            return text.to_owned();
        };
        let authority_start = scheme_end + 3;
        let authority_end = text[authority_start..]
            .find(['/', '?', '#'])
            .map_or(text.len(), |i| authority_start + i);
        let mut out = text[..authority_start].to_owned();
        let authority = &text[authority_start..authority_end];
        match authority.rsplit_once('@').and_then(|(info, host)| {
            info.split_once(':')
                .map(|(user, password)| (user, password, host))
        }) {
            Some((user, password, host))
                if !password.is_empty() && !password.contains("${env:") =>
            {
                let names = [upper_snake(&format!("{server}_password"))];
                let reference = self.literal(
                    server,
                    &names,
                    password,
                    format!("password in the URL of {field}"),
                );
                out.push_str(&format!("{user}:{reference}@{host}"));
            }
            _ => out.push_str(authority),
        }
        let rest = &text[authority_end..];
        let Some((path, query)) = rest.split_once('?') else {
            out.push_str(rest);
            return out;
        };
        let (query, fragment) = match query.split_once('#') {
            Some((query, fragment)) => (query, Some(fragment)),
            None => (query, None),
        };
        out.push_str(path);
        out.push('?');
        let params: Vec<String> = query
            .split('&')
            .map(|param| match param.split_once('=') {
                Some((key, value))
                    if secret_name(key) && !value.is_empty() && !value.contains("${env:") =>
                {
                    let names = [upper_snake(&format!("{server}_{key}"))];
                    let reference = self.literal(
                        server,
                        &names,
                        value,
                        format!("query parameter {key} of {field}"),
                    );
                    format!("{key}={reference}")
                }
                _ => param.to_owned(),
            })
            .collect();
        out.push_str(&params.join("&"));
        if let Some(fragment) = fragment {
            out.push('#');
            out.push_str(fragment);
        }
        out
    }
}

/// Whether a flag or parameter name looks like it carries a secret.
/// Names of files holding one (`--token-file`) are not: a path is no secret.
fn secret_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase().replace('_', "-");
    let secret = [
        "token",
        "secret",
        "password",
        "passwd",
        "apikey",
        "api-key",
        "access-key",
        "private-key",
        "credential",
        "authorization",
    ]
    .iter()
    .any(|word| name.contains(word));
    secret
        && !["file", "path", "dir"]
            .iter()
            .any(|word| name.ends_with(word))
}

/// Whether the command is an mcpctl binary (installed as `mcpctl`, or this very one).
fn is_mcpctl(command: &str) -> bool {
    let path = Path::new(command);
    path.file_stem().is_some_and(|s| s == "mcpctl")
        || std::env::current_exe().is_ok_and(|exe| exe == path)
}

/// An env key as a variable name: itself when it is one, else in upper snake case.
fn env_name(key: &str) -> String {
    if valid_variable(key) {
        key.to_owned()
    } else {
        upper_snake(key)
    }
}

fn valid_variable(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The variable names a `.env` file sets (`KEY=value`, `export KEY=value`, `#` comments).
fn env_file_keys(path: &Path) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read its envFile {}", path.display()))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .filter_map(|line| line.strip_prefix("export ").unwrap_or(line).split_once('='))
        .map(|(key, _)| key.trim().to_owned())
        .filter(|key| valid_variable(key))
        .collect())
}

fn string<'a>(entry: &'a Map<String, Value>, key: &str) -> anyhow::Result<Option<&'a str>> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => bail!("`{key}` is not a string"),
    }
}

fn strings(entry: &Map<String, Value>, key: &str) -> anyhow::Result<Vec<String>> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| scalar(item).with_context(|| format!("`{key}[{i}]` is not a string")))
            .collect(),
        Some(_) => bail!("`{key}` is not a list of strings"),
    }
}

fn string_map(entry: &Map<String, Value>, key: &str) -> anyhow::Result<Vec<(String, String)>> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| {
                scalar(v)
                    .map(|v| (k.clone(), v))
                    .with_context(|| format!("`{key}.{k}` is not a string"))
            })
            .collect(),
        Some(_) => bail!("`{key}` is not an object of strings"),
    }
}

/// A string, or a number or boolean written without quotes, as text.
fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
#[path = "import_tests.rs"]
mod tests;
