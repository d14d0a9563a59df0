//! How `mcpctl client` prints a step's result: `-o json` and `-o yaml` print the result as it
//! came (one document per step), `-o table` prints it for people (tables for lists, the text
//! of tool results, resources and prompt messages).

use std::io::Write as _;

use serde_json::Value;

use super::steps::Step;
use crate::output::{Output, print_table};

/// Prints `result`, the `index`th printed result of the session.
pub(super) fn result(
    step: &Step,
    result: &Value,
    output: Output,
    index: usize,
) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match output {
        Output::Json => {
            writeln!(out, "{}", serde_json::to_string_pretty(result)?)?;
            return Ok(());
        }
        Output::Yaml => {
            if index > 0 {
                writeln!(out, "---")?;
            }
            write!(out, "{}", yaml_serde::to_string(result)?)?;
            return Ok(());
        }
        Output::Table => {}
    }
    drop(out);
    let method = match step {
        Step::Info => "initialize",
        Step::Request { method, .. } => method.as_str(),
        Step::Notify { .. } | Step::Sleep(_) => return Ok(()),
    };
    match method {
        "initialize" => info(result),
        "tools/list" => table(
            result,
            "tools",
            &["NAME", "DESCRIPTION"],
            &[&["name"], &["description"]],
        ),
        "resources/list" => table(
            result,
            "resources",
            &["URI", "NAME", "MIMETYPE"],
            &[&["uri"], &["name"], &["mimeType"]],
        ),
        "resources/templates/list" => table(
            result,
            "resourceTemplates",
            &["URITEMPLATE", "NAME", "MIMETYPE"],
            &[&["uriTemplate"], &["name"], &["mimeType"]],
        ),
        "prompts/list" => prompts_list(result),
        "tools/call" => tool_result(result),
        "resources/read" => contents(result.get("contents")),
        "prompts/get" => prompt(result),
        _ => {
            crate::output::outln!("{}", serde_json::to_string_pretty(result)?)?;
            Ok(())
        }
    }
}

fn info(result: &Value) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    let server = result.get("serverInfo").cloned().unwrap_or(Value::Null);
    writeln!(
        out,
        "Server:        {} {}",
        text(server.get("name")),
        text(server.get("version"))
    )?;
    writeln!(
        out,
        "Protocol:      {}",
        text(result.get("protocolVersion"))
    )?;
    let capabilities: Vec<String> = result
        .get("capabilities")
        .and_then(Value::as_object)
        .map(|caps| {
            caps.iter()
                .map(|(name, value)| match value.as_object() {
                    Some(flags) if !flags.is_empty() => format!(
                        "{name} ({})",
                        flags.keys().cloned().collect::<Vec<_>>().join(", ")
                    ),
                    _ => name.clone(),
                })
                .collect()
        })
        .unwrap_or_default();
    writeln!(out, "Capabilities:  {}", capabilities.join(", "))?;
    if let Some(instructions) = result.get("instructions").and_then(Value::as_str) {
        writeln!(out, "Instructions:")?;
        for line in instructions.lines() {
            writeln!(out, "  {line}")?;
        }
    }
    Ok(())
}

fn table(result: &Value, member: &str, header: &[&str], columns: &[&[&str]]) -> anyhow::Result<()> {
    let items = result
        .get(member)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if items.is_empty() {
        eprintln!("(no {member})");
        return Ok(());
    }
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|item| {
            columns
                .iter()
                .map(|path| first_line(&text(path.iter().try_fold(item, |v, k| v.get(*k)))))
                .collect()
        })
        .collect();
    print_table(header, &rows)
}

fn prompts_list(result: &Value) -> anyhow::Result<()> {
    let items = result
        .get("prompts")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if items.is_empty() {
        eprintln!("(no prompts)");
        return Ok(());
    }
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|prompt| {
            let arguments: Vec<String> = prompt
                .get("arguments")
                .and_then(Value::as_array)
                .map(|args| {
                    args.iter()
                        .map(|a| {
                            let required = a.get("required").and_then(Value::as_bool) == Some(true);
                            format!("{}{}", text(a.get("name")), if required { "*" } else { "" })
                        })
                        .collect()
                })
                .unwrap_or_default();
            vec![
                text(prompt.get("name")),
                if arguments.is_empty() {
                    "-".to_owned()
                } else {
                    arguments.join(",")
                },
                first_line(&text(prompt.get("description"))),
            ]
        })
        .collect();
    print_table(&["NAME", "ARGUMENTS", "DESCRIPTION"], &rows)
}

fn tool_result(result: &Value) -> anyhow::Result<()> {
    let blocks = result
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for block in &blocks {
        content_block(block)?;
    }
    if blocks.is_empty()
        && let Some(structured) = result.get("structuredContent")
    {
        crate::output::outln!("{}", serde_json::to_string_pretty(structured)?)?;
    }
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        eprintln!("mcpctl client: the tool answered with an error (isError: true)");
    }
    Ok(())
}

fn content_block(block: &Value) -> anyhow::Result<()> {
    match block.get("type").and_then(Value::as_str) {
        Some("text") => crate::output::outln!("{}", text(block.get("text")))?,
        Some(kind @ ("image" | "audio")) => crate::output::outln!(
            "[{kind} {}, {} bytes of base64]",
            text(block.get("mimeType")),
            block
                .get("data")
                .and_then(Value::as_str)
                .map_or(0, str::len)
        )?,
        Some("resource") => contents(
            block
                .get("resource")
                .map(|r| Value::Array(vec![r.clone()]))
                .as_ref(),
        )?,
        Some("resource_link") => crate::output::outln!(
            "[resource link {} {}]",
            text(block.get("uri")),
            text(block.get("name"))
        )?,
        _ => crate::output::outln!("{block}")?,
    }
    Ok(())
}

fn contents(contents: Option<&Value>) -> anyhow::Result<()> {
    for item in contents
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
    {
        if let Some(body) = item.get("text").and_then(Value::as_str) {
            crate::output::outln!("{body}")?;
        } else {
            crate::output::outln!(
                "[{} {}, {} bytes of base64]",
                text(item.get("uri")),
                text(item.get("mimeType")),
                item.get("blob").and_then(Value::as_str).map_or(0, str::len)
            )?;
        }
    }
    Ok(())
}

fn prompt(result: &Value) -> anyhow::Result<()> {
    if let Some(description) = result.get("description").and_then(Value::as_str) {
        crate::output::outln!("# {description}")?;
    }
    for message in result
        .get("messages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
    {
        crate::output::out!("{}: ", text(message.get("role")))?;
        match message.get("content") {
            Some(block) => content_block(block)?,
            None => crate::output::outln!()?,
        }
    }
    Ok(())
}

/// A JSON value as text: strings bare, absent as `-`, others as JSON.
fn text(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "-".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    if line.chars().count() > 100 {
        format!("{}...", line.chars().take(97).collect::<String>())
    } else {
        line.to_owned()
    }
}
