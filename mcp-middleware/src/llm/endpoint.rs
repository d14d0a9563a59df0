//! An OpenAI-compatible chat completions endpoint: where it is, and [`LlmRequest`] as a
//! `POST /chat/completions` and its answer back as an [`LlmResponse`].

use std::ffi::OsStr;
use std::fmt;

use serde_json::{Value, json};

use super::{LlmError, LlmRequest, LlmResponse, LlmVia};
use crate::upstream::http::{Endpoint, post_json};
use crate::upstream::resolve_env_refs;

const VIA: LlmVia = LlmVia::Endpoint;

/// The most bytes of an endpoint's answer that are read.
const MAX_ANSWER: usize = 4 * 1024 * 1024;

/// An OpenAI-compatible endpoint (`/v1/chat/completions`): its URL, the model to ask for, and
/// the API key, usually `${env:VAR}` (resolved from the proxy's environment at each request and
/// never shown: `Debug` writes the key as configured, which names only the variable).
///
/// `url` is the API's base (`https://api.openai.com/v1`, `http://127.0.0.1:11434/v1`), to which
/// `/chat/completions` is added, or the full `.../chat/completions` URL.
///
/// ```
/// use mcp_middleware::llm::LlmEndpoint;
///
/// let endpoint = LlmEndpoint::new("http://127.0.0.1:11434/v1", "llama3.2")
///     .api_key("${env:OLLAMA_KEY}");
/// assert!(endpoint.check().is_ok());
/// assert_eq!(endpoint.completions_url(), "http://127.0.0.1:11434/v1/chat/completions");
/// assert!(LlmEndpoint::new("ftp://x", "m").check().is_err());
/// ```
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LlmEndpoint {
    /// The API's base URL, or its full chat completions URL.
    pub url: String,
    /// The model to ask for.
    pub model: String,
    /// The API key as configured (`${env:VAR}`, resolved only when a request is sent), if the
    /// endpoint takes one.
    pub api_key: Option<String>,
}

impl fmt::Debug for LlmEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = match &self.api_key {
            Some(key) if key.contains("${env:") => key.as_str(),
            Some(_) => "<set>",
            None => "<none>",
        };
        f.debug_struct("LlmEndpoint")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("api_key", &key)
            .finish()
    }
}

impl LlmEndpoint {
    /// An endpoint at `url` that is asked for `model`, without a key.
    pub fn new(url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            model: model.into(),
            api_key: None,
        }
    }

    /// The same endpoint with an API key (`${env:VAR}` to read it from the environment).
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Why the endpoint cannot be used, or `Ok`: the URL must be `http://` or `https://` with a
    /// host, the model not empty, and every `${env:` reference in the key closed.
    pub fn check(&self) -> Result<(), String> {
        Endpoint::parse(&self.url).map_err(|err| format!("url: {err}"))?;
        if self.model.trim().is_empty() {
            return Err("model: must name the model to ask for".to_owned());
        }
        if let Some(key) = &self.api_key {
            let opened = key.matches("${env:").count();
            let closed = crate::upstream::env_references(key).count();
            if opened != closed {
                return Err("apiKey: an unterminated `${env:` reference".to_owned());
            }
        }
        Ok(())
    }

    /// The URL requests are posted to.
    pub fn completions_url(&self) -> String {
        let url = self.url.trim_end_matches('/');
        if url.ends_with("/chat/completions") {
            url.to_owned()
        } else {
            format!("{url}/chat/completions")
        }
    }

    /// Posts the request and reads the answer (the caller bounds the time).
    pub(super) async fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, LlmError> {
        self.check().map_err(LlmError::Config)?;
        let key = match &self.api_key {
            Some(key) => Some(
                resolve_env_refs(OsStr::new(key))
                    .map_err(|err| LlmError::Config(format!("apiKey: {err}")))?
                    .to_string_lossy()
                    .into_owned(),
            ),
            None => None,
        };
        let headers: Vec<(&str, String)> = key
            .iter()
            .map(|key| ("authorization", format!("Bearer {key}")))
            .collect();
        let body = serde_json::to_vec(&self.body(request)).map_err(|err| LlmError::Failed {
            via: VIA,
            message: format!("the request could not be written: {err}"),
        })?;
        let url = self.completions_url();
        let (status, answer) = post_json(&url, &headers, body, MAX_ANSWER)
            .await
            .map_err(|message| LlmError::Failed { via: VIA, message })?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&answer);
            let mut excerpt: String = text.chars().take(300).collect();
            if let Some(key) = key.as_deref().filter(|key| !key.is_empty()) {
                // An endpoint that echoes the request must not put the key into an error.
                excerpt = excerpt.replace(key, "<api key>");
            }
            return Err(LlmError::Failed {
                via: VIA,
                message: format!("POST {url} answered {status}: {excerpt}"),
            });
        }
        let answer: Value = serde_json::from_slice(&answer).map_err(|err| LlmError::BadAnswer {
            via: VIA,
            message: format!("the body is not JSON: {err}"),
        })?;
        response(&answer)
    }

    /// The chat completions body of a request.
    pub(super) fn body(&self, request: &LlmRequest) -> Value {
        let mut messages = Vec::with_capacity(request.messages.len() + 1);
        if let Some(system) = &request.system {
            messages.push(json!({ "role": "system", "content": system }));
        }
        messages.extend(
            request
                .messages
                .iter()
                .map(|message| json!({ "role": message.role.as_str(), "content": message.text })),
        );
        let mut body = json!({
            "model": self.model,
            "messages": messages,
            "max_tokens": request.max_tokens,
        });
        if let Some(temperature) = request.temperature {
            body["temperature"] = json!(temperature);
        }
        body
    }
}

/// The first choice of a chat completions answer.
pub(super) fn response(answer: &Value) -> Result<LlmResponse, LlmError> {
    let bad = |message: &str| LlmError::BadAnswer {
        via: VIA,
        message: message.to_owned(),
    };
    let choice = answer
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|choices| choices.first())
        .ok_or_else(|| bad("it has no `choices`"))?;
    let text = choice
        .pointer("/message/content")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("its first choice has no `message.content` text"))?;
    Ok(LlmResponse {
        text: text.to_owned(),
        model: answer
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        stop_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_owned),
        via: VIA,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::LlmMessage;

    #[test]
    fn llm_requests_map_to_chat_completions() {
        let endpoint = LlmEndpoint::new("http://127.0.0.1:1/v1/", "small");
        let request =
            LlmRequest::conversation(vec![LlmMessage::user("a"), LlmMessage::assistant("b")])
                .system("sys")
                .max_tokens(7)
                .temperature(0.25)
                .model_hint("ignored");
        assert_eq!(
            endpoint.body(&request),
            json!({
                "model": "small",
                "messages": [
                    {"role": "system", "content": "sys"},
                    {"role": "user", "content": "a"},
                    {"role": "assistant", "content": "b"},
                ],
                "max_tokens": 7,
                "temperature": 0.25,
            })
        );
        assert_eq!(
            endpoint.completions_url(),
            "http://127.0.0.1:1/v1/chat/completions"
        );
        let full = LlmEndpoint::new("https://h/openai/chat/completions", "m");
        assert_eq!(full.completions_url(), "https://h/openai/chat/completions");
    }

    #[test]
    fn llm_chat_completions_map_to_responses() {
        let answer = json!({
            "id": "x",
            "model": "small-1",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "sum"},
                         "finish_reason": "stop"}],
        });
        let response = response(&answer).expect("a response");
        assert_eq!(response.text, "sum");
        assert_eq!(response.model, "small-1");
        assert_eq!(response.stop_reason.as_deref(), Some("stop"));
        assert_eq!(response.via, LlmVia::Endpoint);
        let err = super::response(&json!({"choices": []})).unwrap_err();
        assert!(err.to_string().contains("no `choices`"), "{err}");
        let err =
            super::response(&json!({"choices": [{"message": {"content": null}}]})).unwrap_err();
        assert!(err.to_string().contains("message.content"), "{err}");
    }

    #[test]
    fn llm_endpoints_are_checked_and_keys_never_shown() {
        assert!(LlmEndpoint::new("http://h:8080/v1", "m").check().is_ok());
        let err = LlmEndpoint::new("h:8080/v1", "m").check().unwrap_err();
        assert!(err.starts_with("url:"), "{err}");
        let err = LlmEndpoint::new("http://h/v1", " ").check().unwrap_err();
        assert!(err.starts_with("model:"), "{err}");
        let err = LlmEndpoint::new("http://h/v1", "m")
            .api_key("${env:KEY")
            .check()
            .unwrap_err();
        assert!(err.contains("unterminated"), "{err}");
        let literal = LlmEndpoint::new("http://h/v1", "m").api_key("sk-secret");
        assert!(!format!("{literal:?}").contains("sk-secret"));
        let reference = LlmEndpoint::new("http://h/v1", "m").api_key("${env:KEY}");
        assert!(format!("{reference:?}").contains("${env:KEY}"));
    }

    #[tokio::test]
    async fn llm_endpoint_key_variables_that_are_unset_are_named() {
        let endpoint =
            LlmEndpoint::new("http://127.0.0.1:9/v1", "m").api_key("${env:MCP_LLM_UNSET_KEY_VAR}");
        let err = endpoint.complete(&LlmRequest::new("x")).await.unwrap_err();
        assert!(err.to_string().contains("MCP_LLM_UNSET_KEY_VAR"), "{err}");
    }
}
