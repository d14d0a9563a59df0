//! [`Context`]: what a hook knows and can do.
//!
//! A context belongs to one request of one session. Through it a hook reads the session (id,
//! identity, negotiated protocol version, client info and capabilities), its model's `Config`,
//! any model's per-session `State`, the project, and the request's cancellation; it can call the
//! upstream directly ([`UpstreamHandle`]) and talk to the client ([`Downstream`]).

use std::any::{Any, TypeId, type_name};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ErrorData, Implementation,
    InitializeRequestParams, ListToolsResult,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::auth;
use crate::error::HookResult;
use crate::exchange::IdSource;
use crate::jsonrpc;
use crate::model_state::StateDescriptor;
use crate::project::Project;

/// [`Identity`](crate::auth::Identity) lived here; it belongs to [`crate::auth`] now.
///
/// ```
/// #[allow(deprecated)]
/// use mcp_middleware::context::Identity;
/// assert_eq!(Identity::Anonymous, mcp_middleware::auth::Identity::Anonymous);
/// ```
#[deprecated(note = "moved to `mcp_middleware::auth::Identity`")]
pub type Identity = auth::Identity;

/// The raw outcome of a request made through the session loop: the result's JSON text, or the
/// error.
pub(crate) type RawOutcome = Result<String, ErrorData>;

/// What chain tasks ask of the session loop, which owns the connections and the id maps.
#[derive(Debug)]
pub(crate) enum LoopCall {
    /// Send a request upstream under `uid`, for the hooked client request `call` (0: none).
    Upstream {
        uid: u64,
        call: u64,
        method: String,
        params: Option<String>,
        reply: oneshot::Sender<RawOutcome>,
    },
    /// A request made with [`UpstreamHandle`] is no longer wanted.
    CancelUpstream { uid: u64 },
    /// Ask the client.
    Client {
        method: String,
        params: Option<String>,
        reply: oneshot::Sender<RawOutcome>,
    },
    /// A hooked client request finished.
    Finished { call: u64, outcome: RawOutcome },
    /// Ask the client something on behalf of hooked request `call` (`ctx.llm()`'s sampling):
    /// a real request to a client that can receive one, else an input round of `call`
    /// (2026-07-28). `ask` names the question for [`LoopCall::AskDone`].
    Ask {
        call: u64,
        ask: u64,
        method: String,
        params: Option<String>,
        reply: oneshot::Sender<RawOutcome>,
    },
    /// The hook no longer awaits the answer to `ask` (answered, or its future was dropped): a
    /// request still open at the client is cancelled there.
    AskDone { ask: u64 },
    /// A client notification came out of the hooks: send it on as the proxy would have.
    ClientNotification { line: String },
    /// An upstream request to the client was answered by the hooks.
    AnswerUpstream {
        upstream_id: Box<str>,
        outcome: RawOutcome,
    },
}

/// The channels from hooks to the session loop.
#[derive(Debug, Clone)]
pub(crate) struct SessionLink {
    pub(crate) calls: mpsc::UnboundedSender<LoopCall>,
    pub(crate) to_client: crate::transport::queue::LineQueue,
    /// The chain's upstream end: requests hooks write to the upstream themselves.
    pub(crate) upstream: Arc<dyn DirectUpstream>,
}

/// The chain's upstream end as a context writes to it (`session::UpstreamEnd` implements it;
/// the session sits above this module).
pub(crate) trait DirectUpstream: std::fmt::Debug + Send + Sync {
    /// Writes a request upstream for hooked call `call` and returns its id and the answer to
    /// come, or gives `params` back when the request must go through the session loop.
    fn send(
        &self,
        call: u64,
        method: &str,
        params: Option<String>,
    ) -> Result<(u64, oneshot::Receiver<RawOutcome>), Option<String>>;
    /// The session's upstream ids, for a request that goes through the loop.
    fn ids(&self) -> &IdSource;
    /// The answer to request `uid` is no longer awaited: it is cancelled upstream.
    fn cancel(&self, uid: u64, reason: &str);
}

/// What the session learned from the client's `initialize` (or 2026-07-28 envelope).
#[derive(Debug, Default)]
pub(crate) struct SessionInfo {
    pub(crate) initialize: Option<InitializeRequestParams>,
    pub(crate) protocol_version: Option<String>,
}

/// The chain a session's hooks run in, as a context reaches it: [`crate::chain::Chain`]
/// implements it. A context holds the chain behind this trait because the chain's layers take
/// contexts (`crate::model`): the chain sits above this module (see the crate's layering).
pub(crate) trait SessionChain: Send + Sync {
    /// The validated `Config` of the model whose config type is `type_id`.
    fn config(&self, type_id: TypeId) -> Option<&(dyn Any + Send + Sync)>;
    /// The `State` types a session keeps, one per model that has one.
    fn state_types(&self) -> &[StateDescriptor];
    /// The chain's innermost step on the way in (routes): the params to send the upstream, or
    /// the refusal.
    fn check_upstream_request(
        &self,
        method: &str,
        params: Option<String>,
        who: &auth::Identity,
    ) -> HookResult<Option<String>>;
    /// The chain's innermost step on the way out (routes): the upstream's answer as the models
    /// see it, and for a listing the upstream's pass-through entries.
    fn filter_upstream_answer(
        &self,
        method: &str,
        raw: String,
        who: &auth::Identity,
    ) -> HookResult<(String, Option<Vec<Value>>)>;
    /// The chain as [`Context::below`](crate::Context::below) runs it (`crate::below`).
    fn below(&self) -> &dyn BelowChain;
    /// Which routes the chain applies now: a number that changes whenever a live reload
    /// installs other routes (0: none).
    fn routes_version(&self) -> u64;
}

/// What [`Context::below`](crate::Context::below) asks of the chain: its layers by name, and
/// requests run through the routes, the layers named and the upstream (`crate::below`
/// implements it for the chain, above the dispatch it needs).
pub(crate) trait BelowChain: Send + Sync {
    /// The names of the layers under the one called `model`, outermost first; none when no
    /// layer has that name (so a model can never re-enter itself).
    fn layers_below(&self, model: &str) -> Vec<&'static str>;
    /// The names of the synthetic tools the layers in `below` add.
    fn synthetic_tools(&self, below: &[&'static str]) -> Vec<&'static str>;
    /// A `tools/call` with raw `params` through the routes, the layers in `below` and the
    /// upstream, observed: its raw result.
    fn call_tool<'a>(
        &'a self,
        ctx: &'a Context,
        below: &'a [&'static str],
        params: Option<String>,
    ) -> Pin<Box<dyn Future<Output = HookResult<String>> + Send + 'a>>;
    /// A `tools/list` with raw `params` through the layers in `below`, without what the routes
    /// hide: its raw result.
    fn list_tools<'a>(
        &'a self,
        ctx: &'a Context,
        below: &'a [&'static str],
        params: Option<String>,
    ) -> Pin<Box<dyn Future<Output = HookResult<String>> + Send + 'a>>;
}

/// Everything a session's hooks share.
pub(crate) struct SessionScope {
    pub(crate) id: String,
    /// Who the session acts as now (its latest request's credential).
    pub(crate) identity: Arc<auth::CurrentIdentity>,
    pub(crate) info: RwLock<SessionInfo>,
    pub(crate) chain: Arc<dyn SessionChain>,
    pub(crate) states: HashMap<TypeId, Mutex<Box<dyn Any + Send>>>,
    /// Per state: whether a hook took it mutably since the shared store last saved it (so
    /// a state no hook touched is neither serialised nor written).
    pub(crate) dirty: HashMap<TypeId, std::sync::atomic::AtomicBool>,
    pub(crate) link: SessionLink,
    pub(crate) project: Option<Arc<Project>>,
    /// How many live reloads the session has moved to (its servers are the newest one's).
    pub(crate) reloads: AtomicU64,
}

impl SessionScope {
    pub(crate) fn new(
        id: String,
        identity: auth::Identity,
        chain: Arc<dyn SessionChain>,
        link: SessionLink,
        project: Option<Arc<Project>>,
    ) -> Self {
        let states = chain
            .state_types()
            .iter()
            .map(|state| ((state.type_id)(), Mutex::new((state.new)())))
            .collect();
        let dirty = chain
            .state_types()
            .iter()
            .map(|state| ((state.type_id)(), std::sync::atomic::AtomicBool::new(false)))
            .collect();
        Self {
            id,
            identity: Arc::new(auth::CurrentIdentity::new(identity)),
            info: RwLock::new(SessionInfo::default()),
            chain,
            states,
            dirty,
            link,
            project,
            reloads: AtomicU64::new(0),
        }
    }
}

/// Which configuration a session runs: see [`Context::configuration`]. Opaque; compare it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Configuration {
    routes: u64,
    reloads: u64,
}

/// What a hook knows and can do: the session, config, state, upstream, client, project and the
/// request's cancellation.
///
/// ```
/// use mcp_middleware::prelude::*;
///
/// #[proxy_model]
/// pub mod counting {
///     use mcp_middleware::prelude::*;
///
///     /// Calls seen in this session.
///     #[derive(Default)]
///     pub struct State {
///         pub calls: u64,
///     }
///
///     pub async fn on_tool_call(
///         ctx: &Context,
///         params: CallToolRequestParams,
///         next: Next<'_, hooks::ToolCall>,
///     ) -> HookResult<CallToolResult> {
///         let calls = ctx.state(|state: &mut State| {
///             state.calls += 1;
///             state.calls
///         })?;
///         tracing::debug!(calls, session = ctx.session_id(), "tool call");
///         next.run(ctx, params).await
///     }
/// }
/// ```
#[derive(Clone)]
pub struct Context {
    session: Arc<SessionScope>,
    /// Who the client was when this request arrived: a later request's narrower credential
    /// does not change what a request already running may do.
    identity: Arc<auth::Identity>,
    /// The hooked client request this context serves (0: none).
    call: u64,
    cancel: CancellationToken,
    request: Arc<RequestState>,
}

/// What the contexts of one request share.
#[derive(Debug, Default)]
struct RequestState {
    /// Whether anything of the request was sent upstream.
    reached_upstream: AtomicBool,
    /// With routes: the upstream's pass-through entries of the listing this request fetched
    /// (`crate::routing`), for the final answer.
    listed: Mutex<Option<Vec<Value>>>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("session", &self.session.id)
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

impl Context {
    pub(crate) fn new(session: Arc<SessionScope>, call: u64, cancel: CancellationToken) -> Self {
        Self {
            identity: session.identity.get(),
            session,
            call,
            cancel,
            request: Arc::default(),
        }
    }

    /// The hooked client request this context serves (0: none).
    pub(crate) fn call_id(&self) -> u64 {
        self.call
    }

    /// Whether anything of this request was sent upstream (a request answered without it was
    /// rejected inside the proxy, for observers).
    pub(crate) fn reached_upstream(&self) -> bool {
        self.request.reached_upstream.load(Ordering::Relaxed)
    }

    /// The upstream's pass-through entries of the listing this request fetched, if it did.
    pub(crate) fn take_listed(&self) -> Option<Vec<Value>> {
        match self.request.listed.lock() {
            Ok(mut listed) => listed.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        }
    }

    /// The session's id. For a stateful HTTP session it is derived from its `Mcp-Session-Id`
    /// (`http-` and 24 hex digits of the header's SHA-256): the same on every replica that
    /// serves the session (`serve --store`), so audit records and logs of one session agree
    /// wherever it ran, without spreading the header itself (what a client presents to use
    /// the session). A stdio session, or a stateless (2026-07-28) one, has an id unique within
    /// this proxy process.
    pub fn session_id(&self) -> &str {
        &self.session.id
    }

    /// Who the client is: on HTTP, what this request's credential says (a session keeps its
    /// principal, but a later token with fewer scopes or other claims is what counts from
    /// the request it came with on).
    pub fn identity(&self) -> &auth::Identity {
        &self.identity
    }

    /// Which configuration the session runs now: what its routes hide and which servers it
    /// reaches. It changes whenever a live reload changes either (the routes at once, for
    /// every session; the servers when the session has moved to them), so a model that
    /// caches what it learned from below (code mode's catalog of tools) knows when to look
    /// again. Equal values mean nothing a reload changes has changed.
    ///
    /// ```
    /// # use mcp_middleware::Context;
    /// # fn cached(ctx: &Context, built_under: mcp_middleware::Configuration) -> bool {
    /// ctx.configuration() == built_under
    /// # }
    /// ```
    pub fn configuration(&self) -> Configuration {
        Configuration {
            routes: self.session.chain.routes_version(),
            reloads: self.session.reloads.load(Ordering::Acquire),
        }
    }

    /// The protocol version the client negotiated (or declares per request on 2026-07-28), once
    /// known.
    pub fn protocol_version(&self) -> Option<String> {
        self.read_info(|info| info.protocol_version.clone())
    }

    /// The client's name and version, from its `initialize`.
    pub fn client_info(&self) -> Option<Implementation> {
        self.read_info(|info| info.initialize.as_ref().map(|i| i.client_info.clone()))
    }

    /// The capabilities the client declared.
    pub fn client_capabilities(&self) -> Option<ClientCapabilities> {
        self.read_info(|info| info.initialize.as_ref().map(|i| i.capabilities.clone()))
    }

    fn read_info<R>(&self, f: impl FnOnce(&SessionInfo) -> R) -> R {
        match self.session.info.read() {
            Ok(info) => f(&info),
            Err(poisoned) => f(&poisoned.into_inner()),
        }
    }

    /// The `Config` of a model in the chain, by type (its own: `ctx.config::<Config>()`).
    pub fn config<C: Any + Send + Sync>(&self) -> HookResult<&C> {
        self.session
            .chain
            .config(TypeId::of::<C>())
            .and_then(|config| config.downcast_ref::<C>())
            .ok_or_else(|| {
                ErrorData::internal_error(
                    format!(
                        "no model in this chain has the config type `{}`",
                        type_name::<C>()
                    ),
                    None,
                )
            })
    }

    /// Runs `f` on this session's `State` of a model in the chain, by type: a model's own
    /// (`ctx.state(|s: &mut State| ..)`) or another's (`|s: &mut gate::State| ..`). The state is
    /// locked only while `f` runs, so it cannot be held across an `.await`; do not call `state`
    /// for the same type inside `f`.
    pub fn state<S: Any + Send, R>(&self, f: impl FnOnce(&mut S) -> R) -> HookResult<R> {
        let missing = || {
            ErrorData::internal_error(
                format!(
                    "no model in this chain has the state type `{}`",
                    type_name::<S>()
                ),
                None,
            )
        };
        let slot = self
            .session
            .states
            .get(&TypeId::of::<S>())
            .ok_or_else(missing)?;
        let mut guard = match slot.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        let state = guard.downcast_mut::<S>().ok_or_else(missing)?;
        if let Some(dirty) = self.session.dirty.get(&TypeId::of::<S>()) {
            dirty.store(true, std::sync::atomic::Ordering::Release);
        }
        Ok(f(state))
    }

    /// The project the proxy serves, if it was given one.
    pub fn project(&self) -> Option<&Project> {
        self.session.project.as_deref()
    }

    /// Cancelled when the client cancels the request or leaves. The hook's future is dropped
    /// then too; the token is for work the hook started elsewhere.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// LLM completions: through the client's sampling, else the project's OpenAI-compatible
    /// endpoint (see [`crate::llm`]).
    pub fn llm(&self) -> crate::llm::Llm<'_> {
        crate::llm::Llm::new(self)
    }

    /// The project's key-value cache, shared by all its sessions (see [`crate::cache`]).
    pub fn cache(&self) -> crate::cache::Cache {
        crate::cache::for_project(self.project().map_or("", |project| project.name.as_str()))
    }

    /// The upstream: call any of its methods directly, outside the chain.
    pub fn upstream(&self) -> UpstreamHandle<'_> {
        UpstreamHandle { ctx: self }
    }

    /// The client: send it notifications or ask it something.
    pub fn downstream(&self) -> Downstream<'_> {
        Downstream { ctx: self }
    }

    /// Sends a request upstream and waits for the raw result. Dropping the future cancels the
    /// request upstream. With routes (`crate::routing`), a request for something hidden is
    /// refused here and a listing comes back without hidden entries.
    pub(crate) async fn upstream_raw(
        &self,
        method: &str,
        params: Option<String>,
    ) -> HookResult<String> {
        // The chain's innermost step (routes): decided on what is sent, which a hook may have
        // changed; what was checked is what is sent.
        let chain = &self.session.chain;
        let params = chain.check_upstream_request(method, params, self.identity())?;
        let raw = self.send_upstream(method, params).await?;
        let (raw, listed) = chain.filter_upstream_answer(method, raw, self.identity())?;
        if let Some(listed) = listed {
            match self.request.listed.lock() {
                Ok(mut slot) => *slot = Some(listed),
                Err(poisoned) => *poisoned.into_inner() = Some(listed),
            }
        }
        Ok(raw)
    }

    async fn send_upstream(&self, method: &str, params: Option<String>) -> HookResult<String> {
        let link = &self.session.link;
        self.request.reached_upstream.store(true, Ordering::Relaxed);
        // Straight to the upstream when the session allows it; through the loop otherwise.
        let params = match link.upstream.send(self.call, method, params) {
            Ok((uid, answer)) => {
                let mut in_flight = InFlight {
                    uid,
                    cancel: Cancel::Direct(&link.upstream),
                    answered: false,
                };
                let outcome = answer.await.map_err(|_| session_ended(method))?;
                in_flight.answered = true;
                return outcome;
            }
            Err(params) => params,
        };
        let uid = link.upstream.ids().next();
        let (reply, answer) = oneshot::channel();
        link.calls
            .send(LoopCall::Upstream {
                uid,
                call: self.call,
                method: method.to_owned(),
                params,
                reply,
            })
            .map_err(|_| session_ended(method))?;
        let mut in_flight = InFlight {
            uid,
            cancel: Cancel::Loop(&link.calls),
            answered: false,
        };
        let outcome = answer.await.map_err(|_| session_ended(method))?;
        in_flight.answered = true;
        outcome
    }

    pub(crate) async fn client_raw(
        &self,
        method: &str,
        params: Option<String>,
    ) -> HookResult<String> {
        let (reply, answer) = oneshot::channel();
        self.session
            .link
            .calls
            .send(LoopCall::Client {
                method: method.to_owned(),
                params,
                reply,
            })
            .map_err(|_| session_ended(method))?;
        answer.await.map_err(|_| session_ended(method))?
    }

    pub(crate) fn scope(&self) -> &SessionScope {
        &self.session
    }
}

fn session_ended(method: &str) -> ErrorData {
    ErrorData::new(
        rmcp::model::ErrorCode(jsonrpc::UPSTREAM_UNAVAILABLE as i32),
        format!("the session ended before `{method}` was answered"),
        None,
    )
}

/// Cancels an upstream request whose answer is no longer awaited.
struct InFlight<'a> {
    uid: u64,
    cancel: Cancel<'a>,
    answered: bool,
}

/// Who sent an [`InFlight`] request, and so cancels it.
enum Cancel<'a> {
    /// The session loop.
    Loop(&'a mpsc::UnboundedSender<LoopCall>),
    /// The hook's task, through the chain's upstream end.
    Direct(&'a Arc<dyn DirectUpstream>),
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        match self.cancel {
            Cancel::Loop(calls) => {
                let _ = calls.send(LoopCall::CancelUpstream { uid: self.uid });
            }
            Cancel::Direct(end) => end.cancel(self.uid, "the request was cancelled in the proxy"),
        }
    }
}

pub(crate) fn to_params<P: Serialize>(params: &P) -> HookResult<Option<String>> {
    let text = serde_json::to_string(params).map_err(|err| {
        ErrorData::internal_error(format!("request params could not be written: {err}"), None)
    })?;
    Ok((text != "null").then_some(text))
}

pub(crate) fn from_result<R: DeserializeOwned>(method: &str, raw: &str) -> HookResult<R> {
    serde_json::from_str(raw).map_err(|err| {
        ErrorData::internal_error(
            format!("the upstream's `{method}` result does not fit its type: {err}"),
            None,
        )
    })
}

/// The upstream, as a hook calls it directly (outside the chain: no model sees these calls).
#[derive(Debug, Clone, Copy)]
pub struct UpstreamHandle<'a> {
    ctx: &'a Context,
}

impl UpstreamHandle<'_> {
    /// Sends any request and returns its result.
    pub async fn request(&self, method: &str, params: Option<Value>) -> HookResult<Value> {
        let params = match params {
            Some(params) => to_params(&params)?,
            None => None,
        };
        let raw = self.ctx.upstream_raw(method, params).await?;
        from_result(method, &raw)
    }

    /// Calls a tool.
    pub async fn call_tool(&self, params: CallToolRequestParams) -> HookResult<CallToolResult> {
        let raw = self
            .ctx
            .upstream_raw("tools/call", to_params(&params)?)
            .await?;
        from_result("tools/call", &raw)
    }

    /// Lists the upstream's tools (one page: pass the cursor with [`UpstreamHandle::request`] for
    /// more).
    pub async fn list_tools(&self) -> HookResult<ListToolsResult> {
        let raw = self.ctx.upstream_raw("tools/list", None).await?;
        from_result("tools/list", &raw)
    }
}

/// The old name of [`UpstreamHandle`], kept so code written against it still builds.
#[deprecated(note = "renamed `UpstreamHandle` (`upstream::Upstream` is the server enum)")]
pub type Upstream<'a> = UpstreamHandle<'a>;

/// The client, as a hook talks to it.
#[derive(Debug, Clone, Copy)]
pub struct Downstream<'a> {
    ctx: &'a Context,
}

impl Downstream<'_> {
    /// Sends the client a notification.
    pub fn notify(&self, method: &str, params: Option<Value>) -> HookResult<()> {
        let params = match params {
            Some(params) => to_params(&params)?,
            None => None,
        };
        self.ctx
            .session
            .link
            .to_client
            .send(jsonrpc::notification(method, params.as_deref()))
            .map_err(|_| session_ended(method))
    }

    /// Tells the client the tool list changed (`notifications/tools/list_changed`).
    pub fn tools_list_changed(&self) -> HookResult<()> {
        self.notify("notifications/tools/list_changed", None)
    }

    /// Sends the client a log message (`notifications/message`).
    pub fn log(&self, level: &str, logger: &str, data: Value) -> HookResult<()> {
        self.notify(
            "notifications/message",
            Some(serde_json::json!({ "level": level, "logger": logger, "data": data })),
        )
    }

    /// Sends the client a request (such as `elicitation/create`) and returns its answer.
    pub async fn request(&self, method: &str, params: Option<Value>) -> HookResult<Value> {
        let params = match params {
            Some(params) => to_params(&params)?,
            None => None,
        };
        let raw = self.ctx.client_raw(method, params).await?;
        from_result(method, &raw)
    }
}

/// What a completion needs of the hook's context (`crate::llm` sits below the context).
impl crate::llm::LlmHost for Context {
    fn endpoint(&self) -> Option<&crate::llm::LlmEndpoint> {
        self.project().and_then(|project| project.llm.as_ref())
    }

    fn protocol_version(&self) -> Option<String> {
        Context::protocol_version(self)
    }

    fn client_capabilities(&self) -> Option<ClientCapabilities> {
        Context::client_capabilities(self)
    }

    fn call_id(&self) -> u64 {
        Context::call_id(self)
    }

    fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    fn ask(&self, ask: u64, method: &str, params: String) -> Option<oneshot::Receiver<RawOutcome>> {
        let (reply, answer) = oneshot::channel();
        self.session
            .link
            .calls
            .send(LoopCall::Ask {
                call: self.call,
                ask,
                method: method.to_owned(),
                params: Some(params),
                reply,
            })
            .ok()?;
        Some(answer)
    }

    fn ask_done(&self, ask: u64) {
        let _ = self.session.link.calls.send(LoopCall::AskDone { ask });
    }
}
