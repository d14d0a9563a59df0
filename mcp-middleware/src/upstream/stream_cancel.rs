//! Cancellation by closing the response stream, as the 2026-07-28 HTTP transport has a client
//! cancel: a 2026-07-28 HTTP server drops `notifications/cancelled` (it holds no state across
//! requests to act on one), and only sees a request cancelled when its response stream closes.
//!
//! [`StreamCancels`] owns the in-flight 2026-07-28 requests of one HTTP upstream connection, by
//! JSON-RPC id: the HTTP client registers each such request before it is sent, and a
//! `notifications/cancelled` naming one of them cancels its token (whose holder then drops the
//! `POST` and its stream) instead of being posted. Requests of a 2025-11-25 session are never
//! registered, so their cancellations are posted as the handshake transport expects.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// The in-flight 2026-07-28 requests of one HTTP upstream connection, by canonical id.
#[derive(Debug, Default)]
pub(crate) struct StreamCancels {
    live: Mutex<HashMap<String, CancellationToken>>,
}

impl StreamCancels {
    /// Registers request `id` (its raw JSON text); the token is cancelled when the session
    /// cancels the request.
    pub(crate) fn register(&self, id: &str) -> CancellationToken {
        let token = CancellationToken::new();
        if let Some(key) = canonical(id) {
            self.lock().insert(key, token.clone());
        }
        token
    }

    /// Forgets request `id` once its exchange ended (answered, failed or cancelled).
    pub(crate) fn finished(&self, id: &str) {
        if let Some(key) = canonical(id) {
            self.lock().remove(&key);
        }
    }

    /// Cancels the request a `notifications/cancelled` line names, if it is one of ours; true
    /// when it was (the notification is then not to be posted).
    pub(crate) fn cancel(&self, notification_params: Option<&str>) -> bool {
        let Some(params) = notification_params else {
            return false;
        };
        let Ok(params) = serde_json::from_str::<Value>(params) else {
            return false;
        };
        let Some(id) = params.get("requestId") else {
            return false;
        };
        match self.lock().remove(&id.to_string()) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, CancellationToken>> {
        // A panic elsewhere while holding this map leaves it whole: keep using it.
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// An id's text as serde_json writes it, so `"a"` and ` "a" ` (or `1` and `1`) match.
fn canonical(id: &str) -> Option<String> {
    serde_json::from_str::<Value>(id)
        .ok()
        .map(|v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancellation_cancels_only_the_request_it_names() {
        let cancels = StreamCancels::default();
        let one = cancels.register("\"one\"");
        let two = cancels.register("2");
        assert!(cancels.cancel(Some(r#"{"requestId":"one","reason":"x"}"#)));
        assert!(one.is_cancelled());
        assert!(!two.is_cancelled());
        // Already cancelled, or never ours: the notification goes to the server as it is.
        assert!(!cancels.cancel(Some(r#"{"requestId":"one"}"#)));
        assert!(!cancels.cancel(Some(r#"{"requestId":3}"#)));
        assert!(!cancels.cancel(None));
        cancels.finished("2");
        assert!(!cancels.cancel(Some(r#"{"requestId":2}"#)));
        assert!(!two.is_cancelled());
    }
}
