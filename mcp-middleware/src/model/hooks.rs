//! The hook catalogue: every point where a proxy model can step into the protocol.
//!
//! Each hook has a name (the function name a model defines, such as `on_tool_call`), an id
//! ([`HookId`], used for the compile-time conflict checks and the registry), and, for the hooks
//! that take `next`, a marker type implementing [`Hook`] that names what goes in and what comes
//! out. The table below is the contract, in the manner of Pingora's `ProxyHttp`: for each hook,
//! when it runs, what happens if no model implements it, and how to answer without going further.
//!
//! ## Request hooks (client to server)
//!
//! A request hook is an async function `(ctx: &Context, params: P, next: Next<'_, H>) ->
//! HookResult<R>`. It runs when the client sends that request, outermost model first. `next.run(ctx,
//! params).await` passes the (possibly changed) request to the next layer and, at the end of the
//! chain, to the upstream; the hook may change what comes back. To **short-circuit**, return a
//! result (or an error) without calling `next`: nothing further in, and not the upstream, sees the
//! request. Calling `next` more than once sends the request more than once. If no model in the
//! chain implements a hook, the request is forwarded as raw bytes and never parsed (P1).
//!
//! | hook | method | `P` | `R` |
//! |---|---|---|---|
//! | `on_initialize` | `initialize` | [`InitializeRequestParams`] | [`InitializeResult`] |
//! | `on_discover` | `server/discover` | [`DiscoverRequestParams`] | [`DiscoverResult`] |
//! | `on_tools_list` | `tools/list` | `Option<`[`PaginatedRequestParams`]`>` | [`ListToolsResult`] |
//! | `on_tool_call` | `tools/call` | [`CallToolRequestParams`] | [`CallToolResult`] |
//! | `on_resources_list` | `resources/list` | `Option<PaginatedRequestParams>` | [`ListResourcesResult`] |
//! | `on_resource_templates_list` | `resources/templates/list` | `Option<PaginatedRequestParams>` | [`ListResourceTemplatesResult`] |
//! | `on_resource_read` | `resources/read` | [`ReadResourceRequestParams`] | [`ReadResourceResult`] |
//! | `on_resource_subscribe` | `resources/subscribe` | [`SubscribeRequestParams`] | [`EmptyResult`] |
//! | `on_resource_unsubscribe` | `resources/unsubscribe` | [`UnsubscribeRequestParams`] | [`EmptyResult`] |
//! | `on_prompts_list` | `prompts/list` | `Option<PaginatedRequestParams>` | [`ListPromptsResult`] |
//! | `on_prompt_get` | `prompts/get` | [`GetPromptRequestParams`] | [`GetPromptResult`] |
//! | `on_completion` | `completion/complete` | [`CompleteRequestParams`] | [`CompleteResult`] |
//! | `on_set_level` | `logging/setLevel` | [`SetLevelRequestParams`] | [`EmptyResult`] |
//! | `on_request` | any request, known or not | [`RawRequest`] | [`serde_json::Value`] |
//!
//! `on_request` sees every request, including methods this crate does not know. The `on_request`
//! hooks of all models run before any typed hook, in chain order; the last one's `next` enters the
//! typed hooks for that method (if any), then the upstream. Params that do not fit the typed hook's
//! type are refused with `-32602 Invalid params` before any typed hook runs, so a model never sees
//! a request it could not check.
//!
//! ## Notifications and server requests
//!
//! | hook | runs when | signature | default |
//! |---|---|---|---|
//! | `on_client_notification` | the client sends a notification | `(ctx, RawNotification, next: Next<'_, ClientNotification>) -> HookResult<()>` | forwarded upstream |
//! | `on_server_notification` | the upstream sends a notification | `(ctx, RawNotification, next: Next<'_, ServerNotification>) -> HookResult<()>` | forwarded to the client |
//! | `on_server_request` | the upstream asks the client (sampling, elicitation, roots, ping, custom) | `(ctx, RawRequest, next: Next<'_, ServerRequest>) -> HookResult<Value>` | asked of the client |
//!
//! A notification hook drops the notification by returning `Ok(())` without calling `next`.
//! Server notifications reach the hook as the client will see them (progress tokens already
//! mapped to the client's); client notifications as the client sent them. A server-request hook
//! answers the upstream itself by returning without calling `next`.
//!
//! ## Content, sessions, tools and observers
//!
//! - `transform_content(ctx, content: Content) -> HookResult<String>`: runs on every text part of a
//!   tool result, resource read and prompt message as it comes back through the model's place in
//!   the chain (innermost model first), with the content's [`ContentKind`](super::ContentKind) and MIME type. The
//!   default leaves the text as it is.
//! - `on_session_start(ctx) -> HookResult<()>` and `on_session_end(ctx) -> HookResult<()>`: when a
//!   client connects and after it leaves. Nothing to short-circuit; an error is logged.
//! - Synthetic tools (`#[tool]` functions, SPEC F6) are not hooks: they are listed and answered at
//!   the model's place in the chain, just inside the model's own hooks: its own hooks and outer
//!   models see them like the upstream's tools and may filter them (a model's `on_tool_call`
//!   sees calls to its own tools too).
//! - Observers (`#[observer]` functions, SPEC F5) are not in the chain: they see every request's
//!   [`Observation`](super::Observation) after it is answered and cannot change it. They never
//!   conflict.
// `logging/setLevel` is deprecated from 2026-07-28 on (SEP-2577), but 2025-11-25 clients set
// their log level with it, so the hook stays.
#![allow(deprecated)]

use std::future::Future;
use std::pin::Pin;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, CompleteRequestParams, CompleteResult,
    DiscoverRequestParams, DiscoverResult, EmptyResult, ErrorData, GetPromptRequestParams,
    GetPromptResult, InitializeRequestParams, InitializeResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResult, SetLevelRequestParams, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::layer::Layer;
use super::next::{Next, Step, StepKind};
use crate::context::Context;

/// What a hook returns: its result, or the JSON-RPC error the client receives.
pub type HookResult<T> = Result<T, ErrorData>;

/// A boxed future that can move between threads: what [`Layer`] methods return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A request as JSON: the method and its params, untouched. What `on_request` and
/// `on_server_request` receive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawRequest {
    /// The JSON-RPC method.
    pub method: String,
    /// The params, if the request had any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
}

/// A notification as JSON, as the notification hooks receive it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawNotification {
    /// The JSON-RPC method, such as `notifications/progress`.
    pub method: String,
    /// The params, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
}

macro_rules! hook_ids {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal, )*) => {
        /// Every hook a model can implement, by name. The order is the bit order of [`HookSet`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum HookId {
            $( $(#[$doc])* $variant, )*
        }

        impl HookId {
            /// Every hook, in catalogue order.
            pub const ALL: &'static [HookId] = &[$(HookId::$variant),*];
            /// How many hooks there are.
            pub const COUNT: usize = [$(HookId::$variant),*].len();

            /// The function name a model defines to implement this hook.
            pub const fn name(self) -> &'static str {
                match self { $(HookId::$variant => $name,)* }
            }

            /// The hook called `name`, if there is one.
            pub fn from_name(name: &str) -> Option<HookId> {
                match name { $($name => Some(HookId::$variant),)* _ => None }
            }
        }
    };
}

hook_ids! {
    /// `initialize`.
    Initialize = "on_initialize",
    /// `server/discover`.
    Discover = "on_discover",
    /// `tools/list`.
    ToolsList = "on_tools_list",
    /// `tools/call`.
    ToolCall = "on_tool_call",
    /// `resources/list`.
    ResourcesList = "on_resources_list",
    /// `resources/templates/list`.
    ResourceTemplatesList = "on_resource_templates_list",
    /// `resources/read`.
    ResourceRead = "on_resource_read",
    /// `resources/subscribe`.
    ResourceSubscribe = "on_resource_subscribe",
    /// `resources/unsubscribe`.
    ResourceUnsubscribe = "on_resource_unsubscribe",
    /// `prompts/list`.
    PromptsList = "on_prompts_list",
    /// `prompts/get`.
    PromptGet = "on_prompt_get",
    /// `completion/complete`.
    Completion = "on_completion",
    /// `logging/setLevel`.
    SetLevel = "on_set_level",
    /// Any request.
    Request = "on_request",
    /// A notification from the client.
    ClientNotification = "on_client_notification",
    /// A notification from the upstream.
    ServerNotification = "on_server_notification",
    /// A request from the upstream to the client.
    ServerRequest = "on_server_request",
    /// Text content on its way back to the client.
    TransformContent = "transform_content",
    /// A client connected.
    SessionStart = "on_session_start",
    /// A client left.
    SessionEnd = "on_session_end",
}

impl HookId {
    /// The JSON-RPC method of a typed request hook.
    pub const fn method(self) -> Option<&'static str> {
        Some(match self {
            HookId::Initialize => "initialize",
            HookId::Discover => "server/discover",
            HookId::ToolsList => "tools/list",
            HookId::ToolCall => "tools/call",
            HookId::ResourcesList => "resources/list",
            HookId::ResourceTemplatesList => "resources/templates/list",
            HookId::ResourceRead => "resources/read",
            HookId::ResourceSubscribe => "resources/subscribe",
            HookId::ResourceUnsubscribe => "resources/unsubscribe",
            HookId::PromptsList => "prompts/list",
            HookId::PromptGet => "prompts/get",
            HookId::Completion => "completion/complete",
            HookId::SetLevel => "logging/setLevel",
            _ => return None,
        })
    }

    /// The typed request hook for a JSON-RPC method.
    pub fn for_method(method: &str) -> Option<HookId> {
        Some(match method {
            "initialize" => HookId::Initialize,
            "server/discover" => HookId::Discover,
            "tools/list" => HookId::ToolsList,
            "tools/call" => HookId::ToolCall,
            "resources/list" => HookId::ResourcesList,
            "resources/templates/list" => HookId::ResourceTemplatesList,
            "resources/read" => HookId::ResourceRead,
            "resources/subscribe" => HookId::ResourceSubscribe,
            "resources/unsubscribe" => HookId::ResourceUnsubscribe,
            "prompts/list" => HookId::PromptsList,
            "prompts/get" => HookId::PromptGet,
            "completion/complete" => HookId::Completion,
            "logging/setLevel" => HookId::SetLevel,
            _ => return None,
        })
    }

    const fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

/// A set of hooks, as the bits of a `u32`: which hooks a model implements or chains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HookSet(u32);

impl HookSet {
    /// No hooks.
    pub const EMPTY: HookSet = HookSet(0);

    /// This set with `hook` added.
    pub const fn with(self, hook: HookId) -> HookSet {
        HookSet(self.0 | hook.bit())
    }

    /// Both sets together.
    pub const fn union(self, other: HookSet) -> HookSet {
        HookSet(self.0 | other.0)
    }

    /// Whether `hook` is in the set.
    pub const fn contains(self, hook: HookId) -> bool {
        self.0 & hook.bit() != 0
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The hooks in the set, in catalogue order.
    pub fn iter(self) -> impl Iterator<Item = HookId> {
        HookId::ALL
            .iter()
            .copied()
            .filter(move |h| self.contains(*h))
    }

    pub(crate) const fn contains_index(self, index: usize) -> bool {
        self.0 & (1 << index) != 0
    }
}

/// A hook that takes `next`: the types that go in and come out, and how a layer is entered.
///
/// Implemented by the marker types of this module ([`ToolCall`], [`ToolsList`], ...); a model
/// author names them only in `Next<'_, H>`.
pub trait Hook: Sized + Send + Sync + 'static {
    /// What the hook receives.
    type Params: Send + 'static;
    /// What the hook returns on success.
    type Output: Send + 'static;
    /// Which hook this is.
    const ID: HookId;

    /// Runs `layer`'s implementation of this hook.
    #[doc(hidden)]
    fn enter<'a>(
        layer: &'a dyn Layer,
        ctx: &'a Context,
        params: Self::Params,
        next: Next<'a, Self>,
    ) -> BoxFuture<'a, HookResult<Self::Output>>;

    /// Runs one step of the chain. Steps other than a layer's own hook (synthetic tools,
    /// content transforms) are handled by the hooks they apply to.
    #[doc(hidden)]
    fn step<'a>(
        step: &'a Step,
        ctx: &'a Context,
        params: Self::Params,
        next: Next<'a, Self>,
    ) -> BoxFuture<'a, HookResult<Self::Output>> {
        match step.kind {
            StepKind::Hook => Self::enter(step.layer, ctx, params, next),
            _ => next.run(ctx, params),
        }
    }
}

/// A typed request hook: a [`Hook`] tied to one JSON-RPC method whose params and result are
/// rmcp's types.
pub trait RequestHook: Hook
where
    Self::Params: Serialize + DeserializeOwned,
    Self::Output: Serialize + DeserializeOwned,
{
    /// The JSON-RPC method.
    const METHOD: &'static str;
}

/// Parses request params for a typed hook. A request without params is read as `null` (for the
/// `Option` params of list requests) or, failing that, as `{}`.
pub(crate) fn parse_params<P: DeserializeOwned>(raw: Option<&str>) -> Result<P, serde_json::Error> {
    match raw {
        Some(raw) => serde_json::from_str(raw),
        None => serde_json::from_str("null").or_else(|_| serde_json::from_str("{}")),
    }
}

macro_rules! request_hooks {
    ($( $(#[$doc:meta])* $marker:ident($id:ident, $method:literal, $fn:ident): $params:ty => $output:ty; )*) => {
        $(
            $(#[$doc])*
            #[derive(Debug, Clone, Copy)]
            pub struct $marker;

            impl Hook for $marker {
                type Params = $params;
                type Output = $output;
                const ID: HookId = HookId::$id;

                fn enter<'a>(
                    layer: &'a dyn Layer,
                    ctx: &'a Context,
                    params: Self::Params,
                    next: Next<'a, Self>,
                ) -> BoxFuture<'a, HookResult<Self::Output>> {
                    layer.$fn(ctx, params, next)
                }

                fn step<'a>(
                    step: &'a Step,
                    ctx: &'a Context,
                    params: Self::Params,
                    next: Next<'a, Self>,
                ) -> BoxFuture<'a, HookResult<Self::Output>> {
                    special_step!($marker, step, ctx, params, next)
                }
            }

            impl RequestHook for $marker {
                const METHOD: &'static str = $method;
            }
        )*
    };
}

/// The steps besides a layer's own hook: synthetic tools on `tools/list` and `tools/call`,
/// content transforms on results that carry content.
macro_rules! special_step {
    (ToolsList, $step:ident, $ctx:ident, $params:ident, $next:ident) => {
        match $step.kind {
            StepKind::Hook => Self::enter($step.layer, $ctx, $params, $next),
            StepKind::Tools(tools) => Box::pin(async move {
                let mut listed = $next.run($ctx, $params).await?;
                super::tool::list_into(&mut listed, tools);
                Ok(listed)
            }),
            StepKind::Transform => $next.run($ctx, $params),
        }
    };
    (ToolCall, $step:ident, $ctx:ident, $params:ident, $next:ident) => {
        match $step.kind {
            StepKind::Hook => Self::enter($step.layer, $ctx, $params, $next),
            StepKind::Tools(tools) => {
                if tools.iter().any(|tool| tool.name == $params.name) {
                    let arguments = $params.arguments;
                    let name = $params.name;
                    Box::pin(async move {
                        match $step.layer.call_tool($ctx, &name, arguments) {
                            Some(answer) => answer.await,
                            None => Err(ErrorData::internal_error(
                                format!("synthetic tool `{name}` is listed but has no function"),
                                None,
                            )),
                        }
                    })
                } else {
                    $next.run($ctx, $params)
                }
            }
            StepKind::Transform => Box::pin(async move {
                let tool = $params.name.to_string();
                let mut result = $next.run($ctx, $params).await?;
                super::content::transform_tool_result($step.layer, $ctx, &tool, &mut result)
                    .await?;
                Ok(result)
            }),
        }
    };
    (ResourceRead, $step:ident, $ctx:ident, $params:ident, $next:ident) => {
        match $step.kind {
            StepKind::Hook => Self::enter($step.layer, $ctx, $params, $next),
            StepKind::Transform => Box::pin(async move {
                let mut result = $next.run($ctx, $params).await?;
                super::content::transform_resource($step.layer, $ctx, &mut result).await?;
                Ok(result)
            }),
            StepKind::Tools(_) => $next.run($ctx, $params),
        }
    };
    (PromptGet, $step:ident, $ctx:ident, $params:ident, $next:ident) => {
        match $step.kind {
            StepKind::Hook => Self::enter($step.layer, $ctx, $params, $next),
            StepKind::Transform => Box::pin(async move {
                let prompt = $params.name.clone();
                let mut result = $next.run($ctx, $params).await?;
                super::content::transform_prompt($step.layer, $ctx, &prompt, &mut result).await?;
                Ok(result)
            }),
            StepKind::Tools(_) => $next.run($ctx, $params),
        }
    };
    ($other:ident, $step:ident, $ctx:ident, $params:ident, $next:ident) => {
        match $step.kind {
            StepKind::Hook => Self::enter($step.layer, $ctx, $params, $next),
            _ => $next.run($ctx, $params),
        }
    };
}

request_hooks! {
    /// `initialize` (hook `on_initialize`).
    Initialize(Initialize, "initialize", on_initialize): InitializeRequestParams => InitializeResult;
    /// `server/discover` (hook `on_discover`).
    Discover(Discover, "server/discover", on_discover): DiscoverRequestParams => DiscoverResult;
    /// `tools/list` (hook `on_tools_list`).
    ToolsList(ToolsList, "tools/list", on_tools_list): Option<PaginatedRequestParams> => ListToolsResult;
    /// `tools/call` (hook `on_tool_call`).
    ToolCall(ToolCall, "tools/call", on_tool_call): CallToolRequestParams => CallToolResult;
    /// `resources/list` (hook `on_resources_list`).
    ResourcesList(ResourcesList, "resources/list", on_resources_list): Option<PaginatedRequestParams> => ListResourcesResult;
    /// `resources/templates/list` (hook `on_resource_templates_list`).
    ResourceTemplatesList(ResourceTemplatesList, "resources/templates/list", on_resource_templates_list): Option<PaginatedRequestParams> => ListResourceTemplatesResult;
    /// `resources/read` (hook `on_resource_read`).
    ResourceRead(ResourceRead, "resources/read", on_resource_read): ReadResourceRequestParams => ReadResourceResult;
    /// `resources/subscribe` (hook `on_resource_subscribe`).
    ResourceSubscribe(ResourceSubscribe, "resources/subscribe", on_resource_subscribe): SubscribeRequestParams => EmptyResult;
    /// `resources/unsubscribe` (hook `on_resource_unsubscribe`).
    ResourceUnsubscribe(ResourceUnsubscribe, "resources/unsubscribe", on_resource_unsubscribe): UnsubscribeRequestParams => EmptyResult;
    /// `prompts/list` (hook `on_prompts_list`).
    PromptsList(PromptsList, "prompts/list", on_prompts_list): Option<PaginatedRequestParams> => ListPromptsResult;
    /// `prompts/get` (hook `on_prompt_get`).
    PromptGet(PromptGet, "prompts/get", on_prompt_get): GetPromptRequestParams => GetPromptResult;
    /// `completion/complete` (hook `on_completion`).
    Completion(Completion, "completion/complete", on_completion): CompleteRequestParams => CompleteResult;
    /// `logging/setLevel` (hook `on_set_level`).
    SetLevel(SetLevel, "logging/setLevel", on_set_level): SetLevelRequestParams => EmptyResult;
}

macro_rules! raw_hooks {
    ($( $(#[$doc:meta])* $marker:ident($id:ident, $fn:ident): $params:ty => $output:ty; )*) => {
        $(
            $(#[$doc])*
            #[derive(Debug, Clone, Copy)]
            pub struct $marker;

            impl Hook for $marker {
                type Params = $params;
                type Output = $output;
                const ID: HookId = HookId::$id;

                fn enter<'a>(
                    layer: &'a dyn Layer,
                    ctx: &'a Context,
                    params: Self::Params,
                    next: Next<'a, Self>,
                ) -> BoxFuture<'a, HookResult<Self::Output>> {
                    layer.$fn(ctx, params, next)
                }
            }
        )*
    };
}

raw_hooks! {
    /// Any client request (hook `on_request`).
    Request(Request, on_request): RawRequest => Value;
    /// A client notification (hook `on_client_notification`).
    ClientNotification(ClientNotification, on_client_notification): RawNotification => ();
    /// An upstream notification (hook `on_server_notification`).
    ServerNotification(ServerNotification, on_server_notification): RawNotification => ();
    /// A request from the upstream to the client (hook `on_server_request`).
    ServerRequest(ServerRequest, on_server_request): RawRequest => Value;
}
