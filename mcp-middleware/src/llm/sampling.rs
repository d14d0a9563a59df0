//! A completion through the client's sampling: [`LlmRequest`] as `sampling/createMessage`
//! params, and its result back as an [`LlmResponse`].
//!
//! The question goes to the session loop as `LoopCall::Ask` (through [`LlmHost::ask`]), which
//! sends it as a request to a client that can receive one and as an input round of the call in
//! progress to a 2026-07-28 client (`session::rounds`). Whenever the completion stops waiting, answered or not (its
//! future dropped by a cancellation or a timeout), `LoopCall::AskDone` tells the loop, which
//! withdraws a request still open at the client (`notifications/cancelled`).
//!
//! Written on `serde_json` rather than rmcp's sampling types, which rmcp marks deprecated
//! (SEP-2577) while the method is still what clients implement.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Map, Value, json};

use super::{LlmError, LlmHost, LlmRequest, LlmResponse, LlmVia};

const VIA: LlmVia = LlmVia::ClientSampling;
const METHOD: &str = "sampling/createMessage";

pub(super) async fn complete(
    host: &dyn LlmHost,
    request: &LlmRequest,
) -> Result<LlmResponse, LlmError> {
    let failed = |message: String| LlmError::Failed { via: VIA, message };
    let gone = || failed("the session ended before the client answered".to_owned());
    // Unique in the process, so unique in the session.
    static ASKS: AtomicU64 = AtomicU64::new(0);
    let ask = ASKS.fetch_add(1, Ordering::Relaxed) + 1;
    let params = params(request).to_string();
    let answer = host.ask(ask, METHOD, params).ok_or_else(gone)?;
    let _done = AskDone { host, ask };
    let answer = answer
        .await
        .map_err(|_| gone())?
        .map_err(|err| failed(err.message.into_owned()))?;
    let answer: Value = serde_json::from_str(&answer).map_err(|err| LlmError::BadAnswer {
        via: VIA,
        message: format!("the answer is not JSON: {err}"),
    })?;
    response(&answer)
}

/// Tells the session loop, when dropped, that the answer to `ask` is no longer awaited.
struct AskDone<'a> {
    host: &'a dyn LlmHost,
    ask: u64,
}

impl Drop for AskDone<'_> {
    fn drop(&mut self) {
        self.host.ask_done(self.ask);
    }
}

/// The `sampling/createMessage` params of a request.
pub(super) fn params(request: &LlmRequest) -> Value {
    let messages: Vec<Value> = request
        .messages
        .iter()
        .map(|message| {
            json!({
                "role": message.role.as_str(),
                "content": { "type": "text", "text": message.text },
            })
        })
        .collect();
    let mut params = Map::new();
    params.insert("messages".to_owned(), Value::Array(messages));
    if let Some(system) = &request.system {
        params.insert("systemPrompt".to_owned(), json!(system));
    }
    params.insert("maxTokens".to_owned(), json!(request.max_tokens));
    if let Some(temperature) = request.temperature {
        params.insert("temperature".to_owned(), json!(temperature));
    }
    if !request.model_hints.is_empty() {
        let hints: Vec<Value> = request
            .model_hints
            .iter()
            .map(|name| json!({ "name": name }))
            .collect();
        params.insert("modelPreferences".to_owned(), json!({ "hints": hints }));
    }
    Value::Object(params)
}

/// The text of a `sampling/createMessage` result: its text content (one block, or the text
/// blocks of an array, joined).
pub(super) fn response(result: &Value) -> Result<LlmResponse, LlmError> {
    let bad = |message: &str| LlmError::BadAnswer {
        via: VIA,
        message: message.to_owned(),
    };
    let content = result
        .get("content")
        .ok_or_else(|| bad("the result has no `content`"))?;
    let blocks: Vec<&Value> = match content {
        Value::Array(blocks) => blocks.iter().collect(),
        block => vec![block],
    };
    let texts: Vec<&str> = blocks
        .iter()
        .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|block| block.get("text").and_then(Value::as_str))
        .collect();
    if texts.is_empty() {
        return Err(bad("the result's content has no text"));
    }
    Ok(LlmResponse {
        text: texts.join("\n"),
        model: result
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        stop_reason: result
            .get("stopReason")
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
    fn llm_requests_map_to_create_message_params() {
        let request = LlmRequest::conversation(vec![
            LlmMessage::user("hi"),
            LlmMessage::assistant("hello"),
            LlmMessage::user("summarize"),
        ])
        .system("be brief")
        .max_tokens(50)
        .temperature(0.5)
        .model_hint("claude");
        assert_eq!(
            params(&request),
            json!({
                "messages": [
                    {"role": "user", "content": {"type": "text", "text": "hi"}},
                    {"role": "assistant", "content": {"type": "text", "text": "hello"}},
                    {"role": "user", "content": {"type": "text", "text": "summarize"}},
                ],
                "systemPrompt": "be brief",
                "maxTokens": 50,
                "temperature": 0.5,
                "modelPreferences": {"hints": [{"name": "claude"}]},
            })
        );
        let plain = params(&LlmRequest::new("x"));
        assert_eq!(
            plain,
            json!({
                "messages": [{"role": "user", "content": {"type": "text", "text": "x"}}],
                "maxTokens": 1024,
            })
        );
    }

    #[test]
    fn llm_create_message_results_map_to_responses() {
        let single = json!({
            "role": "assistant",
            "content": {"type": "text", "text": "short"},
            "model": "m1",
            "stopReason": "endTurn",
        });
        let answer = response(&single).expect("a response");
        assert_eq!(answer.text, "short");
        assert_eq!(answer.model, "m1");
        assert_eq!(answer.stop_reason.as_deref(), Some("endTurn"));
        assert_eq!(answer.via, LlmVia::ClientSampling);

        let array = json!({
            "role": "assistant",
            "content": [
                {"type": "text", "text": "a"},
                {"type": "image", "data": "", "mimeType": "image/png"},
                {"type": "text", "text": "b"},
            ],
            "model": "m2",
        });
        assert_eq!(response(&array).expect("a response").text, "a\nb");

        let image = json!({"content": {"type": "image", "data": "", "mimeType": "image/png"}});
        let err = response(&image).unwrap_err();
        assert!(err.to_string().contains("no text"), "{err}");
        let err = response(&json!({})).unwrap_err();
        assert!(err.to_string().contains("no `content`"), "{err}");
    }
}
