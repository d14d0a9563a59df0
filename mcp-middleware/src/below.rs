//! [`Below`]: requests a model sends into the rest of the chain under itself.
//!
//! [`Context::upstream`] talks to the upstream outside the chain: no model and no observer sees
//! those calls. A model that makes requests of its own on the client's behalf (code mode runs
//! a snippet whose tool calls are such requests) sends them with [`Context::below`] instead:
//! they pass through the routes (a hidden tool is refused, a pass-through tool skips the
//! models), every model layered under the sender (their hooks and synthetic tools), then the
//! upstream, and the observers record each one as they record a client's request. The models
//! above the sender are not run again: they already handled the request the sender is serving.
//!
//! Such a request belongs to the client request the context serves: cancelling that one
//! cancels it, and progress the upstream sends for it reaches the client under the progress
//! token the request carries in `_meta` (pass the client's own to relay it).

use std::panic::AssertUnwindSafe;
use std::time::Instant;

use rmcp::model::{CallToolRequestParams, CallToolResult, ListToolsResult, PaginatedRequestParams};

use crate::chain::Chain;
use crate::context::{BelowChain, Context, from_result, to_params};
use crate::dispatch;
use crate::model::{BoxFuture, HookId, HookResult, Observation, Outcome, Step, Subject, hooks};
use crate::routing::Route;

impl Context {
    /// The rest of the chain below the model called `model` (its own name, as
    /// `<Model as ProxyModel>::DESCRIPTOR.name` gives it): send requests through it.
    ///
    /// ```
    /// use mcp_middleware::prelude::*;
    ///
    /// /// Calls `echo` twice for every call to `echo_twice`.
    /// #[proxy_model]
    /// pub mod twice {
    ///     use mcp_middleware::prelude::*;
    ///
    ///     pub async fn on_tool_call(
    ///         ctx: &Context,
    ///         params: CallToolRequestParams,
    ///         next: Next<'_, hooks::ToolCall>,
    ///     ) -> HookResult<CallToolResult> {
    ///         if params.name != "echo_twice" {
    ///             return next.run(ctx, params).await;
    ///         }
    ///         let mut inner = params.clone();
    ///         inner.name = "echo".into();
    ///         let below = ctx.below(<Model as ProxyModel>::DESCRIPTOR.name);
    ///         let mut first = below.call_tool(inner.clone()).await?;
    ///         let second = below.call_tool(inner).await?;
    ///         first.content.extend(second.content);
    ///         Ok(first)
    ///     }
    /// }
    /// ```
    ///
    /// A name that is not in the chain leaves no model below (the routes and the upstream
    /// still apply), so a model can never re-enter itself this way.
    pub fn below(&self, model: &str) -> Below<'_> {
        Below {
            ctx: self,
            below: self.scope().chain.below().layers_below(model),
        }
    }
}

/// The chain below one model, as that model calls it ([`Context::below`]).
#[derive(Debug, Clone)]
pub struct Below<'a> {
    ctx: &'a Context,
    /// The names of the layers below, outermost first.
    below: Vec<&'static str>,
}

impl Below<'_> {
    /// The names of the synthetic tools the models below add (paginate's `read_page`, ...).
    pub fn synthetic_tools(&self) -> Vec<&'static str> {
        self.chain().synthetic_tools(&self.below)
    }

    /// Calls a tool through the routes, the models below and the upstream; observers see it.
    pub async fn call_tool(&self, params: CallToolRequestParams) -> HookResult<CallToolResult> {
        let raw = to_params(&params)?;
        let raw = self.chain().call_tool(self.ctx, &self.below, raw).await?;
        from_result("tools/call", &raw)
    }

    /// Lists the tools as the models below show them (one page: pass the cursor for more),
    /// without what the routes hide.
    pub async fn list_tools(
        &self,
        params: Option<PaginatedRequestParams>,
    ) -> HookResult<ListToolsResult> {
        let raw = match &params {
            Some(params) => to_params(params)?,
            None => None,
        };
        let listed = self.chain().list_tools(self.ctx, &self.below, raw).await?;
        from_result("tools/list", &listed)
    }

    fn chain(&self) -> &dyn BelowChain {
        self.ctx.scope().chain.below()
    }
}

/// The chain's side of [`Below`]: here rather than in `crate::chain` because it runs the
/// dispatch, which sits above the chain.
impl BelowChain for Chain {
    fn layers_below(&self, model: &str) -> Vec<&'static str> {
        let layers = self.layers();
        let position = layers
            .iter()
            .position(|layer| layer.name == model)
            .map_or(layers.len(), |index| index + 1);
        layers[position.min(layers.len())..]
            .iter()
            .map(|layer| layer.name)
            .collect()
    }

    fn synthetic_tools(&self, below: &[&'static str]) -> Vec<&'static str> {
        self.layers()
            .iter()
            .filter(|layer| below.contains(&layer.name))
            .flat_map(|layer| layer.tools.iter().map(|tool| tool.name))
            .collect()
    }

    fn call_tool<'a>(
        &'a self,
        ctx: &'a Context,
        below: &'a [&'static str],
        params: Option<String>,
    ) -> BoxFuture<'a, HookResult<String>> {
        Box::pin(async move {
            let started = Instant::now();
            let outcome = call_tool_raw(self, ctx, below, params.as_deref()).await;
            let (kind, error) = match &outcome {
                Ok(result) if dispatch::is_tool_error(result) => (
                    Outcome::Error,
                    Some("the tool reported an error".to_owned()),
                ),
                Ok(_) => (Outcome::Ok, None),
                Err((rejected, error)) => (
                    if *rejected {
                        Outcome::Rejected
                    } else {
                        Outcome::Error
                    },
                    Some(error.message.to_string()),
                ),
            };
            observe(
                self,
                ctx,
                Observation::new(
                    "tools/call".to_owned(),
                    Subject::of("tools/call", params.as_deref()),
                    kind,
                    started.elapsed(),
                    error,
                ),
            );
            outcome.map_err(|(_, error)| error)
        })
    }

    fn list_tools<'a>(
        &'a self,
        ctx: &'a Context,
        below: &'a [&'static str],
        params: Option<String>,
    ) -> BoxFuture<'a, HookResult<String>> {
        Box::pin(async move {
            let steps = steps_below(self, below, HookId::ToolsList);
            let mut listed =
                dispatch::run_steps::<hooks::ToolsList>(steps, ctx, params.as_deref()).await?;
            if let Some(router) = self.router() {
                listed = router.finish_listing(
                    "tools/list",
                    listed,
                    ctx.take_listed(),
                    ctx.identity(),
                )?;
            }
            Ok(listed)
        })
    }
}

/// The steps of `hook` in the layers `below`: steps run in layer order, so they are a suffix.
fn steps_below<'c>(chain: &'c Chain, below: &[&'static str], hook: HookId) -> &'c [Step] {
    let steps = chain.steps(hook);
    let start = steps
        .iter()
        .position(|step| below.contains(&step.model))
        .unwrap_or(steps.len());
    &steps[start..]
}

/// The raw outcome of a `tools/call` below; an error says whether the routes refused it.
async fn call_tool_raw(
    chain: &Chain,
    ctx: &Context,
    below: &[&'static str],
    params: Option<&str>,
) -> Result<String, (bool, rmcp::ErrorData)> {
    // One decision, on what goes on: the router's canonical reading replaces the text.
    let decision = chain
        .router()
        .map(|router| router.decide("tools/call", params, ctx.identity()));
    let (route, canonical) = match decision {
        Some(decision) => (decision.route, decision.params),
        None => (Route::Chain, None),
    };
    let params = canonical.as_deref().or(params);
    match route {
        Route::Refused(error) => Err((true, error)),
        Route::PassThrough => ctx
            .upstream_raw("tools/call", params.map(str::to_owned))
            .await
            .map_err(|error| (false, error)),
        Route::Chain | Route::Listing => {
            let steps = steps_below(chain, below, HookId::ToolCall);
            dispatch::run_steps::<hooks::ToolCall>(steps, ctx, params)
                .await
                .map_err(|error| (false, error))
        }
    }
}

fn observe(chain: &Chain, ctx: &Context, observation: Observation) {
    if !chain.observed() {
        return;
    }
    for layer in chain.layers() {
        if layer.observers.is_empty() {
            continue;
        }
        let observe = AssertUnwindSafe(|| layer.layer.observe(ctx, &observation));
        if std::panic::catch_unwind(observe).is_err() {
            tracing::warn!(model = layer.name, "an observer panicked");
        }
    }
}
