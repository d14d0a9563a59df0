//! Questions hooks put to the client (`ctx.llm()`'s sampling), and the sealed `requestState`
//! of every input round the proxy opens.
//!
//! A hook asks through [`LoopCall::Ask`](crate::context::LoopCall::Ask). How the question
//! travels depends on the client:
//!
//! - **A client that receives requests** (2025-11-25 and older): a real `sampling/createMessage`
//!   to the client, on the stream of the call it serves. When the hook stops waiting (the call
//!   was cancelled or timed out, or the completion's own timeout fired), its
//!   [`LoopCall::AskDone`](crate::context::LoopCall::AskDone) arrives while the request is still
//!   open at the client, and the client gets `notifications/cancelled` for it.
//! - **A 2026-07-28 client**, which cannot receive requests: an *input round* of the call in
//!   progress. The client's `tools/call` (or `prompts/get`, `resources/read`) is answered with
//!   `resultType: "input_required"`, the question under a key of its own and a sealed
//!   `requestState`; the hook's future stays suspended. The client's retry carries the answers
//!   and the state: the answers resume the hook, and the retry takes over the call, so the hook's
//!   final result (or its next round) answers the retry. Questions asked while the call is
//!   suspended wait for the retry and open the next round then. This holds whether the session
//!   is bridged (a handshake-only upstream) or not (a 2026-07-28 upstream).
//!
//! A retry resumes only the request it came with: the same method and the same tool, prompt
//! or resource URI. A retry naming another is refused (invalid params) and the round stays
//! open for the genuine one, so audit and observers never record one tool's answer as
//! another's.
//!
//! A round lives at most [`SessionOptions::request_state_ttl`](super::SessionOptions): past it,
//! the hook's questions fail with an error that says so (`ctx.llm()` returns an
//! `LlmError`), and the hook's result, when it comes, goes to no one; a hook that does not finish
//! within the request timeout after that is stopped.
//!
//! Every `requestState` the proxy hands out, here and in the bridge (`bridge`), is sealed to the
//! session and principal with the session's key ([`crate::sealed_state`]); a retry whose state
//! is changed, expired or another session's gets invalid params and resumes nothing. A state
//! without the proxy's prefix is an upstream's own and passes through as it is (not bridged).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rmcp::model::{ErrorCode, ErrorData, InitializeRequestParams};
use serde_json::{Map, Value};
use tokio::sync::oneshot;

use super::bridge::{BRIDGE_ROUND, ClientEra, takes_input_rounds};
use super::{Session, UpstreamRequest};
use crate::context::RawOutcome;
use crate::era;
use crate::jsonrpc;
use crate::sealed_state::{Binding, OpenError};
use crate::transport::outbound::Belongs;

/// What a hooked call's input round's state starts with, inside its seal.
const HOOK_ROUND: &str = "hook/";

/// The hook side of a session's input rounds.
#[derive(Debug, Default)]
pub(super) struct HookRounds {
    /// Questions out as real requests at the client, by the hook's ask id: the client's
    /// request id (`did`).
    asked_client: HashMap<u64, u64>,
    /// Open rounds, by round number.
    rounds: HashMap<u64, HookRound>,
    /// The open round of each suspended call.
    by_call: HashMap<u64, u64>,
    /// Calls whose round expired before they finished: stopped at the instant given.
    orphans: HashMap<u64, Instant>,
    next_round: u64,
    next_key: u64,
}

/// A hooked call suspended while the client answers its questions.
#[derive(Debug)]
struct HookRound {
    call: u64,
    method: Box<str>,
    /// The tool, prompt or resource URI of the request the round belongs to.
    target: Option<Box<str>>,
    /// The questions this round put to the client.
    asked: Vec<Question>,
    /// Questions asked after the round went out: they open the next round.
    waiting: Vec<Question>,
    /// The hook's answer, if it finished before the client's retry.
    outcome: Option<RawOutcome>,
    expires: Instant,
}

/// One question of a hook, as an input request.
#[derive(Debug)]
struct Question {
    key: String,
    /// `{"method": ..., "params": ...}`
    request: String,
    reply: oneshot::Sender<RawOutcome>,
}

fn invalid_state(message: &str) -> String {
    format!("{message}; send the request again without requestState and inputResponses")
}

/// The parameter naming what a request that may ask in input rounds is about, and what that is.
fn target_key(method: &str) -> Option<(&'static str, &'static str)> {
    match method {
        "tools/call" => Some(("name", "tool")),
        "prompts/get" => Some(("name", "prompt")),
        "resources/read" => Some(("uri", "resource")),
        _ => None,
    }
}

/// The tool or prompt name, or resource URI, of a `method` request with `params`.
pub(super) fn target_of<'p>(method: &str, params: &'p Map<String, Value>) -> Option<&'p str> {
    let (key, _) = target_key(method)?;
    params.get(key).and_then(Value::as_str)
}

/// [`target_of`] from the request's params as they came (for a call that may open a round).
pub(super) fn target_in(method: &str, params: Option<&str>) -> Option<Box<str>> {
    #[derive(serde::Deserialize)]
    struct Named<'a> {
        #[serde(borrow, default)]
        name: Option<std::borrow::Cow<'a, str>>,
        #[serde(borrow, default)]
        uri: Option<std::borrow::Cow<'a, str>>,
    }
    let (key, _) = target_key(method)?;
    let named: Named<'_> = serde_json::from_str(params?).ok()?;
    let target = if key == "uri" { named.uri } else { named.name };
    target.map(|t| t.into())
}

/// Why a retry of `method` naming `retry` may not resume a round opened for `original`, if it
/// may not (unnamed on either side counts as a name: it must match too).
pub(super) fn other_target(
    method: &str,
    original: Option<&str>,
    retry: Option<&str>,
) -> Option<String> {
    if original == retry {
        return None;
    }
    let noun = target_key(method).map_or("request", |(_, noun)| noun);
    let shown = |name: Option<&str>| name.map_or_else(|| "none".to_owned(), |n| format!("`{n}`"));
    Some(format!(
        "requestState belongs to {noun} {}, not {}; retry {noun} {} with it",
        shown(original),
        shown(retry),
        shown(original)
    ))
}

impl Session {
    /// What this session's states are bound to.
    fn with_binding<R>(&self, f: impl FnOnce(&Binding<'_>) -> R) -> R {
        let principal = self.scope.identity.with(crate::auth::Identity::principal);
        f(&Binding::new(&self.scope.id, &principal))
    }

    /// `state` sealed for this session's client.
    pub(super) fn seal_state(&self, state: &str) -> String {
        let ttl = self.options.request_state_ttl;
        self.with_binding(|binding| self.options.state_key.seal(binding, ttl, state))
    }

    /// Whether the client speaks 2026-07-28 (so it cannot be sent requests).
    pub(super) fn client_is_stateless(&self) -> bool {
        if matches!(self.era, ClientEra::Bridged(_)) {
            return true;
        }
        let info = match self.scope.info.read() {
            Ok(info) => info,
            Err(poisoned) => poisoned.into_inner(),
        };
        info.protocol_version.as_deref() == Some(era::STATELESS_VERSION)
    }

    /// A 2026-07-28 request's envelope says who the client is and what it can do: kept for
    /// [`Context`](crate::Context) (`protocol_version`, `client_capabilities`, `ctx.llm()`) as
    /// an `initialize` would be.
    pub(super) fn note_envelope(&mut self, params: Option<&str>) {
        let Some(params) = params.filter(|p| era::has_envelope(p)) else {
            return;
        };
        let version = serde_json::from_str::<Value>(params).ok().and_then(|p| {
            p.pointer("/_meta/io.modelcontextprotocol~1protocolVersion")?
                .as_str()
                .map(str::to_owned)
        });
        let initialize =
            serde_json::from_str::<InitializeRequestParams>(&era::initialize_params_for(params))
                .ok();
        let mut info = match self.scope.info.write() {
            Ok(info) => info,
            Err(poisoned) => poisoned.into_inner(),
        };
        if initialize.is_some() {
            info.initialize = initialize;
        }
        info.protocol_version = version;
    }

    // ------------------------------------------------------------------ questions

    /// A hook of call `call` asks the client `method` (`ctx.llm()`).
    pub(super) fn on_ask(
        &mut self,
        call: u64,
        ask: u64,
        method: &str,
        params: Option<String>,
        reply: oneshot::Sender<RawOutcome>,
    ) {
        if !self.client_is_stateless() {
            let did = self.upstream_requests.allocate(UpstreamRequest {
                upstream_id: "".into(),
                progress_token: None,
                hook: Some(reply),
            });
            self.hook_rounds.asked_client.insert(ask, did);
            let belongs = self
                .hooks
                .client_id_of(call)
                .map_or(Belongs::Unsaid, Belongs::During);
            let line = jsonrpc::request(itoa::Buffer::new().format(did), method, params.as_deref());
            self.to_client_as(line, belongs);
            return;
        }
        let refuse = |reply: oneshot::Sender<RawOutcome>, message: String| {
            let _ = reply.send(Err(ErrorData::new(
                ErrorCode(jsonrpc::METHOD_NOT_FOUND as i32),
                message,
                None,
            )));
        };
        let Some(call_method) = self.hooks.method_of(call) else {
            return refuse(
                reply,
                format!(
                    "the client speaks {} and can be asked `{method}` only within a request in \
                     progress (tools/call, prompts/get or resources/read), and this hook serves \
                     none",
                    era::STATELESS_VERSION
                ),
            );
        };
        if !takes_input_rounds(call_method) {
            return refuse(
                reply,
                format!(
                    "the client speaks {} and can be asked `{method}` only within tools/call, \
                     prompts/get or resources/read, not `{call_method}`",
                    era::STATELESS_VERSION
                ),
            );
        }
        self.hook_rounds.next_key += 1;
        let mut request = String::from(r#"{"method":"#);
        request.push_str(&Value::from(method).to_string());
        if let Some(params) = &params {
            request.push_str(r#","params":"#);
            request.push_str(params);
        }
        request.push('}');
        let question = Question {
            key: format!("mcp-middleware/{}", self.hook_rounds.next_key),
            request,
            reply,
        };
        match self.hook_rounds.by_call.get(&call) {
            Some(round) => {
                if let Some(round) = self.hook_rounds.rounds.get_mut(round) {
                    round.waiting.push(question);
                }
            }
            None => self.open_hook_round(call, vec![question]),
        }
    }

    /// The hook no longer awaits `ask`: a request still open at the client is withdrawn.
    pub(super) fn on_ask_done(&mut self, ask: u64) {
        let Some(did) = self.hook_rounds.asked_client.remove(&ask) else {
            return;
        };
        if self.upstream_requests.remove(did).is_none() {
            return;
        }
        tracing::debug!(
            did,
            "a hook stopped waiting for the client: request cancelled"
        );
        let params = serde_json::json!({
            "requestId": did,
            "reason": "the request it was made for was cancelled or timed out",
        })
        .to_string();
        self.to_client(jsonrpc::notification(
            "notifications/cancelled",
            Some(&params),
        ));
    }

    /// Answers call `call`'s client request with an input round of `questions` and suspends
    /// the call.
    fn open_hook_round(&mut self, call: u64, questions: Vec<Question>) {
        let Some(client_id) = self.hooks.suspend(call) else {
            for question in questions {
                let _ = question.reply.send(Err(ErrorData::internal_error(
                    "the request this question was for is no longer in progress",
                    None,
                )));
            }
            return;
        };
        let method: Box<str> = self.hooks.method_of(call).unwrap_or_default().into();
        let target = self.hooks.target_of(call).map(Box::from);
        self.hook_rounds.next_round += 1;
        let number = self.hook_rounds.next_round;
        let sealed = self.seal_state(&format!("{HOOK_ROUND}{number}"));
        let mut requests = Map::new();
        for question in &questions {
            // Built from a method name and params that were JSON when the hook sent them.
            let request = serde_json::from_str(&question.request).unwrap_or(Value::Null);
            requests.insert(question.key.clone(), request);
        }
        let result = serde_json::json!({
            "resultType": "input_required",
            "inputRequests": requests,
            "requestState": sealed,
        })
        .to_string();
        tracing::debug!(call, round = number, "asked the client in an input round");
        self.hook_rounds.by_call.insert(call, number);
        self.hook_rounds.rounds.insert(
            number,
            HookRound {
                call,
                method,
                target,
                asked: questions,
                waiting: Vec::new(),
                outcome: None,
                expires: Instant::now() + self.options.request_state_ttl,
            },
        );
        self.to_client_as(
            jsonrpc::result(&client_id, &result),
            Belongs::Response(client_id),
        );
    }

    /// A hooked call finished: while it is suspended its answer waits for the client's retry
    /// (or, its round expired, goes to no one). Returns the outcome when it is to be answered
    /// now.
    pub(super) fn hold_if_suspended(
        &mut self,
        call: u64,
        outcome: RawOutcome,
    ) -> Option<RawOutcome> {
        if !self.hooks.is_suspended(call) {
            return Some(outcome);
        }
        let round = self
            .hook_rounds
            .by_call
            .get(&call)
            .and_then(|number| self.hook_rounds.rounds.get_mut(number));
        match round {
            Some(round) => round.outcome = Some(outcome),
            None => {
                tracing::debug!(call, "a hooked call finished after its input round expired");
                self.hook_rounds.orphans.remove(&call);
                self.hooks.discard(call);
            }
        }
        None
    }

    // ------------------------------------------------------------------ retries

    /// A request that may carry a `requestState`: when it is one of the proxy's, the round it
    /// names is resumed (or the request refused). Returns whether the request was handled here.
    pub(super) fn resume_with_request_state(
        &mut self,
        id: &str,
        method: &str,
        params: Option<&str>,
    ) -> bool {
        // The method first: it is short, the params may not be.
        if !takes_input_rounds(method) {
            return false;
        }
        let Some(params) = params.filter(|p| p.contains("\"requestState\"")) else {
            return false;
        };
        let map: Map<String, Value> = serde_json::from_str(params).unwrap_or_default();
        let bridged = matches!(self.era, ClientEra::Bridged(_));
        let refuse = |session: &mut Self, message: String| {
            tracing::debug!(method, "refused a requestState: {message}");
            session.to_client(jsonrpc::error(
                Some(id),
                jsonrpc::INVALID_PARAMS,
                &invalid_state(&message),
            ));
            true
        };
        let Some(state) = map.get("requestState").and_then(Value::as_str) else {
            if bridged {
                return refuse(self, "requestState must be a string".to_owned());
            }
            return false;
        };
        let opened = self.with_binding(|binding| self.options.state_key.open(binding, state));
        let opened = match opened {
            Ok(opened) => opened,
            // An upstream's own state: it is the upstream's to check.
            Err(OpenError::NotOurs) if !bridged => return false,
            Err(err) => return refuse(self, err.to_string()),
        };
        if let Some(number) = opened.strip_prefix(HOOK_ROUND) {
            let number = number.parse::<u64>().unwrap_or(0);
            return self.resume_hook_round(id, method, &map, number);
        }
        if opened.starts_with(BRIDGE_ROUND) && bridged {
            return self.resume_round(id, method, &map, &opened);
        }
        refuse(self, "requestState is unknown or expired".to_owned())
    }

    /// The client's retry `id` of a suspended call, with its answers to the round.
    fn resume_hook_round(
        &mut self,
        id: &str,
        method: &str,
        map: &Map<String, Value>,
        number: u64,
    ) -> bool {
        let Some(round) = self.hook_rounds.rounds.remove(&number) else {
            self.to_client(jsonrpc::error(
                Some(id),
                jsonrpc::INVALID_PARAMS,
                &invalid_state(
                    "requestState is unknown or expired: its round was answered already, or \
                     the request it belongs to ended",
                ),
            ));
            return true;
        };
        if *round.method != *method {
            let message = invalid_state(&format!(
                "requestState belongs to a `{}` request, not `{method}`",
                round.method
            ));
            self.hook_rounds.rounds.insert(number, round);
            self.to_client(jsonrpc::error(Some(id), jsonrpc::INVALID_PARAMS, &message));
            return true;
        }
        if let Some(message) = other_target(method, round.target.as_deref(), target_of(method, map))
        {
            tracing::debug!(method, "refused a requestState: {message}");
            self.hook_rounds.rounds.insert(number, round);
            self.to_client(jsonrpc::error(Some(id), jsonrpc::INVALID_PARAMS, &message));
            return true;
        }
        let call = round.call;
        self.hook_rounds.by_call.remove(&call);
        let responses = map.get("inputResponses").and_then(Value::as_object);
        for question in round.asked {
            let answer = match responses.and_then(|r| r.get(&question.key)) {
                Some(response) => Ok(response.to_string()),
                None => Err(ErrorData::invalid_params(
                    format!(
                        "the client's retry gave no answer to input request `{}`",
                        question.key
                    ),
                    None,
                )),
            };
            let _ = question.reply.send(answer);
        }
        if !self.hooks.resume(call, id, self.options.request_timeout) {
            // The call is gone (the session is ending): nothing waits for an answer.
            self.to_client(jsonrpc::error(
                Some(id),
                jsonrpc::INVALID_PARAMS,
                &invalid_state("requestState names a request that is no longer in progress"),
            ));
            return true;
        }
        tracing::debug!(call, round = number, "the client answered an input round");
        if let Some(outcome) = round.outcome {
            self.finish_hooked(call, outcome);
            return true;
        }
        let waiting: Vec<Question> = round
            .waiting
            .into_iter()
            .filter(|question| !question.reply.is_closed())
            .collect();
        if !waiting.is_empty() {
            self.open_hook_round(call, waiting);
        }
        true
    }

    /// Ends rounds the client did not come back for within their lifetime, and stops calls
    /// whose round ended that long ago.
    pub(super) fn expire_hook_rounds(&mut self, now: Instant) {
        let grace = self
            .options
            .request_timeout
            .unwrap_or(Duration::from_secs(30));
        let stopped: Vec<u64> = self
            .hook_rounds
            .orphans
            .iter()
            .filter(|(_, until)| **until <= now)
            .map(|(call, _)| *call)
            .collect();
        for call in stopped {
            self.hook_rounds.orphans.remove(&call);
            tracing::warn!(
                call,
                "a hooked call whose input round expired did not finish; it was stopped"
            );
            self.hooks.discard(call);
        }
        let expired: Vec<u64> = self
            .hook_rounds
            .rounds
            .iter()
            .filter(|(_, round)| round.expires <= now)
            .map(|(number, _)| *number)
            .collect();
        let ttl = self.options.request_state_ttl.as_secs();
        for number in expired {
            let Some(round) = self.hook_rounds.rounds.remove(&number) else {
                continue;
            };
            self.hook_rounds.by_call.remove(&round.call);
            tracing::info!(
                round = number,
                "the client did not come back for an input round within {ttl} s"
            );
            for question in round.asked.into_iter().chain(round.waiting) {
                let _ = question.reply.send(Err(ErrorData::new(
                    ErrorCode(jsonrpc::UPSTREAM_TIMEOUT as i32),
                    format!(
                        "the client did not answer the input round (resultType \
                         \"input_required\") within {ttl} s"
                    ),
                    None,
                )));
            }
            if round.outcome.is_some() {
                self.hooks.discard(round.call);
            } else {
                self.hook_rounds.orphans.insert(round.call, now + grace);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(json: &str) -> Map<String, Value> {
        serde_json::from_str(json).unwrap_or_default()
    }

    #[test]
    fn a_retry_is_bound_to_the_tool_prompt_or_resource_of_its_round() {
        let original = target_in(
            "tools/call",
            Some(r#"{"name":"deploy","arguments":{"a":1}}"#),
        );
        assert_eq!(original.as_deref(), Some("deploy"));
        let same = params(r#"{"name":"deploy","requestState":"s","inputResponses":{}}"#);
        assert_eq!(
            other_target(
                "tools/call",
                original.as_deref(),
                target_of("tools/call", &same)
            ),
            None
        );
        let other = params(r#"{"name":"read_secrets","requestState":"s"}"#);
        let refused = other_target(
            "tools/call",
            original.as_deref(),
            target_of("tools/call", &other),
        );
        assert_eq!(
            refused.as_deref(),
            Some(
                "requestState belongs to tool `deploy`, not `read_secrets`; retry tool `deploy` \
                 with it"
            )
        );
        let unnamed = params(r#"{"requestState":"s"}"#);
        assert!(
            other_target(
                "tools/call",
                original.as_deref(),
                target_of("tools/call", &unnamed)
            )
            .is_some_and(|m| m.contains("not none")),
            "a retry that names nothing is refused too"
        );

        let uri = target_in("resources/read", Some(r#"{"uri":"file:///a","name":"x"}"#));
        assert_eq!(uri.as_deref(), Some("file:///a"), "a resource is its URI");
        let elsewhere = params(r#"{"uri":"file:///etc/passwd"}"#);
        assert!(
            other_target(
                "resources/read",
                uri.as_deref(),
                target_of("resources/read", &elsewhere)
            )
            .is_some_and(|m| m.starts_with("requestState belongs to resource `file:///a`"))
        );
        let prompt = target_in("prompts/get", Some(r#"{"name":"greet"}"#));
        let other_prompt = params(r#"{"name":"leak"}"#);
        assert!(
            other_target(
                "prompts/get",
                prompt.as_deref(),
                target_of("prompts/get", &other_prompt)
            )
            .is_some_and(|m| m.contains("prompt `greet`"))
        );
        assert_eq!(target_in("tools/list", Some(r#"{"name":"x"}"#)), None);
        assert_eq!(target_in("tools/call", Some("not json")), None);
    }
}
