//! A live change of the proxy's configuration reaching an open session (`crate::live`): the
//! routes have already changed for every session; here the session moves to the new upstream
//! when its own differs, and tells its client which lists may have changed. A running set of
//! several servers that becomes another such set is reshaped server by server (only the servers
//! added, removed or changed start or stop); any other change restarts the whole upstream.

use super::{Session, UpstreamState};
use crate::jsonrpc;
use crate::live::{Lists, Reload};
use crate::upstream::Upstream;

impl Session {
    /// Moves the session to generation `reload` (see [`Session::move_to`]), then counts the
    /// move, so hooks' [`Context::configuration`](crate::Context::configuration) changes.
    pub(super) fn on_reload(&mut self, reload: Reload) {
        self.move_to(reload);
        self.scope
            .reloads
            .fetch_add(1, std::sync::atomic::Ordering::Release);
    }

    /// Moves the session to generation `reload`: stops its upstream if the new one differs
    /// (what was in flight gets an error naming the change), starts the new one (replaying the
    /// client's handshake), then sends the client its list_changed notifications.
    fn move_to(&mut self, reload: Reload) {
        if let Some(server) = reload.server.filter(|server| *server != self.server) {
            if self.reshape_in_place(&server) {
                tracing::info!(
                    generation = reload.number,
                    to = %server,
                    "the configuration changed: this session's set changes only the servers that differ"
                );
                self.server = server;
                return self.tell_lists(reload.lists);
            }
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
        self.tell_lists(reload.lists);
    }

    /// Hands the running upstream `next` when it can take it in place (the upstream's own
    /// `Connect::reshape`, `upstream/connect.rs`: a set of several servers named alike);
    /// false when the whole upstream must restart instead (one server to several or back,
    /// another separator, nothing running).
    fn reshape_in_place(&self, next: &Upstream) -> bool {
        match &self.upstream {
            UpstreamState::Up(link) | UpstreamState::Starting { link, .. } => {
                self.server.connector().reshape(next, link)
            }
            UpstreamState::Down { .. } => false,
        }
    }

    /// Sends the client the list_changed notifications for `lists`.
    fn tell_lists(&mut self, lists: Lists) {
        // Only a client past its handshake is told: before it, it has not listed anything.
        if self.handshake.initialized {
            for method in lists.notifications() {
                self.to_client(jsonrpc::notification(method, None));
            }
        }
    }
}
