//! The seams the shared store (`crate::shared_store`) needs in a session: starting one from a
//! stored handshake (the upstream is started and the handshake replayed to it, as after a
//! restart), telling the store when the handshake memory changes, taking in a change another
//! replica's client made (`logging/setLevel`, `resources/subscribe`/`unsubscribe`, sent on to
//! the upstream this replica runs for the session), naming the session for its hooks, and
//! reaching the session's model states.
//!
//! A restored session does not run `on_session_start` again: the hooks ran on the replica that
//! created the session, and what they set up in the model states comes from the store.

use std::sync::Arc;

use tokio::sync::watch;

use super::{Pending, ProxyRequest, Session, UpstreamState};
use crate::auth::Identity;
use crate::chain::Chain;
use crate::context::SessionScope;
use crate::jsonrpc;
use crate::project::Project;
use crate::session_id::stable_id;
use crate::shared_store::HandshakeRecord;
use crate::transport::queue::LineQueue;
use crate::upstream::Upstream;

impl Session {
    /// Starts a session another replica created, from its stored handshake: the upstream is
    /// started and, when the client had initialized, its `initialize` is replayed (then
    /// `notifications/initialized`, the log level and the subscriptions); the client's
    /// messages wait until that is done, exactly as after a restart.
    pub(crate) fn restore(
        server: Upstream,
        options: super::SessionOptions,
        to_client: LineQueue,
        chain: Arc<Chain>,
        project: Option<Arc<Project>>,
        identity: Identity,
        handshake: HandshakeRecord,
    ) -> Result<Self, crate::error::UpstreamError> {
        let mut session = Self::start(server, options, to_client, chain, project, identity)?;
        // Its model states come from the store: what the hooks set up there is in them.
        session.started_elsewhere = true;
        session.handshake.log_level = handshake.log_level;
        session.handshake.subscriptions = handshake.subscriptions;
        let Some(params) = handshake.initialize else {
            return Ok(session);
        };
        // A client that sends a request to this replica has finished its handshake (the
        // stored record may not say so yet: `notifications/initialized` may be what is being
        // sent here).
        session.handshake.initialized = true;
        session.handshake.initialize = Some(params.clone());
        let UpstreamState::Up(link) = std::mem::replace(
            &mut session.upstream,
            UpstreamState::Down {
                reason: String::new(),
            },
        ) else {
            return Ok(session);
        };
        let uid = session.next_upstream_id();
        session
            .pending
            .insert(uid, Pending::Proxy(ProxyRequest::ReplayInitialize));
        link.send(jsonrpc::request(
            itoa::Buffer::new().format(uid),
            "initialize",
            Some(&params),
        ));
        session.upstream = UpstreamState::Starting {
            link,
            queued: crate::upstream::Replay::replaying(uid),
        };
        Ok(session)
    }

    /// Names the session for its hooks ([`Context::session_id`](crate::Context::session_id)):
    /// the id every replica derives from the HTTP session's `Mcp-Session-Id` (see
    /// [`stable_id`](crate::session_id::stable_id)), instead of the per-process number a session starts with. Call it
    /// before [`Session::run`], while nothing else holds the session's scope.
    pub(crate) fn name(&mut self, mcp_session_id: &str) {
        match Arc::get_mut(&mut self.scope) {
            Some(scope) => scope.id = stable_id(mcp_session_id),
            // Only the session holds its scope before it runs; a scope shared already keeps
            // its per-process id (logged, never a panic).
            None => tracing::warn!(
                "a session was named after it started; its hooks keep its process-local id"
            ),
        }
    }

    /// Takes in the handshake memory another replica's client changed (`record`, announced
    /// through the store): a new log level and the subscriptions added or removed are sent to
    /// the upstream this replica runs for the session (their answers are only logged when
    /// refused), and remembered for the next replay. An upstream being started gets them with
    /// its replay; one not running gets them when it starts. The `initialize` is not taken
    /// (this replica replayed the same one). Nothing is announced again, so two replicas never
    /// echo one change back and forth.
    pub(crate) fn take_handshake(&mut self, record: HandshakeRecord) {
        // The client initialized through another replica: this replica's upstream, started
        // for the session's `initialize`, is told once. One being started gets it with its
        // replay (`after_initialize`), one not running when it starts.
        let initialized_elsewhere = record.initialized
            && !self.handshake.initialized
            && self.handshake.initialize.is_some();
        if initialized_elsewhere {
            self.handshake
                .remember_notification("notifications/initialized");
            if matches!(self.upstream, UpstreamState::Up(_)) {
                tracing::debug!(
                    "the client initialized through another replica; telling this replica's upstream"
                );
                self.send_upstream(jsonrpc::notification("notifications/initialized", None));
            }
        }
        let level = (record.log_level != self.handshake.log_level)
            .then(|| record.log_level.clone())
            .flatten();
        let added: Vec<String> = record
            .subscriptions
            .difference(&self.handshake.subscriptions)
            .cloned()
            .collect();
        let removed: Vec<String> = self
            .handshake
            .subscriptions
            .difference(&record.subscriptions)
            .cloned()
            .collect();
        if record.log_level.is_some() {
            self.handshake.log_level = record.log_level;
        }
        self.handshake.subscriptions = record.subscriptions;
        let current = self.handshake_record();
        if let Some(tap) = &self.handshake_tap {
            // Changed without telling the tap's reader: it announces this replica's changes
            // only.
            tap.send_if_modified(|seen| {
                *seen = current;
                false
            });
        }
        if !matches!(self.upstream, UpstreamState::Up(_)) || self.handshake.initialize.is_none() {
            return;
        }
        if let Some(level) = level {
            tracing::debug!(
                "another replica's client set the log level; telling this replica's upstream"
            );
            self.send_proxy_request("logging/setLevel", &level);
        }
        for (method, uris) in [
            ("resources/subscribe", added),
            ("resources/unsubscribe", removed),
        ] {
            for uri in uris {
                let params = serde_json::json!({ "uri": uri }).to_string();
                self.send_proxy_request(method, &params);
            }
        }
    }

    /// The client cancelled request `did` (its id as the client saw it, once a replica's
    /// tag is taken off: `http::shared_streams::cancelled`), one the upstream had sent it: it
    /// is forgotten, and its id upstream returned for the cancellation to name. `None` when no
    /// such request of the upstream's is pending, or a hook sent it (the hook's wait ends
    /// with the client's cancellation).
    pub(super) fn withdraw_upstream_request(&mut self, did: &str) -> Option<serde_json::Value> {
        let did = did.parse::<u64>().ok()?;
        let request = self.upstream_requests.remove(did)?;
        if request.hook.is_some() {
            return None;
        }
        serde_json::from_str(&request.upstream_id).ok()
    }

    /// The session's scope (its model states), for the shared store to save and load.
    pub(crate) fn scope(&self) -> Arc<SessionScope> {
        self.scope.clone()
    }

    /// From now on, every change of the handshake memory is published on the returned watch
    /// before the answer that caused it reaches the client.
    pub(crate) fn tap_handshake(&mut self) -> watch::Receiver<HandshakeRecord> {
        let (tx, rx) = watch::channel(self.handshake_record());
        self.handshake_tap = Some(tx);
        rx
    }

    /// Publishes the handshake memory if a store taps it and it changed.
    pub(super) fn publish_handshake(&self) {
        let Some(tap) = &self.handshake_tap else {
            return;
        };
        let record = self.handshake_record();
        tap.send_if_modified(|current| {
            let changed = *current != record;
            if changed {
                *current = record;
            }
            changed
        });
    }

    fn handshake_record(&self) -> HandshakeRecord {
        HandshakeRecord {
            initialize: self.handshake.initialize.clone(),
            log_level: self.handshake.log_level.clone(),
            subscriptions: self.handshake.subscriptions.clone(),
            initialized: self.handshake.initialized,
        }
    }
}
