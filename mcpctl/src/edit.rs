//! `mcpctl edit project NAME --flag ...` and `mcpctl edit KIND NAME` (in an editor).
//!
//! A flag edit reads, changes, checks and writes the project under the store's lock, so two
//! edits at once (say `--add-server a` and `--add-server b`) both land.

use std::process::Command;

use anyhow::{Context as _, bail};
use mcpctl::store::{ProjectSpec, Resource, Spec, parse_documents, render};
use serde_json::{Map, Value};

use crate::resources::{store, wait_until_in_force};

/// What `edit project` changes. With no flag, the project opens in $VISUAL / $EDITOR.
#[derive(Debug, clap::Args)]
pub(crate) struct ProjectEdits {
    /// The project's name.
    name: String,
    /// Run this proxy model (`mcpctl get proxymodels` lists them).
    #[arg(
        long = "proxy-model",
        visible_alias = "proxyModel",
        value_name = "MODEL",
        group = "flags"
    )]
    proxy_model: Option<String>,
    /// Add a server (repeatable).
    #[arg(long, value_name = "SERVER", group = "flags")]
    add_server: Vec<String>,
    /// Remove a server (repeatable).
    #[arg(long, value_name = "SERVER", group = "flags")]
    remove_server: Vec<String>,
    /// Add a prompt (repeatable).
    #[arg(long, value_name = "PROMPT", group = "flags")]
    add_prompt: Vec<String>,
    /// Remove a prompt (repeatable).
    #[arg(long, value_name = "PROMPT", group = "flags")]
    remove_prompt: Vec<String>,
    /// Add an always-visible tool, a name or glob (repeatable).
    #[arg(long, value_name = "TOOL", group = "flags")]
    always_visible: Vec<String>,
    /// Remove an always-visible tool (repeatable).
    #[arg(long, value_name = "TOOL", group = "flags")]
    remove_always_visible: Vec<String>,
    /// Set one model config field, as MODEL.FIELD=VALUE (repeatable); VALUE is read as JSON
    /// when it parses, else as a string.
    #[arg(long, value_name = "MODEL.FIELD=VALUE", group = "flags")]
    set_config: Vec<String>,
    /// Remove a model's config (MODEL) or one field of it (MODEL.FIELD) (repeatable).
    #[arg(long, value_name = "MODEL[.FIELD]", group = "flags")]
    unset_config: Vec<String>,
    /// The separator in namespaced tool names (`server__tool`).
    #[arg(long, value_name = "SEP", group = "flags")]
    namespace_separator: Option<String>,
    /// The address `mcpctl serve` will listen on.
    #[arg(long, value_name = "ADDR", group = "flags")]
    listen: Option<String>,
}

impl ProjectEdits {
    fn is_empty(&self) -> bool {
        self.proxy_model.is_none()
            && self.add_server.is_empty()
            && self.remove_server.is_empty()
            && self.add_prompt.is_empty()
            && self.remove_prompt.is_empty()
            && self.always_visible.is_empty()
            && self.remove_always_visible.is_empty()
            && self.set_config.is_empty()
            && self.unset_config.is_empty()
            && self.namespace_separator.is_none()
            && self.listen.is_none()
    }

    /// Makes the changes on `spec`, or says which one cannot be made.
    fn apply_to(&self, spec: &mut ProjectSpec) -> Result<(), String> {
        if let Some(model) = &self.proxy_model {
            spec.proxy_model = Some(model.clone());
        }
        add(&mut spec.servers, &self.add_server);
        remove(&mut spec.servers, &self.remove_server, "server")?;
        add(&mut spec.prompts, &self.add_prompt);
        remove(&mut spec.prompts, &self.remove_prompt, "prompt")?;
        add(&mut spec.always_visible, &self.always_visible);
        remove(
            &mut spec.always_visible,
            &self.remove_always_visible,
            "always-visible tool",
        )?;
        for set in &self.set_config {
            set_config(&mut spec.config, set)?;
        }
        for unset in &self.unset_config {
            unset_config(&mut spec.config, unset)?;
        }
        if let Some(separator) = &self.namespace_separator {
            if separator.is_empty() || separator.chars().any(char::is_whitespace) {
                return Err(format!(
                    "--namespace-separator `{separator}` must be non-empty and without spaces"
                ));
            }
            spec.namespace_separator = Some(separator.clone());
        }
        if let Some(listen) = &self.listen {
            spec.listen = Some(listen.clone());
        }
        Ok(())
    }
}

/// `edit project`.
pub(crate) fn project(edits: ProjectEdits) -> anyhow::Result<()> {
    if edits.is_empty() {
        return in_editor::<ProjectSpec>(&edits.name);
    }
    let store = store()?;
    let applied = store.update::<ProjectSpec>(&edits.name, |spec| edits.apply_to(spec))?;
    crate::output::outln!("{applied}")?;
    wait_until_in_force(&store)
}

/// `edit KIND NAME` without flags: the resource's YAML in $VISUAL or $EDITOR (default `vi`),
/// applied when the editor exits successfully. Refused if someone else changed the resource
/// meanwhile, so no edit is lost silently.
pub(crate) fn in_editor<S: Spec>(name: &str) -> anyhow::Result<()> {
    let store = store()?;
    let before = store.get::<S>(name)?;
    let text = render(&before)?;
    let path = std::env::temp_dir().join(format!(
        "mcpctl-edit-{}-{}-{name}.yaml",
        std::process::id(),
        S::KIND
    ));
    std::fs::write(&path, &text).with_context(|| format!("cannot write {}", path.display()))?;
    let result = edit_file(&path).and_then(|()| {
        std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))
    });
    let _ = std::fs::remove_file(&path);
    let edited = result?;
    if edited == text {
        crate::output::outln!("{}/{name} unchanged (nothing edited)", S::KIND)?;
        return Ok(());
    }
    let mut resources = parse_documents("the edited file", &edited)?;
    let after = match (resources.pop(), resources.is_empty()) {
        (Some(resource), true) if resource.kind() == S::KIND && resource.name() == name => {
            S::from_any(resource)
        }
        _ => None,
    };
    let Some(after): Option<Resource<S>> = after else {
        bail!(
            "the edited file must hold {} `{name}` alone (to rename or add resources, use `mcpctl apply`)",
            S::KIND
        );
    };
    let applied = store.update::<S>(name, |spec| {
        if *spec != before.spec {
            return Err(
                "it was changed by someone else while you edited it; run edit again".to_owned(),
            );
        }
        *spec = after.spec;
        Ok(())
    })?;
    crate::output::outln!("{applied}")?;
    wait_until_in_force(&store)
}

fn edit_file(path: &std::path::Path) -> anyhow::Result<()> {
    let editor = std::env::var("VISUAL")
        .ok()
        .filter(|e| !e.trim().is_empty())
        .or_else(|| {
            std::env::var("EDITOR")
                .ok()
                .filter(|e| !e.trim().is_empty())
        })
        .unwrap_or_else(|| "vi".to_owned());
    // Through the shell, so an editor given with arguments (`code --wait`) works.
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("sh")
        .arg(path)
        .status()
        .with_context(|| format!("cannot run the editor `{editor}`"))?;
    if !status.success() {
        bail!("the editor `{editor}` failed ({status}); nothing was changed");
    }
    Ok(())
}

fn add(list: &mut Vec<String>, names: &[String]) {
    for name in names {
        if !list.contains(name) {
            list.push(name.clone());
        }
    }
}

fn remove(list: &mut Vec<String>, names: &[String], what: &str) -> Result<(), String> {
    for name in names {
        let Some(at) = list.iter().position(|n| n == name) else {
            return Err(format!("it has no {what} `{name}`"));
        };
        list.remove(at);
    }
    Ok(())
}

/// `MODEL.FIELD[.SUB...]=VALUE`: the value is JSON when it parses, else a string.
fn set_config(
    config: &mut std::collections::BTreeMap<String, Value>,
    set: &str,
) -> Result<(), String> {
    let usage = || format!("--set-config `{set}`: expected MODEL.FIELD=VALUE");
    let (path, raw) = set.split_once('=').ok_or_else(usage)?;
    let mut keys = path.split('.');
    let (Some(model), Some(first)) = (keys.next(), keys.next()) else {
        return Err(usage());
    };
    if model.is_empty() || first.is_empty() {
        return Err(usage());
    }
    let value = serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()));
    let mut slot = config
        .entry(model.to_owned())
        .or_insert_with(|| Value::Object(Map::new()));
    for key in std::iter::once(first).chain(keys) {
        if slot.is_null() {
            *slot = Value::Object(Map::new());
        }
        let Value::Object(map) = slot else {
            return Err(format!(
                "--set-config `{set}`: `{key}` is inside a value that is not a map"
            ));
        };
        slot = map.entry(key.to_owned()).or_insert(Value::Null);
    }
    *slot = value;
    Ok(())
}

fn unset_config(
    config: &mut std::collections::BTreeMap<String, Value>,
    unset: &str,
) -> Result<(), String> {
    let mut keys: Vec<&str> = unset.split('.').collect();
    let missing = || format!("--unset-config `{unset}`: there is no such config");
    if keys.len() == 1 {
        return config.remove(unset).map(|_| ()).ok_or_else(missing);
    }
    let last = keys.pop().unwrap_or_default();
    let mut slot = config.get_mut(keys[0]).ok_or_else(missing)?;
    for key in &keys[1..] {
        slot = slot.get_mut(*key).ok_or_else(missing)?;
    }
    slot.as_object_mut()
        .and_then(|map| map.remove(last))
        .map(|_| ())
        .ok_or_else(missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_and_unset_config_fields() {
        let mut config = std::collections::BTreeMap::new();
        set_config(&mut config, "gate.promptBudgetBytes=100").unwrap();
        set_config(&mut config, "gate.alwaysVisible=[\"a\"]").unwrap();
        set_config(&mut config, "paginate.deep.x=hello world").unwrap();
        assert_eq!(config["gate"]["promptBudgetBytes"], 100);
        assert_eq!(config["paginate"]["deep"]["x"], "hello world");
        unset_config(&mut config, "gate.promptBudgetBytes").unwrap();
        assert!(config["gate"].get("promptBudgetBytes").is_none());
        unset_config(&mut config, "paginate").unwrap();
        assert!(!config.contains_key("paginate"));
        assert!(unset_config(&mut config, "nope").is_err());
        assert!(set_config(&mut config, "gate=1").is_err());
        assert!(set_config(&mut config, "gate.alwaysVisible.x=1").is_err());
    }
}
