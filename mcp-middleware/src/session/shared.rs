//! The seams the shared store (`crate::shared_store`) needs in a session: starting one from a
//! stored handshake (the upstream is started and the handshake replayed to it, as after a
//! restart), telling the store when the handshake memory changes, and reaching the session's
//! model states.

use std::sync::Arc;

use tokio::sync::watch;

use super::{Pending, ProxyRequest, Session, UpstreamState};
use crate::auth::Identity;
use crate::chain::Chain;
use crate::context::SessionScope;
use crate::jsonrpc;
use crate::project::Project;
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
        session.handshake.log_level = handshake.log_level;
        session.handshake.subscriptions = handshake.subscriptions;
        let Some(params) = handshake.initialize else {
            return Ok(session);
        };
        // A client that sends a request to this replica has finished its handshake.
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
        }
    }
}
