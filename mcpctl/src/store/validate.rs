//! Checks a project against the rest of the store and the models linked into this binary:
//! every server and prompt it names exists, its `proxyModel` is registered, and the model
//! accepts its config.

use std::collections::BTreeSet;

use mcp_middleware::ProxyError;
use mcp_middleware::chain::{Chain, layers_of};
use mcp_middleware::registry::{self, ModelDescriptor};
use serde_json::{Map, Value};

use super::error::StoreError;
use super::project::ProjectSpec;
use super::resource::{Kind, Project};

/// The model that `alwaysVisible` configures.
pub const GATE_MODEL: &str = "gate";

/// The configs a project hands its model's chain.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChainConfigs {
    /// By model name, only models in the chain; gate's `alwaysVisible` includes the project's.
    pub configs: Map<String, Value>,
    /// Models the project has config for that are not in the chain (kept, not used).
    pub ignored: Vec<String>,
    /// Whether the project's `alwaysVisible` went unused (no gate in the chain).
    pub always_visible_unused: bool,
}

/// Finds a project's model in the registry.
pub fn find_model(project: &Project) -> Result<&'static ModelDescriptor, StoreError> {
    // Refer to the stock models so their registrations are linked into whatever uses the store.
    let _ = mcp_middleware_models::all();
    let name = project.spec.model();
    registry::find(name).map_err(|err| match err {
        ProxyError::UnknownModel { known, .. } => StoreError::UnknownModel {
            project: project.name.clone(),
            model: name.to_owned(),
            from_gated: project.spec.legacy_gated == Some(true),
            known,
        },
        other => StoreError::BadConfig {
            project: project.name.clone(),
            message: other.to_string(),
        },
    })
}

/// The configs `spec` gives `model`'s chain: its `config` entries for models in the chain,
/// with `alwaysVisible` appended to gate's `alwaysVisible` when gate is in the chain.
pub fn chain_configs(spec: &ProjectSpec, model: &'static ModelDescriptor) -> ChainConfigs {
    let layers: Vec<&str> = layers_of(model).iter().map(|l| l.name).collect();
    let mut out = ChainConfigs::default();
    for (name, value) in &spec.config {
        if layers.contains(&name.as_str()) {
            out.configs.insert(name.clone(), value.clone());
        } else {
            out.ignored.push(name.clone());
        }
    }
    if spec.always_visible.is_empty() {
        return out;
    }
    if !layers.contains(&GATE_MODEL) {
        out.always_visible_unused = true;
        return out;
    }
    let gate = out
        .configs
        .entry(GATE_MODEL.to_owned())
        .or_insert_with(|| Value::Object(Map::new()));
    if !gate.is_object() {
        *gate = Value::Object(Map::new());
    }
    if let Value::Object(gate) = gate {
        let list = gate
            .entry("alwaysVisible".to_owned())
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(list) = list {
            for tool in &spec.always_visible {
                let tool = Value::String(tool.clone());
                if !list.contains(&tool) {
                    list.push(tool);
                }
            }
        }
    }
    out
}

/// Checks `project` against the servers and prompts that will exist, the registry, and its
/// model's config. Returns the chain configs (for warnings about unused ones).
pub fn check_project(
    project: &Project,
    servers: &BTreeSet<String>,
    prompts: &BTreeSet<String>,
) -> Result<ChainConfigs, StoreError> {
    for (kind, names, known) in [
        (Kind::Server, &project.spec.servers, servers),
        (Kind::Prompt, &project.spec.prompts, prompts),
    ] {
        if let Some(missing) = names.iter().find(|n| !known.contains(*n)) {
            return Err(StoreError::UnknownReference {
                project: project.name.clone(),
                kind,
                name: missing.clone(),
            });
        }
    }
    let model = find_model(project)?;
    let configs = chain_configs(&project.spec, model);
    Chain::new(model, &configs.configs).map_err(|err| StoreError::BadConfig {
        project: project.name.clone(),
        message: err.to_string(),
    })?;
    Ok(configs)
}

/// Logs (as warnings) what a project configures that its model will not use.
pub fn warn_unused(project: &Project, configs: &ChainConfigs) {
    for model in &configs.ignored {
        tracing::warn!(
            "project `{}`: the config for `{model}` is kept but unused: `{model}` is not in the chain of proxy model `{}`",
            project.name,
            project.spec.model()
        );
    }
    if configs.always_visible_unused {
        tracing::warn!(
            "project `{}`: `alwaysVisible` is kept but unused: proxy model `{}` does not include `{GATE_MODEL}`",
            project.name,
            project.spec.model()
        );
    }
}
