//! `mcpctl install CLIENT PROJECT`: the client's entry for serving a project through mcpctl,
//! printed, or written into the client's file in place (everything else in it kept, in its
//! order; the old file kept as `FILE.bak`; the new one replaced atomically).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use mcpctl::store::{ProjectSpec, ServerSpec, Store, valid_name};
use serde_json::{Map, Value, json};

use super::{Client, jsonc};

/// `install`'s arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct InstallArgs {
    /// The client.
    #[arg(value_enum)]
    client: Client,
    /// The project to serve.
    project: String,
    /// Print the entry (in the shape of the client's file) instead of editing the file.
    #[arg(long)]
    print: bool,
    /// Connect the client to the project served over HTTP at this URL (`mcpctl serve`)
    /// instead of having it start `mcpctl proxy PROJECT`.
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// Edit this file instead of the client's usual one.
    #[arg(long, value_name = "PATH", conflicts_with = "print")]
    file: Option<PathBuf>,
}

/// Runs `mcpctl install`.
pub(crate) fn run(args: &InstallArgs) -> anyhow::Result<()> {
    let entry = match &args.url {
        Some(url) => {
            if !valid_name(&args.project) {
                bail!("`{}` is not a valid project name", args.project);
            }
            http_entry(args.client, url)?
        }
        None => {
            let store = Store::from_env()?;
            let project = store.get::<ProjectSpec>(&args.project)?;
            let variables = variables(&store, &project.spec)?;
            if !variables.is_empty() {
                eprintln!(
                    "mcpctl: note: project `{}`'s servers read {} from the environment: {} must start mcpctl with them set (in the entry's `env`, or in its own environment)",
                    args.project,
                    variables.join(", "),
                    args.client.title()
                );
            }
            stdio_entry(args.client, &args.project)?
        }
    };
    if args.print {
        let document = json!({ args.client.servers_key(): { &args.project: entry } });
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}", serde_json::to_string_pretty(&document)?)?;
        return Ok(());
    }
    let path = match &args.file {
        Some(path) => path.clone(),
        None => args.client.default_path()?,
    };
    let outcome = edit_file(&path, args.client, &args.project, entry)?;
    crate::output::outln!("{outcome}")?;
    Ok(())
}

/// The entry that has the client start `mcpctl proxy PROJECT` (this very binary, by its
/// absolute path, with this store).
pub(crate) fn stdio_entry(client: Client, project: &str) -> anyhow::Result<Value> {
    let exe = std::env::current_exe().context("cannot find the path of mcpctl itself")?;
    let mut entry = Map::new();
    if matches!(client, Client::ClaudeCode | Client::Vscode) {
        entry.insert("type".to_owned(), json!("stdio"));
    }
    entry.insert("command".to_owned(), json!(exe.display().to_string()));
    entry.insert("args".to_owned(), json!(["proxy", project]));
    // The client starts mcpctl with its own environment: a store outside the default place
    // must be named, or the proxy would not find the project.
    if let Some(home) = std::env::var_os(mcpctl::store::HOME_VAR).filter(|h| !h.is_empty()) {
        let home = std::path::absolute(PathBuf::from(&home)).unwrap_or_else(|_| home.into());
        entry.insert(
            "env".to_owned(),
            json!({ mcpctl::store::HOME_VAR: home.display().to_string() }),
        );
    }
    Ok(Value::Object(entry))
}

/// The entry that has the client connect to a project served at `url`.
pub(crate) fn http_entry(client: Client, url: &str) -> anyhow::Result<Value> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        bail!("--url `{url}` is not an http:// or https:// URL");
    }
    Ok(match client {
        Client::ClaudeDesktop => bail!(
            "Claude Desktop's file lists only servers it starts; leave out --url (it will start `mcpctl proxy`), or add the URL in Claude Desktop's Connectors settings"
        ),
        Client::Cursor => json!({ "url": url }),
        Client::ClaudeCode | Client::Vscode => json!({ "type": "http", "url": url }),
    })
}

/// The variables the project's servers read, sorted, once each.
fn variables(store: &Store, project: &ProjectSpec) -> anyhow::Result<Vec<String>> {
    let mut names = Vec::new();
    for server in &project.servers {
        let spec = store.get::<ServerSpec>(server)?.spec;
        let text = serde_json::to_string(&spec)?;
        names.extend(mcp_middleware::upstream::env_references(&text).map(str::to_owned));
    }
    names.sort();
    names.dedup();
    Ok(names)
}

/// Sets `project`'s entry in the client's file at `path`, keeping the rest; says what it did.
pub(crate) fn edit_file(
    path: &Path,
    client: Client,
    project: &str,
    entry: Value,
) -> anyhow::Result<String> {
    let shown = path.display();
    let old = match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("cannot read {shown}")),
    };
    let mut root = match &old {
        None => Map::new(),
        Some(text) => {
            let stripped = jsonc::strip(text).with_context(|| format!("{shown} is not JSON"))?;
            if stripped.had_comments {
                bail!(
                    "{shown} has comments, which rewriting it would lose: nothing was changed; print the entry with `mcpctl install {} {project} --print` and add it by hand",
                    clap::ValueEnum::to_possible_value(&client)
                        .map(|v| v.get_name().to_owned())
                        .unwrap_or_default()
                );
            }
            match serde_json::from_str(&stripped.text)
                .with_context(|| format!("{shown} is not JSON"))?
            {
                Value::Object(root) => root,
                _ => bail!("{shown}: expected a JSON object at the top level"),
            }
        }
    };
    let key = client.servers_key();
    let servers = root
        .entry(key.to_owned())
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(servers) = servers else {
        bail!("{shown}: `{key}` is not an object of servers by name: nothing was changed");
    };
    let action = match servers.get(project) {
        Some(same) if *same == entry => {
            return Ok(format!(
                "`{project}` in {shown} is already this entry: unchanged"
            ));
        }
        Some(_) => "replaced in",
        None => "added to",
    };
    servers.insert(project.to_owned(), entry);
    let text = format!("{}\n", serde_json::to_string_pretty(&Value::Object(root))?);
    // Write through a symbolic link (a dotfiles manager's), not over it.
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    let mut backup = String::new();
    if old.is_some() {
        let bak = with_suffix(&target, ".bak");
        std::fs::copy(&target, &bak)
            .with_context(|| format!("cannot back {shown} up to {}", bak.display()))?;
        backup = format!(" (the old file is {})", bak.display());
    }
    crate::store::files::write_atomic(&target, &text)?;
    Ok(format!("`{project}` {action} {shown}{backup}"))
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("mcpctl-install-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn an_entry_goes_in_beside_the_rest_in_order() {
        let dir = scratch("order");
        let file = dir.join("mcp.json");
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let old = r#"{"z": 1, "mcpServers": {"b": {"command": "b"}, "a": {"url": "http://a"}}, "y": [2]}"#;
        std::fs::write(&file, old).unwrap_or_else(|e| panic!("{e}"));
        let said = edit_file(&file, Client::Cursor, "demo", json!({"command": "mcpctl"}))
            .unwrap_or_else(|e| panic!("{e:#}"));
        assert!(said.contains("added to") && said.contains(".bak"), "{said}");
        let new = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{e}"));
        let order: Vec<usize> = [
            "\"z\"",
            "\"mcpServers\"",
            "\"b\"",
            "\"a\"",
            "\"demo\"",
            "\"y\"",
        ]
        .iter()
        .map(|k| new.find(k).unwrap_or_else(|| panic!("{k} in {new}")))
        .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{new}");
        assert_eq!(
            std::fs::read_to_string(dir.join("mcp.json.bak")).unwrap_or_default(),
            old
        );
        let again = edit_file(&file, Client::Cursor, "demo", json!({"command": "mcpctl"}))
            .unwrap_or_else(|e| panic!("{e:#}"));
        assert!(again.contains("unchanged"), "{again}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn comments_are_not_rewritten_away() {
        let dir = scratch("comments");
        let file = dir.join("mcp.json");
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let old = "{\n  // mine\n  \"servers\": {}\n}\n";
        std::fs::write(&file, old).unwrap_or_else(|e| panic!("{e}"));
        let err = edit_file(&file, Client::Vscode, "demo", json!({}))
            .err()
            .map(|e| format!("{e:#}"))
            .unwrap_or_default();
        assert!(err.contains("comments") && err.contains("--print"), "{err}");
        assert_eq!(std::fs::read_to_string(&file).unwrap_or_default(), old);
        assert!(!dir.join("mcp.json.bak").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_new_file_is_created_with_the_clients_key() {
        let dir = scratch("new");
        let file = dir.join(".vscode").join("mcp.json");
        edit_file(
            &file,
            Client::Vscode,
            "demo",
            json!({"type": "http", "url": "http://x"}),
        )
        .unwrap_or_else(|e| panic!("{e:#}"));
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            value,
            json!({"servers": {"demo": {"type": "http", "url": "http://x"}}})
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn http_entries_per_client() {
        assert_eq!(
            http_entry(Client::Cursor, "http://h/mcp").ok(),
            Some(json!({"url": "http://h/mcp"}))
        );
        assert_eq!(
            http_entry(Client::ClaudeCode, "http://h/mcp").ok(),
            Some(json!({"type": "http", "url": "http://h/mcp"}))
        );
        assert!(http_entry(Client::ClaudeDesktop, "http://h/mcp").is_err());
        assert!(http_entry(Client::Vscode, "ftp://h").is_err());
    }
}
