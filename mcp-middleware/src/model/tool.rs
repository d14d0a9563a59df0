//! Synthetic tools: tools a model adds that the upstream does not have.
//!
//! A `#[tool]` function in a model becomes a [`ToolDescriptor`]. At the model's place in the
//! chain, just inside its own hooks, its tools are appended to `tools/list` (replacing an inner
//! tool of the same name) and calls to them are answered there: the model's own hooks and outer
//! models see them like any other tool, and may filter them.

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, ErrorData, JsonObject, ListToolsResult, Tool};
use serde::de::DeserializeOwned;

use super::hooks::HookResult;

/// A synthetic tool, as the registry and `tools/list` show it.
#[derive(Debug, Clone, Copy)]
pub struct ToolDescriptor {
    /// The tool's name.
    pub name: &'static str,
    /// Its description: the function's doc comment.
    pub description: &'static str,
    /// Its input schema, made from the argument type.
    pub input_schema: fn() -> JsonObject,
}

impl ToolDescriptor {
    /// The tool as `tools/list` lists it.
    pub fn to_tool(&self) -> Tool {
        let mut tool = Tool::default();
        tool.name = Cow::Borrowed(self.name);
        if !self.description.is_empty() {
            tool.description = Some(Cow::Borrowed(self.description));
        }
        tool.input_schema = Arc::new((self.input_schema)());
        tool
    }
}

/// Adds `tools` to a listing, replacing inner tools of the same names. On a paged listing they
/// come once, on the last page (the one without `nextCursor`); every page drops the inner tools
/// they replace.
pub(crate) fn list_into(listed: &mut ListToolsResult, tools: &[ToolDescriptor]) {
    listed
        .tools
        .retain(|tool| !tools.iter().any(|own| own.name == tool.name));
    if listed.next_cursor.is_none() {
        listed
            .tools
            .extend(tools.iter().map(ToolDescriptor::to_tool));
    }
}

/// The JSON schema of a tool's argument type, as an object.
pub fn input_schema<T: schemars::JsonSchema>() -> JsonObject {
    let schema = super::schema::root_schema_for::<T>();
    match serde_json::to_value(schema) {
        Ok(serde_json::Value::Object(mut map)) => {
            // MCP wants an object schema; `$schema` only adds bytes to every listing.
            map.remove("$schema");
            map.entry("type").or_insert_with(|| "object".into());
            map
        }
        _ => {
            let mut map = JsonObject::new();
            map.insert("type".into(), "object".into());
            map
        }
    }
}

/// The schema of a tool that takes no arguments.
pub fn no_arguments() -> JsonObject {
    let mut map = JsonObject::new();
    map.insert("type".into(), "object".into());
    map
}

/// Reads a synthetic tool's arguments into its argument type; a mismatch is `-32602 Invalid
/// params` naming the tool.
pub fn arguments<T: DeserializeOwned>(tool: &str, arguments: Option<JsonObject>) -> HookResult<T> {
    let value = serde_json::Value::Object(arguments.unwrap_or_default());
    serde_path_to_error::deserialize(value).map_err(|err| {
        let path = err.path().to_string();
        let at = if path == "." {
            String::new()
        } else {
            format!(" at `{path}`")
        };
        ErrorData::invalid_params(
            format!("invalid arguments for tool `{tool}`{at}: {}", err.inner()),
            None,
        )
    })
}

/// What a synthetic tool may return: a full [`CallToolResult`], or text.
#[diagnostic::on_unimplemented(
    message = "a `#[tool]` cannot return `{Self}`",
    note = "a `#[tool]` returns `HookResult<T>` where `T` is `CallToolResult`, `String` or `&str`"
)]
pub trait ToolOutput {
    /// The tool result.
    fn into_result(self) -> CallToolResult;
}

impl ToolOutput for CallToolResult {
    fn into_result(self) -> CallToolResult {
        self
    }
}

impl ToolOutput for String {
    fn into_result(self) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::text(self)])
    }
}

impl ToolOutput for &str {
    fn into_result(self) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::text(self)])
    }
}
