//! The seams the shared store (`crate::shared_store`) needs in a session: starting one from a
//! stored handshake (the upstream is started and the handshake replayed to it, as after a
//! restart), telling the store of each handshake change the client makes here, taking in the
//! change the store ordered last (another replica's client's `logging/setLevel`,
//! `resources/subscribe`/`unsubscribe`, sent on to the upstream this replica runs for the
//! session), naming the session for its hooks, and reaching the session's model states.
//!
//! A restored session does not run `on_session_start` again: the hooks ran on the replica that
//! created the session, and what they set up in the model states comes from the store.

use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use super::{Pending, ProxyRequest, Session, UpstreamState};
use crate::auth::Identity;
use crate::chain::Chain;
use crate::context::SessionScope;
use crate::exchange::handshake::Change;
use crate::jsonrpc;
use crate::project::Project;
use crate::session_id::stable_id;
use crate::shared_store::HandshakeRecord;
use crate::shared_store::handshake::{Ledger, News};
use crate::transport::queue::LineQueue;
use crate::upstream::Upstream;

/// The handshake changes a session's client makes, on their way to the store, and what the
/// session knows of the store's order (`shared_store::handshake`).
pub(crate) struct HandshakeChanges {
    changes: mpsc::UnboundedSender<Change>,
    ledger: Ledger,
}

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

    /// Takes in what the store says of the session's handshake (`shared_store::handshake`):
    /// changes another replica's client made (announced) and the numbers of those made here
    /// (written). Per concern, the change the store ordered last is what this replica keeps:
    /// a new log level and subscriptions added or removed are sent to the upstream this
    /// replica runs for the session (their answers are only logged when refused), and
    /// remembered for the next replay. An upstream being started gets them with its replay;
    /// one not running gets them when it starts. Nothing is announced again, so two replicas
    /// never echo one change back and forth.
    pub(crate) fn take_handshake(&mut self, news: News) {
        let (written, changes) = match news {
            News::Written(changes) => (true, changes),
            News::Announced(changes) => (false, changes),
        };
        for numbered in changes {
            if numbered.change == Change::Initialized {
                if !written {
                    self.initialized_elsewhere();
                }
                continue;
            }
            let Some(tracked) = &mut self.handshake_changes else {
                return;
            };
            let settled = if written {
                tracked.ledger.written(numbered)
            } else {
                tracked.ledger.announced(numbered)
            };
            if let Some(change) = settled {
                self.settle(change);
            }
        }
        let current = self.handshake_record();
        if let Some(tap) = &self.handshake_tap {
            // Kept without waking the tap's reader: the whole record is only read when the
            // session is written whole (`StateSync::flush`); changes travel one by one.
            tap.send_if_modified(|seen| {
                *seen = current;
                false
            });
        }
    }

    /// The client initialized through another replica: this replica's upstream, started for
    /// the session's `initialize`, is told once. One being started gets it with its replay
    /// (`after_initialize`), one not running when it starts.
    fn initialized_elsewhere(&mut self) {
        if self.handshake.initialized || self.handshake.initialize.is_none() {
            return;
        }
        self.handshake
            .remember_notification("notifications/initialized");
        if matches!(self.upstream, UpstreamState::Up(_)) {
            tracing::debug!(
                "the client initialized through another replica; telling this replica's upstream"
            );
            self.send_upstream(jsonrpc::notification("notifications/initialized", None));
        }
    }

    /// Makes `change` (the one in force for its concern) this replica's: remembered, and sent
    /// to its upstream when that upstream was told otherwise.
    fn settle(&mut self, change: Change) {
        let up =
            matches!(self.upstream, UpstreamState::Up(_)) && self.handshake.initialize.is_some();
        let (method, params) = match change {
            Change::Level { params } => {
                if self.handshake.log_level.as_deref() == Some(params.as_str()) {
                    return;
                }
                self.handshake.log_level = Some(params.clone());
                ("logging/setLevel", params)
            }
            Change::Subscribe { uri } => {
                if !self.handshake.subscriptions.insert(uri.clone()) {
                    return;
                }
                (
                    "resources/subscribe",
                    serde_json::json!({ "uri": uri }).to_string(),
                )
            }
            Change::Unsubscribe { uri } => {
                if !self.handshake.subscriptions.remove(&uri) {
                    return;
                }
                (
                    "resources/unsubscribe",
                    serde_json::json!({ "uri": uri }).to_string(),
                )
            }
            Change::Initialized => return,
        };
        if up {
            tracing::debug!(
                method,
                "the session's handshake changed on another replica; telling this replica's upstream"
            );
            self.send_proxy_request(method, &params);
        }
    }

    /// The client changed the handshake through this replica: the store numbers `change`
    /// (`http::sessions`), and until it has, announcements of its concern wait.
    pub(super) fn handshake_changed_here(&mut self, change: Change) {
        if let Some(tracked) = &mut self.handshake_changes {
            tracked.ledger.made(&change);
            let _ = tracked.changes.send(change);
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
    /// and each change the client makes on the returned channel, before the answer that
    /// caused it reaches the client. `floor`: the store's handshake counter the session
    /// started from (0 for a new one, `StoredSession::handshake_seq` for a restored one).
    pub(crate) fn tap_handshake(
        &mut self,
        floor: u64,
    ) -> (
        watch::Receiver<HandshakeRecord>,
        mpsc::UnboundedReceiver<Change>,
    ) {
        let (tx, rx) = watch::channel(self.handshake_record());
        self.handshake_tap = Some(tx);
        let (changes, changed) = mpsc::unbounded_channel();
        self.handshake_changes = Some(HandshakeChanges {
            changes,
            ledger: Ledger::new(floor),
        });
        (rx, changed)
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
