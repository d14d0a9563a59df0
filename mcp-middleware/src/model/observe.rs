//! What observers (`#[observer]` functions, SPEC F5) see: every finished request and its outcome.

use std::time::Duration;

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// Answered with a result (a tool result with `isError: true` counts as [`Outcome::Error`]).
    Ok,
    /// Answered with an error, or a tool result with `isError: true`.
    Error,
    /// Refused inside the proxy: answered with an error before anything reached the upstream.
    Rejected,
    /// Cancelled by the client, or the client left first.
    Cancelled,
}

impl Outcome {
    /// `ok`, `error`, `rejected` or `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::Rejected => "rejected",
            Outcome::Cancelled => "cancelled",
        }
    }
}

/// One finished client request, as an observer sees it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Observation {
    /// The JSON-RPC method.
    pub method: String,
    /// The tool called, the resource read or the prompt fetched, when the method has one.
    pub target: Option<String>,
    /// How it ended.
    pub outcome: Outcome,
    /// From the request's arrival to its answer.
    pub duration: Duration,
    /// The error message, when it ended in an error.
    pub error: Option<String>,
}

impl Observation {
    pub(crate) fn new(
        method: String,
        target: Option<String>,
        outcome: Outcome,
        duration: Duration,
        error: Option<String>,
    ) -> Self {
        Self {
            method,
            target,
            outcome,
            duration,
            error,
        }
    }
}

/// The tool, resource or prompt a request is about: `params.name` for `tools/call` and
/// `prompts/get`, `params.uri` for resource requests.
pub(crate) fn target_of(method: &str, params: Option<&str>) -> Option<String> {
    let key = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => "uri",
        _ => return None,
    };
    let params: serde_json::Map<String, serde_json::Value> = serde_json::from_str(params?).ok()?;
    params.get(key)?.as_str().map(str::to_owned)
}
