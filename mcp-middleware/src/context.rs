//! [`Context`]: what a hook knows and can do (SPEC F9).
//!
//! A context belongs to one request of one session. Through it a hook reads the session (id,
//! identity, negotiated protocol version, client info and capabilities), its model's `Config`,
//! any model's per-session `State`, the project, and the request's cancellation; it can call the
//! upstream directly ([`UpstreamHandle`]) and talk to the client ([`Downstream`]).

use std::any::{Any, TypeId, type_name};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
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

use crate::chain::Chain;
use crate::jsonrpc;
use crate::model::HookResult;
use crate::project::Project;

/// Who is on the other end of a session (SPEC T5).
///
/// Resolved once, when the session starts, and the same for every hook and observer of the
/// session ([`Context::identity`]). On stdio it is the local user; on the HTTP front it comes
/// from the credential the client authenticated with (see [`crate::auth`]): a bearer token from
/// the token list, a verified JWT, or a TLS client certificate; with no authentication
/// configured, an HTTP client is [`Identity::Anonymous`].
///
/// ```
/// use mcp_middleware::Identity;
///
/// let local = Identity::local_user();
/// assert_eq!(local.kind(), "local");
/// assert!(!local.subject().is_empty());
/// assert_eq!(Identity::Anonymous.subject(), "anonymous");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Identity {
    /// A stdio client: the local user who started the proxy.
    LocalUser {
        /// The user name (`$USER`, or `unknown`).
        name: String,
    },
    /// An HTTP client of a front that authenticates no one.
    Anonymous,
    /// An HTTP client that presented a bearer token from the configured token list.
    Token {
        /// The subject the token list maps the token to.
        subject: String,
    },
    /// An HTTP client that presented a JWT the proxy verified.
    Jwt {
        /// The configured subject claim (`sub` by default).
        subject: String,
        /// The `iss` claim, if any.
        issuer: Option<String>,
        /// Every claim of the token that started the session.
        claims: serde_json::Map<String, Value>,
    },
    /// An HTTP client that presented a TLS client certificate issued by the configured CA.
    Certificate {
        /// The subject's common name (CN), or the whole distinguished name when it has none.
        subject: String,
        /// The subject's distinguished name, as RFC 4514 writes it (`CN=alice,O=Example`).
        distinguished_name: String,
        /// The issuer's distinguished name (RFC 4514): two CAs may issue the same subject.
        issuer: String,
    },
}

impl Identity {
    /// The local user: on Unix the name the user database gives the process's user id (so it
    /// holds with `$USER` unset or wrong), else `$USER` (or `$USERNAME`), else the user id
    /// itself (a container's user without a passwd entry).
    pub fn local_user() -> Self {
        let from_env = || {
            std::env::var("USER")
                .or_else(|_| std::env::var("USERNAME"))
                .ok()
        };
        #[cfg(unix)]
        let name = {
            let uid = nix::unistd::Uid::current();
            match nix::unistd::User::from_uid(uid) {
                Ok(Some(user)) => user.name,
                _ => from_env().unwrap_or_else(|| uid.to_string()),
            }
        };
        #[cfg(not(unix))]
        let name = from_env().unwrap_or_else(|| "unknown".to_owned());
        Identity::LocalUser { name }
    }

    /// The name the identity goes by, for logs and audit records: the user name, the token
    /// list's subject, the JWT's subject claim, the certificate's common name, or `anonymous`.
    pub fn subject(&self) -> &str {
        match self {
            Identity::LocalUser { name } => name,
            Identity::Anonymous => "anonymous",
            Identity::Token { subject }
            | Identity::Jwt { subject, .. }
            | Identity::Certificate { subject, .. } => subject,
        }
    }

    /// How the identity was established: `local`, `anonymous`, `token`, `jwt` or `certificate`.
    pub fn kind(&self) -> &'static str {
        match self {
            Identity::LocalUser { .. } => "local",
            Identity::Anonymous => "anonymous",
            Identity::Token { .. } => "token",
            Identity::Jwt { .. } => "jwt",
            Identity::Certificate { .. } => "certificate",
        }
    }

    /// Whether a credential established it (a token, a JWT or a certificate).
    pub fn is_authenticated(&self) -> bool {
        matches!(
            self,
            Identity::Token { .. } | Identity::Jwt { .. } | Identity::Certificate { .. }
        )
    }

    /// The JWT's claims, for an identity from a JWT.
    pub fn claims(&self) -> Option<&serde_json::Map<String, Value>> {
        match self {
            Identity::Jwt { claims, .. } => Some(claims),
            _ => None,
        }
    }

    /// Who the identity is, independent of the credential's details: what a session is bound
    /// to, and what audit records and per-caller rules name. A refreshed JWT of the same issuer
    /// and subject is the same principal; a certificate is its issuer's and its subject's whole
    /// distinguished names, so two certificates with the same CN are two principals.
    ///
    /// # Syntax
    ///
    /// The kind, then each part of the identity, each part percent-encoded and joined with `:`:
    ///
    /// | identity | principal |
    /// |---|---|
    /// | [`LocalUser`](Identity::LocalUser) | `local:NAME` |
    /// | [`Anonymous`](Identity::Anonymous) | `anonymous` |
    /// | [`Token`](Identity::Token) | `token:SUBJECT` |
    /// | [`Jwt`](Identity::Jwt) with `iss` | `jwt:ISSUER:SUBJECT` |
    /// | [`Jwt`](Identity::Jwt) without `iss` | `jwt:SUBJECT` |
    /// | [`Certificate`](Identity::Certificate) | `certificate:ISSUER-DN:SUBJECT-DN` |
    ///
    /// Percent-encoding leaves only the RFC 3986 unreserved characters (`A-Z a-z 0-9 - . _ ~`)
    /// as they are and writes every other byte of the part's UTF-8 as `%XX` (upper-case hex),
    /// `:` and `%` included. So a part never contains `:`, the number of parts is fixed by the
    /// kind (a JWT without `iss` has one part fewer than one with an empty `iss`), and decoding
    /// each part gives back exactly the original strings: two different identities never have
    /// the same principal.
    ///
    /// ```
    /// use mcp_middleware::context::Identity;
    ///
    /// let jwt = |iss: &str, sub: &str| Identity::Jwt {
    ///     subject: sub.to_owned(),
    ///     issuer: Some(iss.to_owned()),
    ///     claims: Default::default(),
    /// };
    /// assert_eq!(jwt("https://idp:8443", "x").principal(), "jwt:https%3A%2F%2Fidp%3A8443:x");
    /// assert_eq!(jwt("https://idp", "8443:x").principal(), "jwt:https%3A%2F%2Fidp:8443%3Ax");
    /// assert_eq!(Identity::Anonymous.principal(), "anonymous");
    /// assert_eq!(
    ///     Identity::Token { subject: "ci bot".to_owned() }.principal(),
    ///     "token:ci%20bot"
    /// );
    /// ```
    pub fn principal(&self) -> String {
        let parts: Vec<&str> = match self {
            Identity::LocalUser { name } => vec![name],
            Identity::Anonymous => vec![],
            Identity::Token { subject } => vec![subject],
            Identity::Jwt {
                subject,
                issuer: Some(issuer),
                ..
            } => vec![issuer, subject],
            Identity::Jwt {
                subject,
                issuer: None,
                ..
            } => vec![subject],
            Identity::Certificate {
                distinguished_name,
                issuer,
                ..
            } => vec![issuer, distinguished_name],
        };
        let mut out = self.kind().to_owned();
        for part in parts {
            out.push(':');
            out.extend(percent_encoding::utf8_percent_encode(part, PRINCIPAL_PART));
        }
        out
    }
}

impl Identity {
    /// Why `text` can be no identity's [`principal`](Identity::principal), or `None` when it is
    /// well formed: a known kind with its number of parts, each part percent-encoded as
    /// `principal` writes it. For configurations, so that `jwt:https://idp:alice` (unencoded)
    /// is refused where it is written instead of never matching anyone.
    ///
    /// ```
    /// use mcp_middleware::Identity;
    ///
    /// assert!(Identity::principal_syntax_error("token:alice").is_none());
    /// assert!(Identity::principal_syntax_error("jwt:https%3A%2F%2Fidp:alice").is_none());
    /// assert!(Identity::principal_syntax_error("jwt:https://idp:alice").is_some());
    /// assert!(Identity::principal_syntax_error("user:alice").is_some());
    /// ```
    pub fn principal_syntax_error(text: &str) -> Option<String> {
        let mut parts = text.split(':');
        let kind = parts.next().unwrap_or_default();
        let parts: Vec<&str> = parts.collect();
        let counts: &[usize] = match kind {
            "anonymous" => &[0],
            "local" | "token" => &[1],
            "jwt" => &[1, 2],
            "certificate" => &[2],
            _ => {
                return Some(format!(
                    "`{text}` is not a principal: it must start with `local:`, `token:`, `jwt:`, \
                     `certificate:` or be `anonymous`"
                ));
            }
        };
        if !counts.contains(&parts.len()) {
            return Some(format!(
                "`{text}` is not a `{kind}` principal: it has {} part(s) after the kind, and \
                 each part's `:` must be written `%3A`",
                parts.len()
            ));
        }
        for part in parts {
            let decoded = percent_encoding::percent_decode_str(part).decode_utf8_lossy();
            let canonical: String =
                percent_encoding::utf8_percent_encode(&decoded, PRINCIPAL_PART).collect();
            if canonical != part {
                return Some(format!(
                    "`{text}` is not a principal as the proxy writes it: part `{part}` must be \
                     written `{canonical}` (every character but `A-Z a-z 0-9 - . _ ~` \
                     percent-encoded, upper-case hex)"
                ));
            }
        }
        None
    }
}

/// What a principal's parts encode: everything but RFC 3986's unreserved characters.
const PRINCIPAL_PART: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

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
    pub(crate) upstream: crate::session::UpstreamEnd,
}

/// What the session learned from the client's `initialize` (or 2026-07-28 envelope).
#[derive(Debug, Default)]
pub(crate) struct SessionInfo {
    pub(crate) initialize: Option<InitializeRequestParams>,
    pub(crate) protocol_version: Option<String>,
}

/// Everything a session's hooks share.
pub(crate) struct SessionScope {
    pub(crate) id: String,
    pub(crate) identity: Identity,
    pub(crate) info: RwLock<SessionInfo>,
    pub(crate) chain: Arc<Chain>,
    pub(crate) states: HashMap<TypeId, Mutex<Box<dyn Any + Send>>>,
    pub(crate) link: SessionLink,
    pub(crate) project: Option<Arc<Project>>,
}

impl SessionScope {
    pub(crate) fn new(
        id: String,
        identity: Identity,
        chain: Arc<Chain>,
        link: SessionLink,
        project: Option<Arc<Project>>,
    ) -> Self {
        let states = chain
            .state_types()
            .iter()
            .map(|state| ((state.type_id)(), Mutex::new((state.new)())))
            .collect();
        Self {
            id,
            identity,
            info: RwLock::new(SessionInfo::default()),
            chain,
            states,
            link,
            project,
        }
    }
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
            .field("identity", &self.session.identity)
            .finish_non_exhaustive()
    }
}

impl Context {
    pub(crate) fn new(session: Arc<SessionScope>, call: u64, cancel: CancellationToken) -> Self {
        Self {
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

    /// The session's id: unique within this proxy process.
    pub fn session_id(&self) -> &str {
        &self.session.id
    }

    /// Who the client is.
    pub fn identity(&self) -> &Identity {
        &self.session.identity
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
    Direct(&'a crate::session::UpstreamEnd),
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

#[cfg(test)]
mod tests {
    use super::Identity;

    fn jwt(issuer: Option<&str>, subject: &str) -> Identity {
        Identity::Jwt {
            subject: subject.to_owned(),
            issuer: issuer.map(str::to_owned),
            claims: Default::default(),
        }
    }

    fn certificate(issuer: &str, subject_dn: &str) -> Identity {
        Identity::Certificate {
            subject: "alice".to_owned(),
            distinguished_name: subject_dn.to_owned(),
            issuer: issuer.to_owned(),
        }
    }

    /// Decodes a principal back into its kind and parts: the syntax is injective.
    fn parts(principal: &str) -> Vec<String> {
        principal
            .split(':')
            .map(|part| {
                percent_encoding::percent_decode_str(part)
                    .decode_utf8()
                    .unwrap()
                    .into_owned()
            })
            .collect()
    }

    #[test]
    fn issuers_with_ports_and_subjects_with_colons_do_not_collide() {
        let a = jwt(Some("https://idp:8443"), "x");
        let b = jwt(Some("https://idp"), "8443:x");
        assert_ne!(a.principal(), b.principal());
        assert_eq!(parts(&a.principal()), ["jwt", "https://idp:8443", "x"]);
        assert_eq!(parts(&b.principal()), ["jwt", "https://idp", "8443:x"]);
        // No issuer, an empty issuer, and a subject that looks like an issuer and a subject.
        let none = jwt(None, "x");
        let empty = jwt(Some(""), "x");
        let spelled = jwt(None, ":x");
        assert_eq!(none.principal(), "jwt:x");
        assert_eq!(empty.principal(), "jwt::x");
        assert_eq!(spelled.principal(), "jwt:%3Ax");
        // `%` itself is encoded, so an encoded-looking subject stays itself.
        assert_eq!(jwt(None, "%3Ax").principal(), "jwt:%253Ax");
    }

    #[test]
    fn kinds_never_collide() {
        let all = [
            Identity::LocalUser {
                name: "alice".to_owned(),
            },
            Identity::Anonymous,
            Identity::Token {
                subject: "alice".to_owned(),
            },
            Identity::Token {
                subject: "anonymous".to_owned(),
            },
            jwt(None, "alice"),
            jwt(Some("token"), "alice"),
            certificate("CN=CA", "CN=alice"),
        ];
        let principals: std::collections::HashSet<String> =
            all.iter().map(Identity::principal).collect();
        assert_eq!(principals.len(), all.len(), "{principals:?}");
        assert_eq!(Identity::Anonymous.principal(), "anonymous");
        assert_eq!(all[0].principal(), "local:alice");
        assert_eq!(all[2].principal(), "token:alice");
    }

    #[test]
    fn certificates_are_their_issuer_and_whole_subject() {
        let org = certificate("CN=CA", "CN=alice,O=Example Org");
        let other_org = certificate("CN=CA", "CN=alice,O=Other Org");
        let other_ca = certificate("CN=Other CA", "CN=alice,O=Example Org");
        assert_eq!(org.subject(), other_org.subject(), "the same CN");
        assert_ne!(org.principal(), other_org.principal());
        assert_ne!(org.principal(), other_ca.principal());
        assert_eq!(
            org.principal(),
            "certificate:CN%3DCA:CN%3Dalice%2CO%3DExample%20Org"
        );
        // A DN whose value holds `:` cannot shift the split between issuer and subject.
        let shifted_a = certificate("CN=a", "CN=b:c");
        let shifted_b = certificate("CN=a:CN=b", "c");
        assert_ne!(shifted_a.principal(), shifted_b.principal());
        assert_eq!(
            parts(&shifted_a.principal()),
            ["certificate", "CN=a", "CN=b:c"]
        );
    }

    #[test]
    fn non_ascii_is_encoded_as_utf8() {
        let token = Identity::Token {
            subject: "zoë~_.-".to_owned(),
        };
        assert_eq!(token.principal(), "token:zo%C3%AB~_.-");
        assert_eq!(parts(&token.principal()), ["token", "zoë~_.-"]);
    }
}
