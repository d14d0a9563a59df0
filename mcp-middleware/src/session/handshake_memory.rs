//! The session's handshake memory as the loop keeps it: what a client request or an
//! upstream answer adds to the [`Handshake`](crate::exchange::Handshake) a restarted upstream
//! is replayed (and a shared store is told of, change by change: `shared`).

use super::Session;
use super::bridge::ClientEra;
use crate::era;

impl Session {
    /// Keeps what a restarted upstream must be told again.
    pub(super) fn remember_state(&mut self, method: &str, params: Option<&str>) {
        self.handshake.remember(method, params);
        if let Some(change) = crate::exchange::handshake::Change::of_request(method, params) {
            self.handshake_changed_here(change);
        }
        if matches!(
            method,
            "logging/setLevel" | "resources/subscribe" | "resources/unsubscribe"
        ) {
            self.publish_handshake();
        }
    }

    /// Keeps what an answer tells about the session: an accepted `initialize` is replayed after
    /// a restart; a `server/discover` the client sent itself that the upstream answered for
    /// 2026-07-28 settles the era, so the proxy need not probe.
    pub(super) fn note_handshake_answer(
        &mut self,
        uid: u64,
        method: &str,
        outcome: Result<&str, &str>,
    ) {
        if let Some(params) = self.handshake.initialize_answered(uid, outcome)
            && let Ok(result) = outcome
        {
            self.record_session_info(&params, result);
            self.publish_handshake();
        }
        if method == "server/discover"
            && matches!(self.era, ClientEra::Unknown)
            && outcome.is_ok_and(era::discover_offers_stateless)
        {
            self.era = ClientEra::Same;
        }
    }
}
