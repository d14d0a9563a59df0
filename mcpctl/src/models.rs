//! `mcpctl get proxymodels` and `mcpctl describe proxymodel NAME`: the models linked into this
//! binary, as the registry describes them. Models are code: the CLI lists them but
//! never creates or deletes them.

use std::io::Write as _;

use mcp_middleware::chain::{hook_plan, layers_of};
use mcp_middleware::registry::{self, ModelDescriptor};
use serde_json::{Value, json};

use crate::output::{Output, print_data, print_table};

/// One line per model.
pub(crate) fn get(output: Output) -> anyhow::Result<()> {
    let models = registry::models()?;
    match output {
        Output::Table => {
            let rows: Vec<Vec<String>> = models
                .iter()
                .map(|model| {
                    vec![
                        model.name.to_owned(),
                        or_dash(model.parent_names().join(",")),
                        or_dash(
                            model
                                .hooks
                                .iter()
                                .map(|h| h.name())
                                .collect::<Vec<_>>()
                                .join(","),
                        ),
                        or_dash(
                            model
                                .tools
                                .iter()
                                .map(|t| t.name)
                                .collect::<Vec<_>>()
                                .join(","),
                        ),
                        or_dash(model.observers.join(",")),
                        model.summary.to_owned(),
                    ]
                })
                .collect();
            print_table(
                &["NAME", "EXTENDS", "HOOKS", "TOOLS", "OBSERVERS", "SUMMARY"],
                &rows,
            )
        }
        _ => print_data(
            output,
            &Value::Array(models.iter().map(|model| summary(model)).collect()),
        ),
    }
}

/// Everything about one model.
pub(crate) fn describe(name: &str, output: Output) -> anyhow::Result<()> {
    let model = registry::find(name)?;
    let described = description(model);
    if output != Output::Table {
        return print_data(output, &described);
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "Name:        {}", model.name)?;
    writeln!(out, "Summary:     {}", model.summary)?;
    writeln!(out, "Crate:       {}", crate_of(model))?;
    writeln!(
        out,
        "Extends:     {}",
        or_dash(model.parent_names().join(", "))
    )?;
    let layers: Vec<&str> = layers_of(model).iter().map(|l| l.name).collect();
    writeln!(out, "Chain:       {}", layers.join(" -> "))?;
    writeln!(out, "Hooks:")?;
    let plan = hook_plan(model);
    if plan.is_empty() {
        writeln!(out, "  (none: every message passes through unchanged)")?;
    }
    for (hook, steps) in plan {
        writeln!(out, "  {:<28} {}", hook.name(), steps.join(" -> "))?;
    }
    writeln!(out, "Synthetic tools:")?;
    let tools = all_tools(model);
    if tools.is_empty() {
        writeln!(out, "  (none)")?;
    }
    for (owner, tool) in tools {
        writeln!(out, "  {} (from {owner}):", tool.name)?;
        for line in wrap(&first_paragraph(tool.description), DESCRIPTION_WIDTH) {
            writeln!(out, "    {line}")?;
        }
    }
    let observers: Vec<String> = layers_of(model)
        .iter()
        .flat_map(|l| l.observers.iter().map(move |o| format!("{}::{o}", l.name)))
        .collect();
    writeln!(out, "Observers:   {}", or_dash(observers.join(", ")))?;
    writeln!(out, "Config:")?;
    let mut any = false;
    for layer in layers_of(model) {
        if let Some(config) = &layer.config {
            any = true;
            writeln!(out, "  {}:", layer.name)?;
            let schema = yaml_serde::to_string(&(config.schema)())?;
            for line in schema.lines() {
                writeln!(out, "    {line}")?;
            }
        }
    }
    if !any {
        writeln!(out, "  (none)")?;
    }
    if !model.docs.is_empty() {
        writeln!(out, "Description:")?;
        for line in model.docs.lines() {
            writeln!(out, "  {line}")?;
        }
    }
    Ok(())
}

/// `mcpctl delete proxymodel NAME...`: always refused, with the reason.
pub(crate) fn refuse_delete(names: &[String]) -> anyhow::Result<()> {
    let named = names
        .iter()
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ");
    anyhow::bail!(
        "proxy models are code: they cannot be deleted ({named} is compiled into this mcpctl); \
         a project stops using one with `mcpctl edit project PROJECT --proxyModel OTHER`"
    )
}

pub(crate) fn summary(model: &ModelDescriptor) -> Value {
    json!({
        "name": model.name,
        "summary": model.summary,
        "extends": model.parent_names(),
        "hooks": model.hooks.iter().map(|h| h.name()).collect::<Vec<_>>(),
        "tools": model.tools.iter().map(|t| t.name).collect::<Vec<_>>(),
        "observers": model.observers,
    })
}

fn description(model: &'static ModelDescriptor) -> Value {
    let layers = layers_of(model);
    json!({
        "name": model.name,
        "summary": model.summary,
        "description": model.docs,
        "crate": crate_of(model),
        "extends": model.parent_names(),
        "chain": layers.iter().map(|l| l.name).collect::<Vec<_>>(),
        "hooks": model.hooks.iter().map(|h| h.name()).collect::<Vec<_>>(),
        "chained": model.chained.iter().map(|h| h.name()).collect::<Vec<_>>(),
        "plan": hook_plan(model)
            .into_iter()
            .map(|(hook, steps)| (hook.name().to_owned(), json!(steps)))
            .collect::<serde_json::Map<_, _>>(),
        "tools": all_tools(model)
            .into_iter()
            .map(|(owner, tool)| json!({
                "name": tool.name,
                "model": owner,
                "description": tool.description,
                "inputSchema": (tool.input_schema)(),
            }))
            .collect::<Vec<_>>(),
        "observers": layers
            .iter()
            .flat_map(|l| l.observers.iter().map(move |o| json!({"model": l.name, "name": o})))
            .collect::<Vec<_>>(),
        "config": layers
            .iter()
            .filter_map(|l| l.config.as_ref().map(|c| (l.name.to_owned(), json!({
                "schema": (c.schema)(),
            }))))
            .collect::<serde_json::Map<_, _>>(),
        // Which models keep per-session state (their types' paths are the crates' business).
        "state": layers
            .iter()
            .filter(|l| l.state.is_some())
            .map(|l| l.name)
            .collect::<Vec<_>>(),
    })
}

/// The synthetic tools a client sees through `model`, with the model that answers each (an
/// outer model's tool hides an inner one of the same name).
fn all_tools(
    model: &'static ModelDescriptor,
) -> Vec<(&'static str, &'static mcp_middleware::model::ToolDescriptor)> {
    let mut tools: Vec<(&'static str, &'static mcp_middleware::model::ToolDescriptor)> = Vec::new();
    for layer in layers_of(model) {
        for tool in layer.tools {
            if !tools.iter().any(|(_, seen)| seen.name == tool.name) {
                tools.push((layer.name, tool));
            }
        }
    }
    tools
}

fn or_dash(text: String) -> String {
    if text.is_empty() {
        "-".to_owned()
    } else {
        text
    }
}

/// The crate that defines `model`. The module path inside it is left out: it can name private
/// modules (`default_file::default`) that no user can write.
fn crate_of(model: &ModelDescriptor) -> &'static str {
    model
        .defined_at
        .split("::")
        .next()
        .unwrap_or(model.defined_at)
}

/// How wide `describe` wraps descriptions (after their indent).
const DESCRIPTION_WIDTH: usize = 88;

/// The first paragraph of `text` (up to a blank line), its lines joined by spaces.
fn first_paragraph(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .take_while(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `text` in lines of at most `width` characters, broken between words (a longer word gets a
/// line of its own).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_every_word_and_the_width() {
        let text = "Opens the session. Call this first, with what you are trying to do: it returns the prompts that fit.";
        let lines = wrap(text, 30);
        assert!(
            lines.iter().all(|line| line.chars().count() <= 30),
            "{lines:?}"
        );
        assert_eq!(lines.join(" "), text);
        assert_eq!(wrap("", 10), Vec::<String>::new());
        assert_eq!(
            wrap("averyveryverylongword x", 5),
            ["averyveryverylongword", "x"]
        );
    }

    #[test]
    fn the_first_paragraph_is_joined() {
        assert_eq!(first_paragraph("One\ntwo.\n\nThree."), "One two.");
    }
}
