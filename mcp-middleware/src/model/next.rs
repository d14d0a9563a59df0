//! [`Next`]: the rest of the chain, as a hook sees it.

use std::fmt;

use super::hooks::{BoxFuture, Hook, HookResult};
use super::layer::Layer;
use super::tool::ToolDescriptor;
use crate::context::Context;

/// One step of a chain for one hook: a layer's own hook, its synthetic tools, or its content
/// transform.
#[doc(hidden)]
pub struct Step {
    /// The layer the step belongs to.
    pub layer: &'static dyn Layer,
    /// Its model's name (layers are zero-sized, so their addresses cannot tell them apart).
    pub model: &'static str,
    /// What the step does.
    pub kind: StepKind,
}

impl fmt::Debug for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Step")
            .field("model", &self.model)
            .field("kind", &self.kind)
            .finish()
    }
}

/// What a [`Step`] does.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub enum StepKind {
    /// The layer's own hook function.
    Hook,
    /// The layer's synthetic tools (on `tools/list` and `tools/call`).
    Tools(&'static [ToolDescriptor]),
    /// The layer's `transform_content` (on results that carry content).
    Transform,
}

/// What is past the last layer: the upstream, or the client for hooks on messages toward it.
#[doc(hidden)]
pub trait End<H: Hook>: Send + Sync {
    /// Handles what came through every layer.
    fn run<'a>(
        &'a self,
        ctx: &'a Context,
        params: H::Params,
    ) -> BoxFuture<'a, HookResult<H::Output>>;
}

/// The rest of the chain after the current hook: the inner models, then the upstream.
///
/// A hook calls [`Next::run`] to pass the request on and gets the answer back to change it, or
/// does not call it to answer by itself. `Next` is `Copy`: calling it twice sends the request
/// twice.
///
/// ```
/// use mcp_middleware::prelude::*;
///
/// /// Adds a line to every tool result.
/// async fn on_tool_call(
///     ctx: &Context,
///     params: CallToolRequestParams,
///     next: Next<'_, hooks::ToolCall>,
/// ) -> HookResult<CallToolResult> {
///     let mut result = next.run(ctx, params).await?;
///     result.content.push(ContentBlock::text("(via the proxy)"));
///     Ok(result)
/// }
/// ```
pub struct Next<'a, H: Hook> {
    steps: &'a [Step],
    end: &'a dyn End<H>,
}

impl<H: Hook> Clone for Next<'_, H> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<H: Hook> Copy for Next<'_, H> {}

impl<H: Hook> fmt::Debug for Next<'_, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Next")
            .field("hook", &H::ID)
            .field("steps_left", &self.steps.len())
            .finish()
    }
}

impl<'a, H: Hook> Next<'a, H> {
    /// A chain of `steps` ending in `end`.
    #[doc(hidden)]
    pub fn new(steps: &'a [Step], end: &'a dyn End<H>) -> Self {
        Self { steps, end }
    }

    /// Passes `params` to the rest of the chain and returns what comes back.
    pub fn run(self, ctx: &'a Context, params: H::Params) -> BoxFuture<'a, HookResult<H::Output>> {
        match self.steps.split_first() {
            None => self.end.run(ctx, params),
            Some((step, rest)) => H::step(
                step,
                ctx,
                params,
                Next {
                    steps: rest,
                    end: self.end,
                },
            ),
        }
    }
}
