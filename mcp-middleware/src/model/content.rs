//! Text content on its way back to the client, and how `transform_content` is applied to tool
//! results, resource reads and prompt messages.

use rmcp::model::{
    CallToolResult, ContentBlock, GetPromptResult, ReadResourceResult, ResourceContents,
};

use super::hooks::HookResult;
use super::layer::Layer;
use crate::context::Context;

/// Where a piece of text content came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ContentKind {
    /// A text part of a `tools/call` result.
    ToolResult {
        /// The tool that was called.
        tool: String,
    },
    /// The text of a `resources/read` result.
    Resource {
        /// The resource read.
        uri: String,
    },
    /// The text of a `prompts/get` message.
    PromptMessage {
        /// The prompt.
        prompt: String,
    },
}

/// One piece of text content, as `transform_content` receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Content {
    /// Where it came from.
    pub kind: ContentKind,
    /// Its MIME type, when the sender gave one (plain text parts of tool results have none).
    pub mime_type: Option<String>,
    /// The text.
    pub text: String,
}

impl Content {
    /// Text content of `kind`.
    pub fn new(kind: ContentKind, mime_type: Option<String>, text: String) -> Self {
        Self {
            kind,
            mime_type,
            text,
        }
    }
}

/// Runs `layer`'s `transform_content` over one content block, if it carries text.
async fn transform_block(
    layer: &dyn Layer,
    ctx: &Context,
    kind: &ContentKind,
    block: &mut ContentBlock,
) -> HookResult<()> {
    match block {
        ContentBlock::Text(text) => {
            let content = Content::new(kind.clone(), None, std::mem::take(&mut text.text));
            text.text = layer.transform_content(ctx, content).await?;
        }
        ContentBlock::Resource(embedded) => {
            transform_contents(layer, ctx, kind, &mut embedded.resource).await?
        }
        _ => {}
    }
    Ok(())
}

async fn transform_contents(
    layer: &dyn Layer,
    ctx: &Context,
    kind: &ContentKind,
    contents: &mut ResourceContents,
) -> HookResult<()> {
    if let ResourceContents::TextResourceContents {
        mime_type, text, ..
    } = contents
    {
        let content = Content::new(kind.clone(), mime_type.clone(), std::mem::take(text));
        *text = layer.transform_content(ctx, content).await?;
    }
    Ok(())
}

pub(crate) async fn transform_tool_result(
    layer: &dyn Layer,
    ctx: &Context,
    tool: &str,
    result: &mut CallToolResult,
) -> HookResult<()> {
    let kind = ContentKind::ToolResult {
        tool: tool.to_owned(),
    };
    for block in &mut result.content {
        transform_block(layer, ctx, &kind, block).await?;
    }
    Ok(())
}

pub(crate) async fn transform_resource(
    layer: &dyn Layer,
    ctx: &Context,
    result: &mut ReadResourceResult,
) -> HookResult<()> {
    for contents in &mut result.contents {
        let uri = match contents {
            ResourceContents::TextResourceContents { uri, .. }
            | ResourceContents::BlobResourceContents { uri, .. } => uri.clone(),
            #[allow(unreachable_patterns)]
            _ => continue,
        };
        transform_contents(layer, ctx, &ContentKind::Resource { uri }, contents).await?;
    }
    Ok(())
}

pub(crate) async fn transform_prompt(
    layer: &dyn Layer,
    ctx: &Context,
    prompt: &str,
    result: &mut GetPromptResult,
) -> HookResult<()> {
    let kind = ContentKind::PromptMessage {
        prompt: prompt.to_owned(),
    };
    for message in &mut result.messages {
        transform_block(layer, ctx, &kind, &mut message.content).await?;
    }
    Ok(())
}
