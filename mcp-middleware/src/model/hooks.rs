//! The hook catalogue: every point where a proxy model can step into the protocol.
//!
//! Each hook has a name (the function name a model defines, such as `on_tool_call`), an id
//! ([`HookId`], used for the compile-time conflict checks and the registry), and, for the hooks
//! that take `next`, a marker type implementing [`Hook`] that names what goes in and what comes
//! out. All of it is generated from one table (`hook_table.rs`), which `#[proxy_model]` reads
//! too. Each hook's contract, in the manner of Pingora's `ProxyHttp` (when it runs, what happens
//! if no model implements it, how to answer without going further, and when it does not run),
//! is on its [`Layer`] method and its marker type here.
//!
//! ## Request hooks (client to server)
//!
//! A request hook is an async function `(ctx: &Context, params: P, next: Next<'_, H>) ->
//! HookResult<R>`: `P` and `R` are `H`'s [`Hook::Params`] and [`Hook::Output`] (rmcp's types;
//! the list requests take `Option<PaginatedRequestParams>`). It runs when the client sends that
//! request, outermost model first. `next.run(ctx, params).await` passes the (possibly changed)
//! request to the next layer and, at the end of the chain, to the upstream; the hook may change
//! what comes back. To **short-circuit**, return a result (or an error) without calling `next`:
//! nothing further in, and not the upstream, sees the request. Calling `next` more than once
//! sends the request more than once. If no model in the chain implements a hook, the request is
//! forwarded as raw bytes and never parsed. A request's params are read once and its
//! result written once, whatever the number of hooks; every hook passes the same typed value on.
//!
//! `on_request` ([`Request`]) sees every request, including methods this crate does not know;
//! the `on_request` hooks of all models run before any typed hook.
//!
//! ## Notifications and server requests
//!
//! [`ClientNotification`], [`ServerNotification`] and [`ServerRequest`] take `next` too: a
//! notification hook drops the notification by returning `Ok(())` without calling `next`, a
//! server-request hook answers the upstream itself by returning without calling `next`.
//!
//! ## Content, sessions, tools and observers
//!
//! - `transform_content`, `on_session_start` and `on_session_end` take no `next`: see
//!   [`Layer::transform_content`], [`Layer::on_session_start`], [`Layer::on_session_end`].
//! - Synthetic tools (`#[tool]` functions) are not hooks: they are listed and answered at
//!   the model's place in the chain, just inside the model's own hooks: its own hooks and outer
//!   models see them like the upstream's tools and may filter them (a model's `on_tool_call`
//!   sees calls to its own tools too).
//! - Observers (`#[observer]` functions) are not in the chain: they see every request's
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

// Owned by `crate::error` (the context, below this module, returns it too).
pub use crate::error::HookResult;

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

/// The hook ids, from the hook table (`hook_table.rs`).
macro_rules! hook_ids {
    (
        typed { $( $(#[$tdoc:meta])* $tid:ident, $tfn:ident, $method:literal: $tp:ty => $to:ty; )* }
        raw { $( $(#[$rdoc:meta])* $rid:ident, $rfn:ident: $rp:ty => $ro:ty; )* }
        transform { $( $(#[$xdoc:meta])* $xid:ident, $xfn:ident; )* }
        session { $( $(#[$sdoc:meta])* $sid:ident, $sfn:ident; )* }
    ) => {
        /// Every hook a model can implement, by name. The order is the bit order of [`HookSet`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum HookId {
            $( $(#[$tdoc])* $tid, )*
            $( $(#[$rdoc])* $rid, )*
            $( $(#[$xdoc])* $xid, )*
            $( $(#[$sdoc])* $sid, )*
        }

        impl HookId {
            /// Every hook, in catalogue order.
            pub const ALL: &'static [HookId] = &[
                $(HookId::$tid,)* $(HookId::$rid,)* $(HookId::$xid,)* $(HookId::$sid,)*
            ];
            /// How many hooks there are.
            pub const COUNT: usize = HookId::ALL.len();

            /// The function name a model defines to implement this hook.
            pub const fn name(self) -> &'static str {
                match self {
                    $(HookId::$tid => stringify!($tfn),)*
                    $(HookId::$rid => stringify!($rfn),)*
                    $(HookId::$xid => stringify!($xfn),)*
                    $(HookId::$sid => stringify!($sfn),)*
                }
            }

            /// The JSON-RPC method of a typed request hook.
            pub const fn method(self) -> Option<&'static str> {
                match self {
                    $(HookId::$tid => Some($method),)*
                    _ => None,
                }
            }

            /// The params and result types of this hook as the hook table spells them
            /// (`stringify!`), for the check that the macro's catalogue agrees.
            #[cfg(test)]
            pub(crate) fn signature_types(self) -> (&'static str, &'static str) {
                match self {
                    $(HookId::$tid => (stringify!($tp), stringify!($to)),)*
                    $(HookId::$rid => (stringify!($rp), stringify!($ro)),)*
                    $(HookId::$xid => ("Content", "String"),)*
                    $(HookId::$sid => ("", "()"),)*
                }
            }
        }
    };
}

super::hook_table::for_each_hook!(hook_ids);

impl HookId {
    /// The hook called `name`, if there is one.
    pub fn from_name(name: &str) -> Option<HookId> {
        HookId::ALL.iter().copied().find(|hook| hook.name() == name)
    }

    /// The typed request hook for a JSON-RPC method.
    pub fn for_method(method: &str) -> Option<HookId> {
        HookId::ALL
            .iter()
            .copied()
            .find(|hook| hook.method() == Some(method))
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

/// The marker types, from the hook table (`hook_table.rs`).
macro_rules! markers {
    (
        typed { $( $(#[$tdoc:meta])* $tid:ident, $tfn:ident, $method:literal: $tp:ty => $to:ty; )* }
        raw { $( $(#[$rdoc:meta])* $rid:ident, $rfn:ident: $rp:ty => $ro:ty; )* }
        transform { $($transform:tt)* }
        session { $($session:tt)* }
    ) => {
        $(
            $(#[$tdoc])*
            #[derive(Debug, Clone, Copy)]
            pub struct $tid;

            impl Hook for $tid {
                type Params = $tp;
                type Output = $to;
                const ID: HookId = HookId::$tid;

                fn enter<'a>(
                    layer: &'a dyn Layer,
                    ctx: &'a Context,
                    params: Self::Params,
                    next: Next<'a, Self>,
                ) -> BoxFuture<'a, HookResult<Self::Output>> {
                    layer.$tfn(ctx, params, next)
                }

                fn step<'a>(
                    step: &'a Step,
                    ctx: &'a Context,
                    params: Self::Params,
                    next: Next<'a, Self>,
                ) -> BoxFuture<'a, HookResult<Self::Output>> {
                    special_step!($tid, step, ctx, params, next)
                }
            }

            impl RequestHook for $tid {
                const METHOD: &'static str = $method;
            }
        )*
        $(
            $(#[$rdoc])*
            #[derive(Debug, Clone, Copy)]
            pub struct $rid;

            impl Hook for $rid {
                type Params = $rp;
                type Output = $ro;
                const ID: HookId = HookId::$rid;

                fn enter<'a>(
                    layer: &'a dyn Layer,
                    ctx: &'a Context,
                    params: Self::Params,
                    next: Next<'a, Self>,
                ) -> BoxFuture<'a, HookResult<Self::Output>> {
                    layer.$rfn(ctx, params, next)
                }
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

super::hook_table::for_each_hook!(markers);

#[cfg(test)]
mod tests {
    use super::HookId;

    fn spelled(tokens: &str) -> String {
        tokens.chars().filter(|c| !c.is_whitespace()).collect()
    }

    /// `#[proxy_model]` checks functions against its own catalogue: it must be this table, hook
    /// for hook and in the same order (the order is `HookSet`'s bit order, which the macro's
    /// generated code relies on).
    #[test]
    fn the_macros_catalogue_is_the_librarys_table() {
        let catalogue: &[(&str, &str, &str, &str)] = mcp_middleware_macros::__hook_catalogue!();
        let table: Vec<(String, String, String, String)> = HookId::ALL
            .iter()
            .map(|hook| {
                let (params, output) = hook.signature_types();
                (
                    hook.name().to_owned(),
                    format!("{hook:?}"),
                    spelled(params),
                    spelled(output),
                )
            })
            .collect();
        let catalogue: Vec<(String, String, String, String)> = catalogue
            .iter()
            .map(|(name, id, params, output)| {
                (
                    (*name).to_owned(),
                    (*id).to_owned(),
                    (*params).to_owned(),
                    (*output).to_owned(),
                )
            })
            .collect();
        assert_eq!(catalogue, table);
        assert_eq!(HookId::COUNT, catalogue.len());
    }

    #[test]
    fn names_and_methods_round_trip() {
        for hook in HookId::ALL {
            assert_eq!(HookId::from_name(hook.name()), Some(*hook));
            if let Some(method) = hook.method() {
                assert_eq!(HookId::for_method(method), Some(*hook));
            }
        }
        assert_eq!(HookId::for_method("tools/call"), Some(HookId::ToolCall));
        assert_eq!(HookId::ToolsList.method(), Some("tools/list"));
        assert_eq!(HookId::Request.method(), None);
        assert_eq!(HookId::from_name("on_tool_calls"), None);
    }
}
