//! LLM completions for models ([`Context::llm`](crate::Context::llm)): one request type, and the
//! choice of who answers it.
//!
//! A completion goes, in this order, to:
//!
//! 1. **the client's sampling** (`sampling/createMessage`, a request from the proxy to the
//!    client on the session), when the client declared the `sampling` capability;
//! 2. **an OpenAI-compatible endpoint** (`POST {url}/chat/completions`), when the project
//!    configures one ([`LlmEndpoint`]: `spec.llm` in `mcpctl`, or `--llm-url`);
//! 3. else the request fails with [`LlmError::Unavailable`], which names both ways.
//!
//! The first available way is the only one tried: a client that declared sampling and then
//! refused a request gets no silent second opinion from the endpoint. Every completion is bounded
//! by the request's cancellation and by a timeout ([`LlmRequest::timeout`], default
//! [`DEFAULT_TIMEOUT`]).
//!
//! A 2026-07-28 (stateless) client cannot receive requests from the proxy: the protocol has the
//! server return an input round (`input_required`) of the tool call in progress instead, and so
//! the proxy does for a completion. The hook's future stays suspended while the client's
//! `tools/call` (or `prompts/get`, `resources/read`) is answered with the sampling request and
//! a sealed `requestState`; the client's retry carries the sampling result, which resumes the
//! hook, and the hook's final result answers the retry. Several completions in one call are
//! several rounds. The client declares `sampling` in its requests' envelope
//! (`io.modelcontextprotocol/clientCapabilities`). A round the client does not come back for
//! ends with the session's `request_state_ttl` (and the completion's timeout bounds it as
//! always), and the completion fails with an error that says so.
//!
//! When a completion that went to the client as a request stops waiting (its request was
//! cancelled or timed out, or the completion's own timeout fired), the client is sent
//! `notifications/cancelled` for that request.

mod endpoint;
mod sampling;

use std::time::Duration;

use rmcp::model::{ClientCapabilities, ErrorData};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::era;

pub use endpoint::LlmEndpoint;

/// How long a completion may take when its request sets no timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// Who speaks a message of a conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LlmRole {
    /// The user (what the model is asked).
    User,
    /// The assistant (what the model answered before).
    Assistant,
}

impl LlmRole {
    /// The role's name on the wire (`user`, `assistant`), the same in MCP and OpenAI's API.
    pub fn as_str(self) -> &'static str {
        match self {
            LlmRole::User => "user",
            LlmRole::Assistant => "assistant",
        }
    }
}

/// One text message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LlmMessage {
    /// Who says it.
    pub role: LlmRole,
    /// What is said.
    pub text: String,
}

impl LlmMessage {
    /// A message from the user.
    pub fn user(text: impl Into<String>) -> Self {
        Self {
            role: LlmRole::User,
            text: text.into(),
        }
    }

    /// A message from the assistant.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self {
            role: LlmRole::Assistant,
            text: text.into(),
        }
    }
}

/// A completion request: messages, a system prompt, a token limit and optional preferences.
///
/// ```
/// use mcp_middleware::llm::LlmRequest;
/// use std::time::Duration;
///
/// let request = LlmRequest::new("Summarize: ...")
///     .system("You write short, factual summaries.")
///     .max_tokens(400)
///     .temperature(0.2)
///     .model_hint("claude-haiku")
///     .timeout(Duration::from_secs(30));
/// assert_eq!(request.messages.len(), 1);
/// assert_eq!(request.max_tokens, 400);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LlmRequest {
    /// The conversation, oldest first; the last message is usually the user's.
    pub messages: Vec<LlmMessage>,
    /// The system prompt.
    pub system: Option<String>,
    /// The most tokens the answer may have.
    pub max_tokens: u32,
    /// Sampling temperature (0.0 to 1.0), if the caller cares.
    pub temperature: Option<f32>,
    /// Model names or families the caller prefers, best first (MCP's `modelPreferences.hints`;
    /// an endpoint uses its configured model and ignores them).
    pub model_hints: Vec<String>,
    /// How long the completion may take; [`DEFAULT_TIMEOUT`] when `None`.
    pub timeout: Option<Duration>,
}

impl LlmRequest {
    /// A request with one user message, 1,024 tokens at most.
    pub fn new(prompt: impl Into<String>) -> Self {
        Self {
            messages: vec![LlmMessage::user(prompt)],
            system: None,
            max_tokens: 1024,
            temperature: None,
            model_hints: Vec::new(),
            timeout: None,
        }
    }

    /// A request with these messages.
    pub fn conversation(messages: Vec<LlmMessage>) -> Self {
        Self {
            messages,
            ..Self::new("")
        }
    }

    /// The same request with a system prompt.
    pub fn system(mut self, system: impl Into<String>) -> Self {
        self.system = Some(system.into());
        self
    }

    /// The same request with a token limit.
    pub fn max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = max_tokens;
        self
    }

    /// The same request with a temperature.
    pub fn temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// The same request preferring a model (name or family); call again for further choices.
    pub fn model_hint(mut self, hint: impl Into<String>) -> Self {
        self.model_hints.push(hint.into());
        self
    }

    /// The same request with a timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

/// Which way a completion went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LlmVia {
    /// The client's sampling (`sampling/createMessage`).
    ClientSampling,
    /// The project's OpenAI-compatible endpoint.
    Endpoint,
}

impl std::fmt::Display for LlmVia {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LlmVia::ClientSampling => "the client's sampling (sampling/createMessage)",
            LlmVia::Endpoint => "the configured LLM endpoint",
        })
    }
}

/// A completion.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LlmResponse {
    /// The answer's text.
    pub text: String,
    /// The model that wrote it, as the answering side names it.
    pub model: String,
    /// Why it stopped (`endTurn`, `maxTokens`, `stop`, `length`, ...), when the side said.
    pub stop_reason: Option<String>,
    /// Which way it went.
    pub via: LlmVia,
}

/// Why a completion failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LlmError {
    /// Neither way is available.
    #[error(
        "no LLM is available to this model: {reason}; either use a client that declares the \
         `sampling` capability, or configure an OpenAI-compatible endpoint for the project \
         (`spec.llm: {{url, model, apiKey}}`, or `mcpctl proxy|serve --llm-url URL --llm-model \
         MODEL`)"
    )]
    Unavailable {
        /// Why the client's sampling cannot be used.
        reason: String,
    },
    /// The answering side refused or failed the request.
    #[error("{via} failed: {message}")]
    Failed {
        /// Which way it went.
        via: LlmVia,
        /// What it said (never a credential).
        message: String,
    },
    /// The answer could not be read.
    #[error("{via} answered something that is not a completion: {message}")]
    BadAnswer {
        /// Which way it went.
        via: LlmVia,
        /// What is wrong with it.
        message: String,
    },
    /// The configured endpoint cannot be used as configured.
    #[error("the LLM endpoint is misconfigured: {0}")]
    Config(String),
    /// No answer within the timeout.
    #[error("{via} did not answer within {} s", .after.as_secs_f64())]
    Timeout {
        /// Which way it went.
        via: LlmVia,
        /// The timeout.
        after: Duration,
    },
    /// The request the completion was for was cancelled.
    #[error("the completion was cancelled with its request")]
    Cancelled,
}

impl From<LlmError> for rmcp::model::ErrorData {
    fn from(err: LlmError) -> Self {
        rmcp::model::ErrorData::internal_error(err.to_string(), None)
    }
}

/// LLM completions for a hook: see the [module docs](self) for where they go.
///
/// ```no_run
/// use mcp_middleware::llm::LlmRequest;
/// # async fn hook(ctx: &mcp_middleware::Context) -> Result<(), mcp_middleware::llm::LlmError> {
/// let answer = ctx.llm().complete(LlmRequest::new("Say hello.").max_tokens(20)).await?;
/// tracing::info!(via = %answer.via, model = answer.model, "{}", answer.text);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Llm<'a> {
    host: &'a dyn LlmHost,
}

/// What a completion needs of the hook's context: [`Context`](crate::Context) implements it.
/// This module names the trait rather than the context because the context sits above it (it
/// hands out [`Llm`] and keeps the project, whose [`LlmEndpoint`] is defined here).
pub(crate) trait LlmHost: std::fmt::Debug + Sync {
    /// The project's endpoint, if it configures one.
    fn endpoint(&self) -> Option<&LlmEndpoint>;
    /// The protocol version the client negotiated or declares, once known.
    fn protocol_version(&self) -> Option<String>;
    /// The capabilities the client declared.
    fn client_capabilities(&self) -> Option<ClientCapabilities>;
    /// The hooked client request the completion serves (0: none).
    fn call_id(&self) -> u64;
    /// The request's cancellation.
    fn cancellation(&self) -> &CancellationToken;
    /// Asks the client `method` on behalf of that request, as question `ask`; `None` when the
    /// session has ended.
    fn ask(
        &self,
        ask: u64,
        method: &str,
        params: String,
    ) -> Option<oneshot::Receiver<Result<String, ErrorData>>>;
    /// The answer to `ask` is no longer awaited.
    fn ask_done(&self, ask: u64);
}

impl<'a> Llm<'a> {
    pub(crate) fn new(host: &'a dyn LlmHost) -> Self {
        Self { host }
    }

    /// Which way a completion would go now, or why there is none.
    pub fn via(&self) -> Result<LlmVia, LlmError> {
        let sampling = self.sampling_unavailable();
        match (sampling, self.endpoint()) {
            (None, _) => Ok(LlmVia::ClientSampling),
            (Some(_), Some(_)) => Ok(LlmVia::Endpoint),
            (Some(reason), None) => Err(LlmError::Unavailable { reason }),
        }
    }

    /// Runs a completion: through the client's sampling, else the project's endpoint, within
    /// the request's timeout and cancellation.
    pub async fn complete(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        let via = self.via()?;
        let after = request.timeout.unwrap_or(DEFAULT_TIMEOUT);
        let work = async {
            match via {
                LlmVia::ClientSampling => sampling::complete(self.host, &request).await,
                LlmVia::Endpoint => match self.endpoint() {
                    Some(endpoint) => endpoint.complete(&request).await,
                    None => Err(LlmError::Config("the endpoint went away".to_owned())),
                },
            }
        };
        tokio::select! {
            biased;
            () = self.host.cancellation().cancelled() => Err(LlmError::Cancelled),
            outcome = tokio::time::timeout(after, work) => {
                outcome.unwrap_or(Err(LlmError::Timeout { via, after }))
            }
        }
    }

    fn endpoint(&self) -> Option<&'a LlmEndpoint> {
        self.host.endpoint()
    }

    /// Why the client's sampling cannot be used, or `None` when it can.
    fn sampling_unavailable(&self) -> Option<String> {
        let stateless = self.host.protocol_version().as_deref() == Some(era::STATELESS_VERSION);
        match self.host.client_capabilities() {
            Some(capabilities) if capabilities.sampling.is_some() => {
                // A 2026-07-28 client is asked in an input round of the request in progress.
                (stateless && self.host.call_id() == 0).then(|| {
                    format!(
                        "the client speaks {} (stateless) and can be asked only within a \
                         request in progress, and this hook serves none",
                        era::STATELESS_VERSION
                    )
                })
            }
            Some(_) if stateless => Some(format!(
                "the client's {} requests do not declare the `sampling` capability in their \
                 envelope",
                era::STATELESS_VERSION
            )),
            Some(_) => Some("the client did not declare the `sampling` capability".to_owned()),
            None => Some(
                "the client declared no capabilities (no `initialize`, and no 2026-07-28 \
                 envelope on this request)"
                    .to_owned(),
            ),
        }
    }
}
