//! What observers (`#[observer]` functions) see: every finished request and its outcome.

use std::time::Duration;

use serde_json::{Map, Value};

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
    /// The arguments the client sent (`params.arguments` of `tools/call` and `prompts/get`), as
    /// it sent them, before any model changed them. Secrets may be among them: an observer that
    /// records them should redact.
    pub arguments: Option<Value>,
}

impl Observation {
    pub(crate) fn new(
        method: String,
        subject: Subject,
        outcome: Outcome,
        duration: Duration,
        error: Option<String>,
    ) -> Self {
        Self {
            method,
            target: subject.target,
            outcome,
            duration,
            error,
            arguments: subject.arguments,
        }
    }
}

/// What a request is about, for observers: its target and arguments.
#[derive(Debug, Default)]
pub(crate) struct Subject {
    target: Option<String>,
    arguments: Option<Value>,
}

impl Subject {
    /// The tool, resource or prompt a request is about (`params.name` for `tools/call` and
    /// `prompts/get`, `params.uri` for resource requests) and its arguments.
    pub(crate) fn of(method: &str, params: Option<&str>) -> Self {
        let key = match method {
            "tools/call" | "prompts/get" => "name",
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => "uri",
            _ => return Self::default(),
        };
        let Some(Ok(mut params)) = params.map(serde_json::from_str::<Map<String, Value>>) else {
            return Self::default();
        };
        Self {
            target: params.get(key).and_then(Value::as_str).map(str::to_owned),
            arguments: params.remove("arguments"),
        }
    }
}
