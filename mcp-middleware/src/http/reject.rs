//! [`Reject`]: a request the HTTP front refuses, with its status and the JSON-RPC error it
//! answers with.

use hyper::StatusCode;

use crate::jsonrpc;

/// The 2026-07-28 error "HeaderMismatch": an HTTP header disagrees with the body, or a required
/// one is missing.
pub const HEADER_MISMATCH: i64 = -32020;
/// A proxy-side condition that is not the request's fault (too many sessions, shutting down).
pub const SERVER_ERROR: i64 = -32000;
/// The request carried no valid credential (HTTP `401`; see [`crate::auth`]).
pub const UNAUTHORIZED: i64 = -32030;

/// Why the HTTP front refused a request: the status, the JSON-RPC error code and a message
/// that says what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status}: {message}")]
pub(crate) struct Reject {
    /// The HTTP status.
    pub(crate) status: StatusCode,
    /// The JSON-RPC error code of the body.
    pub(crate) code: i64,
    /// What was wrong, one sentence.
    pub(crate) message: String,
    /// The request's id (raw JSON), when it was read before the request was refused.
    pub(crate) id: Option<String>,
    /// `data` of the JSON-RPC error (raw JSON).
    pub(crate) data: Option<String>,
    /// The `WWW-Authenticate` challenge of a `401`.
    pub(crate) challenge: Option<String>,
}

impl Reject {
    pub(crate) fn new(status: StatusCode, code: i64, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            id: None,
            data: None,
            challenge: None,
        }
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, jsonrpc::INVALID_REQUEST, message)
    }

    pub(crate) fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, jsonrpc::INVALID_REQUEST, message)
    }

    pub(crate) fn session_not_found() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            jsonrpc::INVALID_REQUEST,
            "Not Found: the Mcp-Session-Id names no open session (it ended or never existed); \
             send `initialize` without it to start a new session",
        )
    }

    /// `401 Unauthorized`, with the RFC 6750 challenge (`invalid_token` when a credential
    /// was presented and refused).
    /// With `metadata`, the challenge points to the protected-resource metadata (RFC 9728
    /// §5.1), where clients learn which authorization server to ask.
    pub(crate) fn unauthorized(failure: &crate::auth::AuthFailure, metadata: Option<&str>) -> Self {
        let mut challenge = match failure {
            crate::auth::AuthFailure::Missing => r#"Bearer realm="mcp""#.to_owned(),
            _ => r#"Bearer realm="mcp", error="invalid_token""#.to_owned(),
        };
        if let Some(url) = metadata {
            challenge.push_str(&format!(r#", resource_metadata="{url}""#));
        }
        let mut reject = Self::new(
            StatusCode::UNAUTHORIZED,
            UNAUTHORIZED,
            format!("Unauthorized: {failure}"),
        );
        reject.challenge = Some(challenge);
        reject
    }

    /// `403 Forbidden` for a token that lacks `missing` of the scopes the resource requires
    /// (RFC 6750 §3.1); the challenge names every scope required.
    pub(crate) fn insufficient_scope(
        missing: &[String],
        required: &[String],
        metadata: &str,
    ) -> Self {
        let mut reject = Self::new(
            StatusCode::FORBIDDEN,
            UNAUTHORIZED,
            format!(
                "Forbidden: the token lacks the scope(s) {}",
                missing.join(" ")
            ),
        );
        reject.challenge = Some(format!(
            r#"Bearer error="insufficient_scope", scope="{}", resource_metadata="{metadata}""#,
            required.join(" ")
        ));
        reject
    }

    pub(crate) fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, SERVER_ERROR, message)
    }

    pub(crate) fn with_id(mut self, id: Option<&str>) -> Self {
        self.id = id.map(str::to_owned);
        self
    }

    pub(crate) fn with_data(mut self, data: String) -> Self {
        self.data = Some(data);
        self
    }

    /// The JSON-RPC error response carried in the body.
    pub(crate) fn body(&self) -> String {
        let line = jsonrpc::error(self.id.as_deref(), self.code, &self.message);
        match &self.data {
            // `...,"message":"..."}}` → `...,"message":"...","data":DATA}}`
            Some(data) if line.ends_with("}}") => {
                format!("{},\"data\":{data}}}}}", &line[..line.len() - 2])
            }
            _ => line,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_json_rpc_errors() {
        let reject = Reject::bad_request("Bad Request: no").with_id(Some("7"));
        assert_eq!(
            reject.body(),
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"Bad Request: no"}}"#
        );
        let with_data = Reject::bad_request("x").with_data(r#"{"supported":["a"]}"#.into());
        let value: serde_json::Value = serde_json::from_str(&with_data.body()).unwrap();
        assert_eq!(value["error"]["data"]["supported"][0], "a");
        assert_eq!(value["id"], serde_json::Value::Null);
    }
}
