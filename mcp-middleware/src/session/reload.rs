//! A live change of the proxy's configuration reaching an open session (`crate::live`): the
//! routes have already changed for every session; here the session moves to the new upstream
//! when its own differs, and tells its client which lists may have changed.

use super::{Session, UpstreamState};
use crate::jsonrpc;
use crate::live::Reload;

impl Session {
    /// Moves the session to generation `reload`: stops its upstream if the new one differs
    /// (what was in flight gets an error naming the change), starts the new one (replaying the
    /// client's handshake), then sends the client its list_changed notifications.
    pub(super) fn on_reload(&mut self, reload: Reload) {
        if let Some(server) = reload.server.filter(|server| *server != self.server) {
            tracing::info!(
                generation = reload.number,
                from = %self.server,
                to = %server,
                "the configuration changed: this session's upstream restarts"
            );
            if !matches!(self.upstream, UpstreamState::Down { .. }) {
                // The crash path: pending requests fail with the reason, the link is dropped
                // (which stops the old upstream), and the next start replays the handshake.
                self.on_upstream_closed(&format!(
                    "was stopped: the configuration changed (generation {})",
                    reload.number
                ));
            }
            self.server = server;
            if self.handshake.initialize.is_some() {
                // Started now rather than at the next request, so servers added to a project
                // run (and report their state) as soon as the change is made.
                self.ensure_upstream(None, "the new configuration");
            }
        }
        // Only a client past its handshake is told: before it, it has not listed anything.
        if self.handshake.initialized {
            for method in reload.lists.notifications() {
                self.to_client(jsonrpc::notification(method, None));
            }
        }
    }
}
