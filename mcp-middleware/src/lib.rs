//! # mcp-middleware
//!
//! A transparent, fast proxy for the Model Context Protocol, and the framework for the *proxy
//! models* that run inside it.
//!
//! An MCP client talks to the proxy as if it were the server; the proxy talks to the real server
//! as if it were the client. A message no model intercepts passes through unchanged: the proxy
//! reads only the JSON-RPC envelope, swaps the id (and progress token) for its own, and writes the
//! rest of the bytes out as they came ([`jsonrpc`]). Nothing the server sends is dropped, even
//! fields and methods this crate has never heard of.
//!
//! ```no_run
//! use mcp_middleware::{Proxy, registry, upstream::StdioServer};
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let server = StdioServer::new("node").args(["server.js", "stdio"]);
//!     Proxy::new(server).serve_stdio().await?;
//!     Ok(())
//! }
//! ```
//!
//! New here? The [`tutorial`] writes, composes, tests and runs a model.
//!
//! ## Where things live
//!
//! - [`proxy`]: the entry point, [`Proxy`].
//! - `session`: one client connection, the forwarding loop, id and token maps, restarts.
//! - [`era`]: bridging 2025-11-25 (handshake) and 2026-07-28 (stateless) peers.
//! - [`jsonrpc`]: the envelope, read without parsing payloads, and message writers.
//! - [`transport`]: newline-delimited framing and the process's own stdio.
//! - [`http`]: the streamable HTTP front.
//! - [`auth`]: who HTTP clients are (bearer tokens, JWTs, TLS client certificates).
//! - [`upstream`]: the servers behind the proxy.
//! - [`registry`]: the proxy models linked into a binary.
//! - [`routing`]: hidden and pass-through routes.
//! - [`live`]: a running proxy takes new servers, routes and models without a restart.
//! - [`request_tap`]: every client request's start and end, for traces and metrics;
//!   [`trace_context`] carries trace context in `params._meta`.
//!
//! ## Layers
//!
//! The top-level modules import one another one way only, lowest first (`scripts/module-cycles`
//! checks that no `crate::` path goes back up):
//!
//! 1. Wire and bookkeeping: [`jsonrpc`], [`transport`], `exchange` (ids, handshake), [`era`],
//!    [`error`] (with [`HookResult`]), `model_state` (a model's `State` type, described), and
//!    the helpers ([`pattern`], [`cache`], [`sealed_state`], [`trace_context`], `strict_json`,
//!    `session_id` (how a session is named in logs and to hooks),
//!    `unknown_fields`, [`heap`] (the allocator set up for large messages)).
//! 2. The servers and who calls: [`upstream`], [`auth`], [`routing`], [`llm`], [`project`].
//! 3. [`context`]: what a hook knows and can do. It reaches what sits above it through traits
//!    those implement: the chain (`SessionChain`, `BelowChain`), the chain's upstream end
//!    (`DirectUpstream`); [`llm`] reaches the context through `LlmHost`.
//! 4. [`model`]: the hooks, `Layer`, `Next` (they take a [`Context`]); [`registry`].
//! 5. [`chain`] (composition), then `dispatch` (running the steps), [`below`], [`request_tap`],
//!    [`live`] (the handle sessions follow).
//! 6. [`shared_store`], then `session` (one client connection).
//! 7. The fronts and the entry point: [`http`], then [`proxy`] (which also defines
//!    [`Live::reload`](live::Live::reload), since a reload takes a [`Proxy`]).
// `deny`, not `forbid`: `upstream::parent_death` allows it for its one `pre_exec`.
#![deny(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod auth;
pub mod below;
pub mod cache;
pub mod chain;
pub mod context;
mod dispatch;
pub mod era;
pub mod error;
mod exchange;
pub mod heap;
pub mod http;
pub mod jsonrpc;
pub mod live;
pub mod llm;
pub mod model;
mod model_state;
pub mod pattern;
pub mod project;
pub mod proxy;
pub mod registry;
pub mod request_tap;
pub mod routing;
pub mod sealed_state;
mod session;
mod session_id;
pub mod shared_store;
mod strict_json;
pub mod trace_context;
pub mod transport;
pub mod tutorial;
mod unknown_fields;
pub mod upstream;

pub use auth::Identity;
pub use below::Below;
pub use context::{Configuration, Context, Downstream, UpstreamHandle};
/// The old name of [`UpstreamHandle`] at the crate root.
///
/// ```
/// #[allow(deprecated)]
/// fn handle(ctx: &mcp_middleware::Context) -> mcp_middleware::Upstream<'_> {
///     ctx.upstream()
/// }
/// ```
#[deprecated(note = "renamed `UpstreamHandle` (`upstream::Upstream` is the server enum)")]
pub type Upstream<'a> = UpstreamHandle<'a>;
pub use error::{ProxyError, UpstreamError};
/// Turns a module into a proxy model.
///
/// ```
/// use mcp_middleware::prelude::*;
///
/// /// Counts tool calls. (The first paragraph is the model's summary.)
/// #[proxy_model]
/// pub mod call_counter {
///     use mcp_middleware::prelude::*;
///
///     /// Per-session state: any item named `State`, `Default + Send + 'static`.
///     #[derive(Default)]
///     pub struct State {
///         pub calls: u64,
///     }
///
///     /// Configuration: any item named `Config`, `Deserialize + JsonSchema`.
///     #[derive(Deserialize, JsonSchema, Default)]
///     #[serde(default)]
///     pub struct Config {
///         pub limit: Option<u64>,
///     }
///
///     /// A hook: its name says which (`on_tool_call`, `on_tools_list`, ..., see `hooks`).
///     pub async fn on_tool_call(
///         ctx: &Context,
///         params: CallToolRequestParams,
///         next: Next<'_, hooks::ToolCall>,
///     ) -> HookResult<CallToolResult> {
///         ctx.state(|state: &mut State| state.calls += 1)?;
///         next.run(ctx, params).await
///     }
///
///     /// A synthetic tool; its doc comment is its description.
///     #[tool]
///     pub async fn calls(ctx: &Context) -> HookResult<String> {
///         Ok(ctx.state(|state: &mut State| state.calls)?.to_string())
///     }
///
///     /// What `add` takes (its JSON schema is the tool's input schema).
///     #[derive(Deserialize, JsonSchema)]
///     pub struct AddArgs {
///         pub by: u64,
///     }
///
///     /// Another tool, with arguments and its own name.
///     #[tool(name = "add-calls")]
///     pub async fn add(ctx: &Context, args: AddArgs) -> HookResult<String> {
///         ctx.state(|state: &mut State| state.calls += args.by)?;
///         Ok("added".to_owned())
///     }
///
///     /// An observer: sees every finished request, cannot change it.
///     #[observer]
///     pub fn record(_ctx: &Context, observation: &Observation) {
///         let _ = observation.outcome;
///     }
/// }
///
/// /// Composes `call_counter` with a model of its own.
/// #[proxy_model(extends = [call_counter], name = "call-counter-plus")]
/// pub mod call_counter_plus {}
///
/// let model = <call_counter_plus::Model as ProxyModel>::DESCRIPTOR;
/// assert_eq!(model.name, "call-counter-plus");
/// assert_eq!(model.parents[0].tools[1].name, "add-calls");
/// ```
///
/// # What the module may contain
///
/// - Hook functions, named after their hook (`on_initialize`, `on_discover`, `on_tools_list`,
///   `on_tool_call`, `on_resources_list`, `on_resource_templates_list`, `on_resource_read`,
///   `on_resource_subscribe`, `on_resource_unsubscribe`, `on_prompts_list`, `on_prompt_get`,
///   `on_completion`, `on_set_level`, `on_request`, `on_client_notification`,
///   `on_server_notification`, `on_server_request`, `transform_content`, `on_session_start`,
///   `on_session_end`), with the signatures `mcp_middleware::hooks` gives. Any other function
///   named `on_*` is an error ("did you mean ..."), and so is a hook defined twice.
/// - `#[tool]` / `#[tool(name = "..")]` async functions taking `ctx: &Context` and optionally one
///   arguments value (`Deserialize + JsonSchema`), returning `HookResult` of `CallToolResult`,
///   `String` or `&str`.
/// - `#[observer]` functions `fn(ctx: &Context, observation: &Observation)`, as many as wanted.
/// - `State` and `Config` (a struct, enum, type alias or `use`), and anything else, left alone.
///   Types of the module that derive serde's or schemars' traits get `#[serde(crate = ..)]` /
///   `#[schemars(crate = ..)]` pointing into `mcp_middleware`, so a crate depending on
///   `mcp-middleware` alone compiles.
///
/// The macro adds `pub struct Model`, which implements `ProxyModel` and `Layer` and is registered
/// with `inventory`; an item of the module's own named `Model` is an error.
///
/// # Arguments
///
/// - `extends = [a, path::to::b]`: parent models, resolved where the attribute is written. Two
///   parents whose compositions implement the same hook (through different models), or define a
///   tool of the same name, do not compile unless this model implements that hook (or defines that
///   tool) itself, or lists the hook in `chain`. The error points at the `extends` entry. A diamond
///   (a shared ancestor) is not a conflict; observers never conflict.
/// - `chain = [on_x, ..]`: run the parents' implementations of these hooks in `extends` order.
/// - `name = "my-model"`: the registered name (default: the module's name).
/// - `crate = ::path::to::mcp_middleware`: where `mcp_middleware` is, for crates that re-export
///   it. The path is used inside the module and around it, so make it absolute.
#[doc(inline)]
pub use mcp_middleware_macros::proxy_model;
pub use model::hooks;
pub use model::{HookResult, Next, ProxyModel};
pub use project::{Project, ProjectPrompt};
pub use proxy::Proxy;
/// rmcp's MCP model types, which hooks take and return.
pub use rmcp::model as types;
pub use serde_json;
pub use session::SessionOptions;

/// What a model author needs in scope: `use mcp_middleware::prelude::*;`.
pub mod prelude {
    pub use crate::hooks::{self, RawNotification, RawRequest};
    pub use crate::model::{Content, ContentKind, Observation, Outcome, ProxyModel};
    pub use crate::types::{
        CallToolRequestParams, CallToolResult, ContentBlock, ErrorData, GetPromptRequestParams,
        GetPromptResult, JsonObject, ListPromptsResult, ListResourcesResult, ListToolsResult,
        PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResult, Tool,
    };
    pub use crate::upstream::StdioServer;
    pub use crate::{Context, HookResult, Next, Proxy, proxy_model};
    pub use schemars::JsonSchema;
    pub use serde::{Deserialize, Serialize};
}

/// Items the code generated by `#[proxy_model]` refers to. Not a stable API.
#[doc(hidden)]
pub mod __private {
    pub use crate::model::compose::{ConstMessage, conflict, owners};
    pub use crate::model::state_probe;
    pub use crate::model::{
        BoxFuture, ConfigDescriptor, Content, HookId, HookResult, HookSet, Layer, ModelDescriptor,
        Next, Observation, ProxyModel, Registration, StateDescriptor, ToolDescriptor, ToolOutput,
        hooks, input_schema, no_arguments, tool_arguments,
    };
    pub use crate::types::{CallToolResult, JsonObject};
    pub use crate::{Context, hooks::*};
    pub use inventory;
    pub use schemars;
    pub use serde;
    pub use serde_json;
}
