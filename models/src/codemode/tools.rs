//! The four tools code mode shows: their definitions, and the answers of `overview`,
//! `search_tools` and `inspect` (plain text for an LLM, the same data as `structuredContent`).

use std::fmt::Write as _;

use mcp_middleware::types::{CallToolResult, ContentBlock, JsonObject, Tool};
use serde_json::{Value, json};

use super::catalog::Catalog;
use super::declare;
use super::search;

/// `overview`.
pub(crate) const OVERVIEW: &str = "overview";
/// `search_tools`.
pub(crate) const SEARCH: &str = "search_tools";
/// `inspect`.
pub(crate) const INSPECT: &str = "inspect";
/// `execute`.
pub(crate) const EXECUTE: &str = "execute";

fn schema(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

/// The four tools, as `tools/list` shows them.
pub(crate) fn definitions() -> Vec<Tool> {
    vec![
        Tool::new(
            OVERVIEW,
            "Start here. Lists every server of this proxy as a TypeScript namespace (its name, \
             what it is, how many tools, whether it is up), the limits of `execute`, and whether \
             snippets are type-checked.",
            schema(json!({"type": "object", "properties": {}, "additionalProperties": false})),
        ),
        Tool::new(
            SEARCH,
            "Finds tools by what they do. Returns the best matches as one-line TypeScript \
             signatures `namespace.method(args): result` with their descriptions.",
            schema(json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Words describing what you need, or a tool's name"},
                    "limit": {"type": "integer", "minimum": 1, "description": "How many matches at most (default 10)"}
                },
                "required": ["query"],
                "additionalProperties": false
            })),
        ),
        Tool::new(
            INSPECT,
            "Full TypeScript declarations (argument and result types, documentation) of tools \
             named like `everything.echo` or `everything[\"get-sum\"]`.",
            schema(json!({
                "type": "object",
                "properties": {
                    "names": {"type": "array", "items": {"type": "string"}, "description": "Qualified tool names: namespace.method or namespace.originalName"}
                },
                "required": ["names"],
                "additionalProperties": false
            })),
        ),
        Tool::new(
            EXECUTE,
            "Runs TypeScript in a sandbox. `code` is the body of an async function: `return` \
             gives the result, `await` works at the top. Each server is a global namespace and \
             each of its tools a method taking one object of arguments: \
             `const r = await everything.echo({ message: \"hi\" }); return r;`; a tool's \
             original name works by index: `everything[\"get-sum\"]({ a: 1, b: 2 })`. A call \
             returns the tool's structuredContent, or its text; a tool error throws an Error. \
             console.log is captured. No network, files or timers; nothing persists between \
             executes. `dryRun: true` checks the snippet without running it.",
            schema(json!({
                "type": "object",
                "properties": {
                    "code": {"type": "string", "description": "The body of an async function, in TypeScript"},
                    "dryRun": {"type": "boolean", "description": "Only check the snippet; run nothing"}
                },
                "required": ["code"],
                "additionalProperties": false
            })),
        ),
    ]
}

/// One server as `overview` reports it.
#[derive(Debug, Clone)]
pub(crate) struct ServerStatus {
    pub(crate) namespace: String,
    pub(crate) server: String,
    pub(crate) summary: String,
    pub(crate) tools: usize,
    /// `None`: up; else why it is not.
    pub(crate) error: Option<String>,
}

/// What `overview` says besides the servers.
#[derive(Debug, Clone)]
pub(crate) struct OverviewFacts {
    pub(crate) type_checking: Option<String>,
    pub(crate) limits: Value,
}

/// `overview`'s answer.
pub(crate) fn overview(servers: &[ServerStatus], facts: &OverviewFacts) -> CallToolResult {
    let mut text = String::from(
        "Code mode: call tools by writing TypeScript for `execute`. Each server below is a global \
         namespace; each tool is an async method taking one object of arguments.\n\nNamespaces:\n",
    );
    for server in servers {
        let status = match &server.error {
            None => "up".to_owned(),
            Some(error) => format!("DOWN: {error}"),
        };
        let _ = writeln!(
            text,
            "- {} (server `{}`): {} ({} tools; {status})",
            server.namespace, server.server, server.summary, server.tools
        );
    }
    let checking = match &facts.type_checking {
        Some(checker) => {
            format!("available ({checker}): snippets are type-checked before they run")
        }
        None => "not available: snippets are stripped of types and run unchecked".to_owned(),
    };
    let _ = write!(
        text,
        "\nType checking: {checking}.\nLimits per execute: {}.\nNext: `search_tools` to find \
         tools, `inspect` for their declarations, then `execute`.",
        limits_text(&facts.limits)
    );
    let structured = json!({
        "namespaces": servers.iter().map(|s| json!({
            "namespace": s.namespace,
            "server": s.server,
            "summary": s.summary,
            "toolCount": s.tools,
            "status": if s.error.is_some() { "error" } else { "ok" },
            "error": s.error,
        })).collect::<Vec<_>>(),
        "typeChecking": {"available": facts.type_checking.is_some(), "checker": facts.type_checking},
        "limits": facts.limits,
    });
    with_structured(text, structured)
}

fn limits_text(limits: &Value) -> String {
    limits
        .as_object()
        .map(|map| {
            map.iter()
                .map(|(key, value)| format!("{key} {value}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// `search_tools`' answer.
pub(crate) fn search(catalog: &Catalog, query: &str, limit: usize) -> CallToolResult {
    let found = search::search(catalog, query, limit);
    let mut text = if found.is_empty() {
        format!("No tool matches `{query}`. Try other words, or `overview` for the namespaces.")
    } else {
        let count = found.len();
        let noun = if count == 1 {
            "tool matches"
        } else {
            "tools match"
        };
        format!("{count} {noun} `{query}`, best first:\n")
    };
    let mut results = Vec::new();
    for (rank, (score, entry)) in found.iter().enumerate() {
        let signature = declare::signature(entry);
        let description = first_line(&entry.description);
        let _ = writeln!(text, "{}. {signature}\n   {description}", rank + 1);
        results.push(json!({
            "name": format!("{}.{}", entry.namespace, entry.method),
            "namespace": entry.namespace,
            "method": entry.method,
            "tool": entry.original,
            "signature": signature,
            "description": entry.description,
            "score": (score * 1000.0).round() / 1000.0,
        }));
    }
    with_structured(
        text.trim_end().to_owned(),
        json!({"query": query, "results": results}),
    )
}

/// `inspect`'s answer.
pub(crate) fn inspect(catalog: &Catalog, names: &[String]) -> CallToolResult {
    let mut by_namespace: Vec<(String, Vec<String>)> = Vec::new();
    let mut tools = Vec::new();
    let mut unknown = Vec::new();
    for name in names {
        let Some(entry) = catalog.find_qualified(name) else {
            let suggestions: Vec<String> = catalog
                .suggestions(name, 3)
                .into_iter()
                .map(declare::signature)
                .collect();
            unknown.push(json!({"name": name, "suggestions": suggestions}));
            continue;
        };
        let declaration = declare::declaration(entry);
        tools.push(json!({
            "name": format!("{}.{}", entry.namespace, entry.method),
            "namespace": entry.namespace,
            "method": entry.method,
            "tool": entry.original,
            "declaration": declaration,
        }));
        match by_namespace
            .iter_mut()
            .find(|(ns, _)| *ns == entry.namespace)
        {
            Some((_, declarations)) => declarations.push(declaration),
            None => by_namespace.push((entry.namespace.clone(), vec![declaration])),
        }
    }
    let declarations: String = by_namespace
        .iter()
        .map(|(ns, declarations)| declare::namespace_block(ns, declarations))
        .collect::<Vec<_>>()
        .join("\n");
    let mut text = declarations.clone();
    for missing in &unknown {
        let name = missing["name"].as_str().unwrap_or_default();
        let _ = write!(text, "\n// unknown: `{name}`");
        if let Some(Value::Array(suggestions)) = missing.get("suggestions")
            && !suggestions.is_empty()
        {
            text.push_str("; did you mean:");
            for suggestion in suggestions {
                let _ = write!(text, "\n//   {}", suggestion.as_str().unwrap_or_default());
            }
        }
    }
    let mut result = with_structured(
        text.trim().to_owned(),
        json!({"declarations": declarations, "tools": tools, "unknown": unknown}),
    );
    if tools.is_empty() {
        result.is_error = Some(true);
    }
    result
}

fn first_line(text: &str) -> &str {
    text.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
}

/// A text answer with the same data as `structuredContent`.
pub(crate) fn with_structured(text: String, structured: Value) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(structured);
    result
}

/// A tool error with a message.
pub(crate) fn error(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}
