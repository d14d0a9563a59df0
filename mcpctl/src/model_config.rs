//! Model configuration given on the command line: `--config FILE` (YAML or JSON, a map from
//! model name to that model's config) and `--set MODEL.FIELD=VALUE`. The proxy checks the result
//! against each model's `Config` when it starts.

use std::path::Path;

use anyhow::{Context as _, bail};
use serde_json::{Map, Value};

/// Reads `--config` and applies each `--set` on top, in order.
pub(crate) fn load(file: Option<&Path>, sets: &[String]) -> anyhow::Result<Map<String, Value>> {
    let mut configs = match file {
        Some(path) => read_file(path)?,
        None => Map::new(),
    };
    for set in sets {
        apply_set(&mut configs, set)?;
    }
    Ok(configs)
}

fn read_file(path: &Path) -> anyhow::Result<Map<String, Value>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the config file {}", path.display()))?;
    // YAML is a superset of JSON, so one parser reads both.
    let value: Value = yaml_serde::from_str(&text)
        .map_err(|err| anyhow::anyhow!("config file {}: {err}", path.display()))?;
    match value {
        Value::Object(map) => Ok(map),
        Value::Null => Ok(Map::new()),
        other => bail!(
            "config file {}: expected a map from model name to its config, found {}",
            path.display(),
            kind(&other)
        ),
    }
}

/// `MODEL.FIELD[.SUB...]=VALUE`; the value is read as JSON when it parses (numbers, booleans,
/// lists), else taken as a string.
fn apply_set(configs: &mut Map<String, Value>, set: &str) -> anyhow::Result<()> {
    let Some((path, raw)) = set.split_once('=') else {
        bail!("--set `{set}`: expected MODEL.FIELD=VALUE");
    };
    let mut keys = path.split('.');
    let (Some(model), Some(first)) = (keys.next(), keys.next()) else {
        bail!("--set `{set}`: expected MODEL.FIELD=VALUE (the model name, a dot, the field)");
    };
    if model.is_empty() || first.is_empty() {
        bail!("--set `{set}`: the model and field names must not be empty");
    }
    let value = serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()));
    let mut slot = configs
        .entry(model.to_owned())
        .or_insert_with(|| Value::Object(Map::new()));
    for key in std::iter::once(first).chain(keys) {
        if !slot.is_object() {
            bail!("--set `{set}`: `{key}` is inside a value that is not a map");
        }
        let Value::Object(map) = slot else {
            unreachable!("checked above")
        };
        slot = map
            .entry(key.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    *slot = value;
    Ok(())
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a map",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_nest_and_parse_json_values() {
        let configs = load(
            None,
            &[
                "paginate.pageSize=100".to_owned(),
                "gate.budget.bytes=2048".to_owned(),
                "gate.name=hello world".to_owned(),
            ],
        )
        .unwrap();
        assert_eq!(configs["paginate"]["pageSize"], 100);
        assert_eq!(configs["gate"]["budget"]["bytes"], 2048);
        assert_eq!(configs["gate"]["name"], "hello world");
    }

    #[test]
    fn a_set_without_a_field_is_refused() {
        let err = load(None, &["gate=1".to_owned()]).unwrap_err();
        assert!(err.to_string().contains("MODEL.FIELD=VALUE"), "{err}");
    }
}
