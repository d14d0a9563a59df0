//! The HTTP sessions (`SessionTable`): every open HTTP session, how one starts and how it ends.
//!
//! A session here is one core [`Session`] (its own upstream, model state and forwarding loop)
//! plus the [`Streams`] its messages travel on, and a router task that moves each message the
//! core session writes for the client onto its stream. Stateful sessions are found by their
//! `Mcp-Session-Id` (128 random bits, hex); stateless ones by their [`StatelessKey`]. The
//! session table enforces the session limit and each owner's quota (see [`super::quota`]), ends
//! idle sessions, and ends them all at shutdown. A session stops counting the moment it is
//! deleted, or once it has ended by itself or been ended as idle: the counts are taken from the
//! open sessions themselves, never kept beside them, so there is no count to leak.
//!
//! With a shared store ([`HttpOptions::shared_store`]) a stateful session is also a record in
//! the store: [`SessionTable::lookup`] restores a session another replica created (same principal
//! only), renews its TTL on every request and takes in model state other replicas wrote; the
//! router writes the handshake and changed state before each line reaches the client; `DELETE`
//! removes the record, and a replica still holding the session drops it on its next use. A
//! stateless session's model state is kept there too, under its owner and client
//! ([`stateless_store_id`]). `--max-sessions` counts this replica's live sessions; each owner's
//! quota counts its sessions on every replica (an atomic claim in the store, released by
//! `DELETE` or the session's expiry).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper::StatusCode;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::event_store::EventStore;
use super::options::HttpOptions;
use super::quota::{self, Owner};
use super::reject::Reject;
use super::shared_streams::flush;
use super::streams::{Streaming, Streams};
use crate::auth::{CurrentIdentity, Identity};
use crate::chain::Chain;
use crate::exchange::handshake::Change;
use crate::jsonrpc;
use crate::project::Project;
use crate::session::{Ended, Event, Session, SessionOptions};
use crate::shared_store::events::EventLog;
use crate::shared_store::fanout::{Fanout, HandshakeChanged};
use crate::shared_store::handshake::{News, Numbered};
use crate::shared_store::sync::{Presence, StateSync, with_documents};
use crate::shared_store::{
    HandshakeRecord, Heard, SessionMeta, SharedStore, StoreError, StoredSession,
};
use crate::transport::Frame;
use crate::transport::cut_through::{Tail, TailPiece};
use crate::transport::outbound::Belongs;
use crate::transport::queue::LineQueue;
use crate::upstream::Upstream;
use crate::upstream::token_exchange::Caller;

/// What every session is started from.
pub(crate) struct SessionFactory {
    pub(crate) server: Upstream,
    pub(crate) options: SessionOptions,
    pub(crate) chain: Arc<Chain>,
    pub(crate) project: Option<Arc<Project>>,
}

/// What stateless (2026-07-28) requests share a session by: the client's name from the request
/// envelope (`io.modelcontextprotocol/clientInfo`) and the session's [`Owner`] (the principal
/// the request authenticated as, or the client's address when the front authenticates no one),
/// so two users of one client never share model state, anonymous ones on different hosts
/// included.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct StatelessKey {
    pub(crate) client: String,
    pub(crate) owner: Owner,
}

/// One open session.
pub(crate) struct SessionHandle {
    pub(crate) id: Arc<str>,
    /// Who started the session ([`Identity`]'s principal); every request of the session must
    /// authenticate as the same.
    principal: String,
    /// Whose quota the session counts against.
    owner: Owner,
    events: mpsc::Sender<Event>,
    pub(crate) streams: Arc<Mutex<Streams>>,
    last_seen: Mutex<Instant>,
    /// Cancelled once the core session has stopped and every stream is closed.
    pub(crate) ended: CancellationToken,
    closing: AtomicBool,
    reason: Mutex<Option<String>>,
    /// What the admin API shows of it ([`SessionSummary`]).
    stats: SessionStats,

    /// The caller token exchange to upstreams acts for; the handler keeps its token current.
    pub(crate) caller: Caller,
    /// Who the session acts as; the handler hands it each request's identity, so routing
    /// restrictions follow the credential presented now, not the one the session began with.
    identity: Arc<CurrentIdentity>,
    /// The session's link to the shared store, when there is one.
    sync: Option<Arc<StateSync>>,
}

impl SessionHandle {
    /// Notes that the client used the session now.
    pub(crate) fn touch(&self) {
        if let Ok(mut last) = self.last_seen.lock() {
            *last = Instant::now();
        }
    }

    /// Takes what a request of the session was just authenticated as (and the token it
    /// presented) as the session's from now on: its restrictions, and the token exchange to
    /// upstreams, follow the credential, before the request is handed on.
    pub(crate) fn present(&self, identity: &Identity, bearer: Option<&str>) {
        self.identity.present(identity);
        self.caller.present(bearer);
    }

    /// Hands a client message to the core session.
    pub(crate) async fn send(&self, line: String) -> Result<(), Reject> {
        self.touch();
        self.stats.saw(&line);
        self.events
            .send(Event::Client(Frame::Line(line)))
            .await
            .map_err(|_| Reject::session_not_found())
    }

    /// Ends the session: the core session stops its upstream, open requests are answered
    /// with `reason`, every stream closes.
    fn close(&self, reason: &str) {
        if self.closing.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Ok(mut slot) = self.reason.lock() {
            *slot = Some(reason.to_owned());
        }
        if let Err(mpsc::error::TrySendError::Full(event)) =
            self.events.try_send(Event::ClientClosed)
        {
            let events = self.events.clone();
            tokio::spawn(async move {
                let _ = events.send(event).await;
            });
        }
    }

    /// Whether the session still counts: not ended, and not being ended.
    fn is_open(&self) -> bool {
        !self.ended.is_cancelled() && !self.closing.load(Ordering::SeqCst)
    }

    fn idle_for(&self, now: Instant) -> Duration {
        let last = self.last_seen.lock().map(|l| *l).unwrap_or(now);
        now.saturating_duration_since(last)
    }
}

/// A message for a session's GET stream another replica may hold: (session id, line).
type Announced = (Arc<str>, String);

/// Every open session.
pub(crate) struct SessionTable {
    factory: SessionFactory,
    options: HttpOptions,
    stateful: Mutex<HashMap<Arc<str>, Arc<SessionHandle>>>,
    stateless: Mutex<HashMap<StatelessKey, Arc<SessionHandle>>>,
    /// Set at shutdown: new sessions and requests are refused with this reason.
    closing: Mutex<Option<String>>,
    /// Held while a session is counted, started and registered, so concurrent starts cannot
    /// pass the session limit together (starting is synchronous: spawning the upstream).
    starting: Mutex<()>,
    /// Where stateful sessions are shared with other replicas.
    store: Option<SharedStore>,
    /// Messages for GET streams other replicas may hold, to announce.
    announce: mpsc::UnboundedSender<Announced>,
    /// Its receiving end, until `listen_to_store` takes it.
    outbox: Mutex<Option<mpsc::UnboundedReceiver<Announced>>>,
}

impl SessionTable {
    pub(crate) fn new(factory: SessionFactory, options: HttpOptions) -> Self {
        let (announce, outbox) = mpsc::unbounded_channel();
        Self {
            announce,
            outbox: Mutex::new(Some(outbox)),
            store: options.shared_store.clone(),
            factory,
            options,
            stateful: Mutex::new(HashMap::new()),
            stateless: Mutex::new(HashMap::new()),
            closing: Mutex::new(None),
            starting: Mutex::new(()),
        }
    }

    pub(crate) fn options(&self) -> &HttpOptions {
        &self.options
    }

    /// The shared store, if one is configured.
    pub(crate) fn shared_store(&self) -> Option<&SharedStore> {
        self.store.as_ref()
    }

    /// The shared event log, with a shared store.
    pub(crate) fn event_log(&self) -> Option<Arc<dyn EventLog>> {
        self.store.as_ref().map(|store| store.events.clone())
    }

    /// The stateful session `id` open here, whoever it belongs to (for what other replicas
    /// relay to it; what a client asks goes through [`find`](Self::find)).
    pub(crate) fn local(&self, id: &str) -> Option<Arc<SessionHandle>> {
        self.stateful
            .lock()
            .ok()?
            .get(id)
            .filter(|handle| handle.is_open())
            .cloned()
    }

    /// Refuses work once shutdown has begun.
    pub(crate) fn check_open(&self) -> Result<(), Reject> {
        match self.closing.lock().ok().and_then(|c| c.clone()) {
            Some(reason) => Err(Reject::unavailable(format!(
                "Service Unavailable: {reason}"
            ))),
            None => Ok(()),
        }
    }

    /// How many sessions are open, and how many of them `owner` holds.
    fn count(&self, owner: &Owner) -> (usize, usize) {
        let (mut all, mut owned) = (0, 0);
        let mut tally = |handle: &Arc<SessionHandle>| {
            if handle.is_open() {
                all += 1;
                owned += usize::from(handle.owner == *owner);
            }
        };
        if let Ok(map) = self.stateful.lock() {
            map.values().for_each(&mut tally);
        }
        if let Ok(map) = self.stateless.lock() {
            map.values().for_each(&mut tally);
        }
        (all, owned)
    }

    /// The stateful session `id`, if open and started by the same principal as `identity`
    /// (a session of someone else is as good as unknown).
    pub(crate) fn find(&self, id: &str, identity: &Identity) -> Option<Arc<SessionHandle>> {
        let found = self.stateful.lock().ok()?.get(id).cloned()?;
        (!found.ended.is_cancelled() && found.principal == identity.principal()).then_some(found)
    }

    /// The stateful session `id` for `identity`, on any replica: the one open here, or, with a
    /// shared store, the one another replica created, restored here. `None`: no such session
    /// (or someone else's). A store that cannot be reached is an error naming it.
    pub(crate) async fn lookup(
        &self,
        id: &str,
        identity: &Identity,
    ) -> Result<Option<Arc<SessionHandle>>, Reject> {
        if let Some(handle) = self.find(id, identity) {
            // Seen now, before the store's round trip: the reaper must not end this replica's
            // copy of a session whose request is on its way.
            handle.touch();
            if let Some(sync) = &handle.sync {
                match sync.refresh().await.map_err(store_reject)? {
                    Presence::Live => {}
                    Presence::Gone => {
                        self.forget(id, "the session was ended on another replica");
                        return Ok(None);
                    }
                }
            }
            // A shared session's copy here ended meanwhile (it had idled out): the session
            // lives on in the store, restored below, instead of failing the request.
            if handle.is_open() || self.store.is_none() {
                return Ok(Some(handle));
            }
        }
        let Some(store) = &self.store else {
            return Ok(None);
        };
        if id.starts_with("stateless:") || id.len() > 64 {
            return Ok(None);
        }
        let Some(stored) = store
            .backend
            .load(id, self.options.idle_timeout)
            .await
            .map_err(store_reject)?
        else {
            return Ok(None);
        };
        if stored.meta.principal != identity.principal() {
            return Ok(None);
        }
        let stored = with_documents(store, id, stored)
            .await
            .map_err(store_reject)?;
        self.check_open()?;
        let _starting = self.starting.lock();
        // Another request of the session may have restored it while this one read the store.
        if let Some(handle) = self.find(id, identity) {
            return Ok(Some(handle));
        }
        let owner = Owner::stored(stored.meta.owner.clone());
        self.check_limit(&owner)?;
        let id: Arc<str> = id.into();
        let handle = self.start(id.clone(), false, identity, owner, Some(stored), None)?;
        if let Ok(mut map) = self.stateful.lock() {
            map.insert(id.clone(), handle.clone());
        }
        tracing::info!(session = %short(&id), identity = identity.subject(), kind = identity.kind(), "HTTP session restored from the shared store");
        Ok(Some(handle))
    }

    /// With a shared store: from now on, a session a `DELETE` ends on another replica is
    /// dropped here at once (its upstream stops), not only at its next request; messages for
    /// a session's GET stream that a replica without it produced reach the GET stream held
    /// here, and those produced here for a GET stream held elsewhere are announced.
    pub(crate) fn listen_to_store(self: &Arc<Self>) {
        let Some(store) = &self.store else {
            return;
        };
        super::shared_streams::listen_for_answers(self);
        let table = Arc::downgrade(self);
        store.backend.listen(Box::new(move |heard| {
            let Some(table) = table.upgrade() else {
                return false;
            };
            match heard {
                Heard::Ended(id) => table.forget(&id, "the session was ended on another replica"),
                Heard::ForStream { id, line } => {
                    let handle = table
                        .stateful
                        .lock()
                        .ok()
                        .and_then(|m| m.get(&*id).cloned());
                    if let Some(handle) = handle
                        && let Ok(mut streams) = handle.streams.lock()
                        && streams.holds_standalone()
                    {
                        streams.deliver_standalone(line);
                    }
                }
                Heard::Reconnecting => {}
            }
            true
        }));
        if let Some(fanout) = &store.fanout {
            let table = Arc::downgrade(self);
            fanout.listen(Box::new(move |heard| {
                let Some(table) = table.upgrade() else {
                    return false;
                };
                if let Some(heard) = heard {
                    table.take_handshake(heard);
                }
                true
            }));
        }
        let Some(mut outbox) = self.outbox.lock().ok().and_then(|mut o| o.take()) else {
            return;
        };
        let store = store.clone();
        tokio::spawn(async move {
            // In order, one at a time: a session's messages keep their order.
            while let Some((id, line)) = outbox.recv().await {
                if let Err(err) = store.backend.publish(&id, &line).await {
                    tracing::warn!(session = %short(&id), "{err}; a message for the client's GET stream was lost");
                }
            }
        });
    }

    /// Hands session `heard.session`'s handshake memory, changed by another replica's client,
    /// to the copy of the session running here, if there is one (`shared_store::fanout`).
    fn take_handshake(&self, heard: HandshakeChanged) {
        let Some(handle) = self
            .stateful
            .lock()
            .ok()
            .and_then(|m| m.get(heard.session.as_str()).cloned())
        else {
            return;
        };
        if let Err(mpsc::error::TrySendError::Full(event)) = handle
            .events
            .try_send(Event::Handshake(News::Announced(heard.changes)))
        {
            let events = handle.events.clone();
            tokio::spawn(async move {
                let _ = events.send(event).await;
            });
        }
    }

    /// Drops the local copy of session `id` (ended elsewhere): its upstream stops.
    fn forget(&self, id: &str, reason: &str) {
        if let Some(handle) = self.stateful.lock().ok().and_then(|mut m| m.remove(id)) {
            handle.close(reason);
        }
    }

    /// Starts a stateful session (for an `initialize`) for `identity`, counted against `owner`.
    pub(crate) async fn create(
        &self,
        identity: &Identity,
        owner: Owner,
    ) -> Result<Arc<SessionHandle>, Reject> {
        self.check_open()?;
        let id: Arc<str> = new_session_id()?.into();
        // With a shared store the quota counts the owner's sessions on every replica; the
        // claim also proves the store answers (a session other replicas cannot find would
        // break at its first move).
        self.claim(&owner, &id).await?;
        let started = {
            let _starting = self.starting.lock();
            self.check_limit(&owner)
                .and_then(|()| self.start(id.clone(), false, identity, owner.clone(), None, None))
        };
        let handle = match started {
            Ok(handle) => handle,
            Err(reject) => {
                self.release(&owner, &id).await;
                return Err(reject);
            }
        };
        if let Ok(mut map) = self.stateful.lock() {
            map.insert(id.clone(), handle.clone());
        }
        tracing::info!(session = %short(&id), identity = identity.subject(), kind = identity.kind(), "HTTP session started");
        Ok(handle)
    }

    /// With a shared store: counts session `id` against `owner`'s quota on every replica, or
    /// refuses it when `owner` is at its quota (or the store cannot be reached).
    async fn claim(&self, owner: &Owner, id: &str) -> Result<(), Reject> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        let quota = self.options.session_quota();
        let claimed = store
            .backend
            .claim(owner.as_str(), id, quota, self.options.idle_timeout)
            .await
            .map_err(store_reject)?;
        if claimed {
            return Ok(());
        }
        tracing::info!(
            owner = owner.as_str(),
            quota,
            "session quota reached (counted on every replica)"
        );
        Err(quota::owner_full(&self.options, owner))
    }

    /// Undoes [`Self::claim`] for a session that could not start.
    async fn release(&self, owner: &Owner, id: &str) {
        if let Some(store) = &self.store
            && let Err(err) = store.backend.release(owner.as_str(), id).await
        {
            tracing::warn!(session = %short(id), "{err}; the session counts against its owner's quota until it expires");
        }
    }

    /// The stateless session for `key`, started for `identity` if there is none. With a
    /// shared store its model state lives there too, under [`stateless_store_id`]: a session
    /// open here takes in what other replicas wrote, and one started here starts from the
    /// store's (so a client whose requests reach different replicas keeps one state).
    pub(crate) async fn stateless(
        &self,
        key: StatelessKey,
        identity: &Identity,
    ) -> Result<Arc<SessionHandle>, Reject> {
        self.check_open()?;
        let open = |map: &HashMap<StatelessKey, Arc<SessionHandle>>| {
            map.get(&key).filter(|h| h.is_open()).cloned()
        };
        if let Some(found) = self.stateless.lock().ok().and_then(|m| open(&m)) {
            match &found.sync {
                Some(sync) => match sync.refresh().await.map_err(store_reject)? {
                    Presence::Live => return Ok(found),
                    // Its record is gone (a store restarted without it is written again by
                    // `refresh`; this is an ended mark): start afresh.
                    Presence::Gone => found.close("the session's record was removed"),
                },
                None => return Ok(found),
            }
        }
        let store_id = stateless_store_id(&key);
        let mut restore = None;
        if let Some(store) = &self.store {
            self.claim(&key.owner, &store_id).await?;
            let stored = store
                .backend
                .load(&store_id, self.options.idle_timeout)
                .await
                .map_err(store_reject)?
                .filter(|stored| stored.meta.principal == identity.principal());
            if let Some(stored) = stored {
                restore = Some(
                    with_documents(store, &store_id, stored)
                        .await
                        .map_err(store_reject)?,
                );
            }
        }
        let _starting = self.starting.lock();
        // Another request may have started it while this one waited.
        if let Some(found) = self.stateless.lock().ok().and_then(|m| open(&m)) {
            return Ok(found);
        }
        self.check_limit(&key.owner)?;
        let id: Arc<str> = format!("stateless:{}", key.client).into();
        let restored = restore.is_some();
        let handle = self.start(
            id,
            true,
            identity,
            key.owner.clone(),
            restore,
            Some(store_id.into()),
        )?;
        if let Ok(mut map) = self.stateless.lock() {
            map.insert(key.clone(), handle.clone());
        }
        tracing::info!(client = %key.client, identity = identity.subject(), kind = identity.kind(), restored, "stateless HTTP session started");
        Ok(handle)
    }

    /// Refuses a new session for `owner` when the proxy or `owner` is at its limit. A full
    /// proxy is named first: raising the owner's quota would not help then.
    fn check_limit(&self, owner: &Owner) -> Result<(), Reject> {
        let (all, owned) = self.count(owner);
        if all >= self.options.max_sessions {
            return Err(quota::sessions_full(&self.options));
        }
        // With a shared store the owner's sessions are counted there, on every replica.
        if self.store.is_none() && owned >= self.options.session_quota() {
            tracing::info!(
                owner = owner.as_str(),
                sessions = owned,
                "session quota reached"
            );
            return Err(quota::owner_full(&self.options, owner));
        }
        Ok(())
    }

    /// Starts a session; `restore`: from what the store kept of it. With a shared store the
    /// session is kept there under `store_id` (default: `id`).
    fn start(
        &self,
        id: Arc<str>,
        stateless: bool,
        identity: &Identity,
        owner: Owner,
        restore: Option<StoredSession>,
        store_id: Option<Arc<str>>,
    ) -> Result<Arc<SessionHandle>, Reject> {
        let factory = &self.factory;
        let (events_tx, events_rx) = mpsc::channel(256);
        // Its router takes tails: a large answer no hook touches goes out while it arrives.
        let (to_client, mut lines) = LineQueue::new(factory.options.client_queue_bytes);
        let to_client = to_client.taking_tails();
        // Without a shared store, routing a line is all the router does with it: the session's
        // writers route it themselves while nothing waits in the channel (`Inline`), which
        // saves waking the router for every answer. With a store the router first writes what
        // changed (`persist`), which must not run on the writers' threads.
        let (to_client, inline) = if self.store.is_none() {
            let (queue, inline) = to_client.with_inline();
            (queue, Some(inline))
        } else {
            (to_client, None)
        };
        let backlog = to_client.gauge().clone();
        let caller = Caller::new(identity.principal());
        // The running configuration (a live reload may have replaced the proxy's own).
        let current = factory.current(&caller);
        let options = factory.options_for(&caller);
        let started = match &restore {
            // A stateless session has no handshake of the client's to replay: only its
            // model state is taken from the store.
            Some(stored) if !stateless => Session::restore(
                current.server,
                options,
                to_client,
                current.chain,
                current.project,
                identity.clone(),
                stored.meta.handshake.clone(),
            ),
            _ => Session::start(
                current.server,
                options,
                to_client,
                current.chain,
                current.project,
                identity.clone(),
            ),
        };
        let mut session = started.map_err(|err| {
            Reject::new(
                StatusCode::BAD_GATEWAY,
                jsonrpc::UPSTREAM_UNAVAILABLE,
                format!("Bad Gateway: {err}"),
            )
        })?;
        if !stateless {
            // Hooks see an id every replica derives alike from the Mcp-Session-Id.
            session.name(&id);
        }
        let shared = match &self.store {
            Some(store) => {
                let floor = restore.as_ref().map_or(0, |stored| stored.handshake_seq);
                let handshake = session.tap_handshake(floor);
                let scope = session.scope();
                let ttl = self.options.idle_timeout;
                let key = store_id.unwrap_or_else(|| id.clone());
                let sync = match restore {
                    Some(stored) => StateSync::restored(store.clone(), key, ttl, scope, stored)
                        .map_err(store_reject)?,
                    None => StateSync::new(store.clone(), key, ttl, scope),
                };
                // A stateless session is worth storing from its first answer: it has no
                // `initialize` to wait for.
                let sync = sync.without_handshake(stateless).owned_by(owner.as_str());
                Some((Arc::new(sync), handshake))
            }
            None => None,
        };
        let store = EventStore::new(
            self.options.event_store_events,
            self.options.event_store_bytes,
        );
        let mut streams = Streams::new(
            stateless,
            store,
            self.options.sse_retry_ms,
            events_tx.clone(),
            backlog,
        );
        // A stateless session's streams are not resumable: its events stay on this replica.
        let log = match (&self.store, &shared) {
            (Some(store), Some(_)) if !stateless => {
                streams.share_events(store.events.replica());
                Some(store.events.clone())
            }
            _ => None,
        };
        let (bound, ttl) = (self.options.event_store_events, self.options.idle_timeout);
        if shared.is_some() && !stateless {
            let announce = self.announce.clone();
            let id = id.clone();
            streams.send_standalone_elsewhere(Box::new(move |line| {
                let _ = announce.send((id.clone(), line.to_owned()));
            }));
        }
        let streams = Arc::new(Mutex::new(streams));
        let handle = Arc::new(SessionHandle {
            id,
            principal: identity.principal(),
            owner,
            events: events_tx,
            streams: streams.clone(),
            last_seen: Mutex::new(Instant::now()),
            ended: CancellationToken::new(),
            closing: AtomicBool::new(false),
            reason: Mutex::new(None),
            stats: SessionStats::default(),

            caller,
            identity: session.identity(),
            sync: shared.as_ref().map(|(sync, _)| sync.clone()),
        });
        if let Some(inline) = &inline {
            let streams = streams.clone();
            inline.start(Box::new(move |line, belongs| {
                if let Ok(mut streams) = streams.lock() {
                    streams.route_record(line, belongs);
                }
                None
            }));
        }
        let mut run = tokio::spawn(session.run(events_rx));
        let router = handle.clone();
        let mut shared = shared.map(|(sync, (mut handshake, changes))| {
            // A restored session starts from the handshake it replays: its first write must
            // not replace the stored one by an empty one.
            let meta = SessionMeta {
                principal: router.principal.clone(),
                owner: router.owner.as_str().to_owned(),
                handshake: handshake.borrow_and_update().clone(),
            };
            Persisting {
                sync,
                handshake,
                changes,
                unwritten: Vec::new(),
                meta,
            }
        });
        let fanout = self.store.as_ref().and_then(|store| store.fanout.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    biased;
                    line = lines.recv() => match line {
                        Some(line) => {
                            if let Some(persisting) = &mut shared {
                                // The changes this replica's client made are numbered by the
                                // store, then the other replicas' upstreams are told of them.
                                let numbered = persist(&router, persisting).await;
                                if !numbered.is_empty() {
                                    announce_handshake(fanout.as_deref(), &router.id, &numbered).await;
                                    deliver(&router, Event::Handshake(News::Written(numbered)));
                                }
                            }
                            route(&streams, line).await;
                            if let Some(log) = &log {
                                flush(&streams, &**log, &router.id, bound, ttl).await;
                            }
                            if let Some(inline) = &inline {
                                inline.taken();
                            }
                        }
                        None => {
                            let _ = (&mut run).await;
                            break;
                        }
                    },
                    finished = &mut run => {
                        match finished {
                            Err(err) => tracing::error!(%err, "an HTTP session's loop failed"),
                            Ok(Ended::ClientNotReading(why)) => {
                                if let Ok(mut reason) = router.reason.lock() {
                                    reason.get_or_insert(format!("the client stopped reading: {why}"));
                                }
                            }
                            Ok(Ended::ClientClosed) => {}
                        }
                        break;
                    }
                }
            }
            // What the session wrote before it stopped still goes out; nothing after.
            if let Some(inline) = &inline {
                inline.close();
            }
            while let Ok(line) = lines.try_recv() {
                route(&streams, line).await;
            }
            let reason = router
                .reason
                .lock()
                .ok()
                .and_then(|r| r.clone())
                .unwrap_or_else(|| "the session ended".to_owned());
            if let Ok(mut streams) = streams.lock() {
                streams.end(&reason);
            }
            if let Some(log) = &log {
                flush(&streams, &**log, &router.id, bound, ttl).await;
            }
            router.ended.cancel();
            tracing::debug!(session = %short(&router.id), %reason, "HTTP session ended");
        });
        Ok(handle)
    }

    /// Ends the stateful session `id` (HTTP DELETE) if `identity` started it, here and (with
    /// a shared store) everywhere. Returns whether it was open (and theirs).
    pub(crate) async fn remove(
        &self,
        id: &str,
        identity: &Identity,
        reason: &str,
    ) -> Result<bool, Reject> {
        let principal = identity.principal();
        let removed = self.stateful.lock().ok().and_then(|mut m| {
            if m.get(id)?.principal != principal {
                return None;
            }
            m.remove(id)
        });
        let local = match removed {
            Some(handle) => {
                handle.close(reason);
                true
            }
            None => false,
        };
        let Some(store) = &self.store else {
            return Ok(local);
        };
        if !local {
            // Only its principal may end it; the record says who that is.
            let stored = store
                .backend
                .load(id, self.options.idle_timeout)
                .await
                .map_err(store_reject)?;
            if stored.is_none_or(|s| s.meta.principal != principal) {
                return Ok(false);
            }
        }
        let removed = store
            .backend
            .delete(id, self.options.idle_timeout)
            .await
            .map_err(store_reject)?;
        Ok(local || removed)
    }

    /// Ends every session that has been idle for the idle timeout, and forgets sessions that
    /// ended by themselves.
    pub(crate) fn expire_idle(&self) {
        let now = Instant::now();
        let timeout = self.options.idle_timeout;
        // A replica's copy of a shared session may end sooner: the store keeps the session.
        let stateful_timeout = match (&self.store, self.options.replica_idle_timeout) {
            (Some(_), Some(replica)) => replica.min(timeout),
            _ => timeout,
        };
        let expired = |handle: &Arc<SessionHandle>, timeout: Duration| {
            handle.ended.is_cancelled()
                || (handle.idle_for(now) >= timeout
                    && handle.streams.lock().map_or(true, |s| s.is_idle()))
        };
        let mut gone = Vec::new();
        if let Ok(mut map) = self.stateful.lock() {
            map.retain(|_, handle| {
                let keep = !expired(handle, stateful_timeout);
                if !keep {
                    gone.push(handle.clone());
                }
                keep
            });
        }
        if let Ok(mut map) = self.stateless.lock() {
            map.retain(|_, handle| {
                let keep = !expired(handle, timeout);
                if !keep {
                    gone.push(handle.clone());
                }
                keep
            });
        }
        for handle in gone {
            if !handle.ended.is_cancelled() {
                // A stateless session's copy here is not shortened (it lives in `stateless`).
                let timeout = if handle.sync.is_some() && !handle.id.starts_with("stateless:") {
                    stateful_timeout
                } else {
                    timeout
                };
                tracing::info!(session = %short(&handle.id), idle = ?timeout, "ending an idle HTTP session");
                handle.close(&format!(
                    "the session was idle for {} s and ended",
                    timeout.as_secs()
                ));
            }
        }
    }

    /// How many requests are in flight in every session.
    pub(crate) fn in_flight(&self) -> usize {
        self.all()
            .iter()
            .map(|h| h.streams.lock().map_or(0, |s| s.in_flight()))
            .sum()
    }

    fn all(&self) -> Vec<Arc<SessionHandle>> {
        let mut all: Vec<Arc<SessionHandle>> = self
            .stateful
            .lock()
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default();
        if let Ok(map) = self.stateless.lock() {
            all.extend(map.values().cloned());
        }
        all
    }

    /// Refuses new work from now on (with `reason`).
    pub(crate) fn begin_shutdown(&self, reason: &str) {
        if let Ok(mut closing) = self.closing.lock() {
            closing.get_or_insert_with(|| reason.to_owned());
        }
    }

    /// Ends every session and waits (at most `wait`) until each has stopped its upstream.
    pub(crate) async fn end_all(&self, reason: &str, wait: Duration) {
        let all = self.all();
        if let Ok(mut map) = self.stateful.lock() {
            map.clear();
        }
        if let Ok(mut map) = self.stateless.lock() {
            map.clear();
        }
        for handle in &all {
            handle.close(reason);
        }
        let ended = futures_util::future::join_all(all.iter().map(|h| h.ended.cancelled()));
        if tokio::time::timeout(wait, ended).await.is_err() {
            tracing::warn!("some sessions did not stop within {} s", wait.as_secs());
        }
    }
}

/// What the router of a session kept in a shared store writes for it.
struct Persisting {
    sync: Arc<StateSync>,
    /// The session's whole handshake memory (for a record written whole: a new session, or
    /// one the store lost).
    handshake: tokio::sync::watch::Receiver<HandshakeRecord>,
    /// Each handshake change the client makes through this replica.
    changes: mpsc::UnboundedReceiver<Change>,
    /// Changes taken from `changes` not yet written (the store failed): the next line's.
    unwritten: Vec<Change>,
    meta: SessionMeta,
}

/// Writes what the client is about to be told of (the handshake changes, changed model
/// state) to the shared store first, so that the client's next request finds it on any
/// replica; returns the handshake changes written, with the numbers the store gave them. A
/// store that fails is logged and tried again with the next line; a session ended elsewhere
/// ends.
async fn persist(handle: &SessionHandle, persisting: &mut Persisting) -> Vec<Numbered> {
    {
        // Also what another replica's client changed (taken in without marking the watch
        // changed, `Session::take_handshake`): the meta written is never older than the
        // session's.
        let current = persisting.handshake.borrow_and_update();
        if *current != persisting.meta.handshake {
            persisting.meta.handshake = current.clone();
        }
    }
    while let Ok(change) = persisting.changes.try_recv() {
        persisting.unwritten.push(change);
    }
    match persisting
        .sync
        .flush(&persisting.meta, &mut persisting.unwritten)
        .await
    {
        Ok((Presence::Live, numbered)) => numbered,
        Ok((Presence::Gone, _)) => {
            handle.close("the session was ended on another replica");
            Vec::new()
        }
        Err(err) => {
            tracing::warn!(session = %short(&handle.id), "{err}; the session's changes are written with its next answer");
            Vec::new()
        }
    }
}

/// Hands `event` to `handle`'s session without waiting on a full inbox (the router must not
/// wait on the session, which may be waiting on the router).
fn deliver(handle: &SessionHandle, event: Event) {
    if let Err(mpsc::error::TrySendError::Full(event)) = handle.events.try_send(event) {
        let events = handle.events.clone();
        tokio::spawn(async move {
            let _ = events.send(event).await;
        });
    }
}

/// Tells the other replicas running session `id` of its handshake `changes`, with their
/// numbers (`shared_store::fanout`); a store that fails is logged (their upstreams get them at
/// their next restart, from the stored record).
async fn announce_handshake(fanout: Option<&dyn Fanout>, id: &str, changes: &[Numbered]) {
    let Some(fanout) = fanout else {
        return;
    };
    if let Err(err) = fanout.announce(id, changes).await {
        tracing::warn!(session = %short(id), "{err}; other replicas' upstreams of the session were not told of its new log level or subscriptions");
    }
}

/// The refusal for a shared store that failed: `503`, naming the store.
fn store_reject(err: StoreError) -> Reject {
    Reject::unavailable(format!("Service Unavailable: {err}"))
}

async fn route(streams: &Mutex<Streams>, mut line: crate::transport::queue::Queued) {
    if let Some(tail) = line.take_tail() {
        let (head, belongs) = line.into_record();
        return route_cut_through(streams, head, belongs, tail).await;
    }
    let (line, belongs) = line.into_record();
    if let Ok(mut streams) = streams.lock() {
        streams.route_record(line, belongs);
    }
}

/// Routes a response the core session cuts through (`transport/cut_through.rs`): its head,
/// then each piece as the upstream's reader passes it on, on its request's stream, before
/// anything the session wrote after it. Where it cannot be streamed it is read whole first.
async fn route_cut_through(
    streams: &Mutex<Streams>,
    head: String,
    belongs: Belongs,
    mut tail: Tail,
) {
    let Belongs::Response(id) = belongs else {
        // The session cuts through only responses it knows the request of.
        tracing::debug!("dropped a message cut through without its request");
        return;
    };
    let opened = streams.lock().map_or(Streaming::Gone, |mut streams| {
        streams.open_streamed(&id, &head)
    });
    // Cut short without saying why (the reader went away): the request still gets an answer.
    let cut_short = || {
        jsonrpc::error(
            Some(&id),
            jsonrpc::INTERNAL_ERROR,
            "the upstream's answer was cut short",
        )
    };
    match opened {
        Streaming::Open(mut streamed) => {
            let after = loop {
                match tail.recv().await {
                    Some(TailPiece::Part(text)) => streamed.piece(text),
                    Some(TailPiece::End) => break None,
                    Some(TailPiece::Abort(error)) => break Some(error),
                    None => break Some(cut_short()),
                }
            };
            if let Ok(mut streams) = streams.lock() {
                streams.close_streamed(streamed, after);
            }
        }
        Streaming::Whole => {
            let mut whole = head;
            let line = loop {
                match tail.recv().await {
                    Some(TailPiece::Part(text)) => whole.push_str(&text),
                    Some(TailPiece::End) => break whole,
                    Some(TailPiece::Abort(error)) => break error,
                    None => break cut_short(),
                }
            };
            if let Ok(mut streams) = streams.lock() {
                streams.route_record(line, Belongs::Response(id));
            }
        }
        // Dropping the tail lets the reader skip the rest.
        Streaming::Gone => {}
    }
}

/// The id a stateless session is kept under in a shared store: `stateless:` and 128 bits of
/// the SHA-256 of its owner and client, in hex (a client's name is the client's to choose:
/// the digest keeps the key short and free of separators).
pub(crate) fn stateless_store_id(key: &StatelessKey) -> String {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    context.update(key.owner.as_str().as_bytes());
    context.update(&[0]);
    context.update(key.client.as_bytes());
    let digest = context.finish();
    let hex: String = digest.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("stateless:{hex}")
}

/// 128 random bits as 32 hex digits: visible ASCII, as the spec asks, and unguessable.
fn new_session_id() -> Result<String, Reject> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|err| {
        Reject::unavailable(format!(
            "Service Unavailable: no randomness for a session id: {err}"
        ))
    })?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// How log lines name session `id`: the derived id its hooks and traces show
/// (`crate::session_id::log_id`), never a part of the `Mcp-Session-Id`.
pub(crate) fn short(id: &str) -> String {
    crate::session_id::log_id(id)
}

/// One open HTTP session as an operator sees it (the admin API's `GET /api/sessions`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionSummary {
    /// The `Mcp-Session-Id` (`stateless:CLIENT` for a stateless session).
    pub id: String,
    /// Who started it ([`Identity::principal`]).
    pub principal: String,
    /// The client's name and version from its `initialize` (a stateless client's name from its
    /// `_meta`), when it sent them.
    pub client_name: Option<String>,
    /// See `client_name`.
    pub client_version: Option<String>,
    /// When it started.
    pub started_at: std::time::SystemTime,
    /// When the client last sent it something.
    pub last_activity_at: std::time::SystemTime,
    /// How many requests the client has sent it.
    pub requests: u64,
    /// How many SSE streams its requests hold open (one per request in flight).
    pub open_streams: usize,
    /// Bytes of messages waiting for the client: queued by the session and not yet taken by a
    /// connected stream (a client that does not read makes this grow, up to
    /// [`SessionOptions::client_queue_bytes`](crate::SessionOptions::client_queue_bytes)).
    pub queued_bytes: usize,
}

/// Counts kept per session for [`SessionSummary`]: written by `send`, read by the admin API.
#[derive(Debug)]
struct SessionStats {
    started_at: std::time::SystemTime,
    requests: std::sync::atomic::AtomicU64,
    client: Mutex<Option<(Option<String>, Option<String>)>>,
}

impl Default for SessionStats {
    fn default() -> Self {
        Self {
            started_at: std::time::SystemTime::now(),
            requests: std::sync::atomic::AtomicU64::new(0),
            client: Mutex::new(None),
        }
    }
}

impl SessionStats {
    /// Counts a request, and takes the client's name and version from the first message that
    /// carries them (`initialize`'s `clientInfo`, or a 2026-07-28 request's `_meta`).
    fn saw(&self, line: &str) {
        let Ok(jsonrpc::Message::Request { params, .. }) = jsonrpc::Message::parse(line) else {
            return;
        };
        self.requests.fetch_add(1, Ordering::Relaxed);
        let Ok(mut client) = self.client.lock() else {
            return;
        };
        if client.is_some() {
            return;
        }
        let Some(Ok(params)) = params.map(serde_json::from_str::<serde_json::Value>) else {
            return;
        };
        let info = params.get("clientInfo").or_else(|| {
            params
                .get("_meta")
                .and_then(|m| m.get("io.modelcontextprotocol/clientInfo"))
        });
        if let Some(info) = info {
            let text = |key: &str| info.get(key).and_then(|v| v.as_str()).map(str::to_owned);
            *client = Some((text("name"), text("version")));
        }
    }
}

impl SessionHandle {
    fn summary(&self) -> SessionSummary {
        let now = Instant::now();
        let (client_name, client_version) = self
            .stats
            .client
            .lock()
            .ok()
            .and_then(|c| c.clone())
            .unwrap_or_default();
        SessionSummary {
            id: self.id.to_string(),
            principal: self.principal.clone(),
            client_name,
            client_version,
            started_at: self.stats.started_at,
            last_activity_at: std::time::SystemTime::now() - self.idle_for(now),
            requests: self.stats.requests.load(Ordering::Relaxed),
            open_streams: self.streams.lock().map_or(0, |s| s.in_flight()),
            queued_bytes: self.streams.lock().map_or(0, |s| s.queued_bytes()),
        }
    }
}

impl SessionTable {
    /// Every open session, for the admin API: stateful ones by start time, then stateless ones.
    pub(crate) fn summaries(&self) -> Vec<SessionSummary> {
        let mut all: Vec<SessionSummary> = self
            .all()
            .iter()
            .filter(|h| h.is_open())
            .map(|h| h.summary())
            .collect();
        all.sort_by(|a, b| a.started_at.cmp(&b.started_at).then(a.id.cmp(&b.id)));
        all
    }

    /// Ends the session `id` whoever started it (the admin API's `DELETE /api/sessions/{id}`):
    /// its client's next request gets `404`. Returns whether it was open.
    pub(crate) fn end_as_admin(&self, id: &str, reason: &str) -> bool {
        let stateful = self.stateful.lock().ok().and_then(|mut m| m.remove(id));
        let handle = stateful.or_else(|| {
            let mut map = self.stateless.lock().ok()?;
            let key = map
                .iter()
                .find(|(_, h)| &*h.id == id)
                .map(|(k, _)| k.clone())?;
            map.remove(&key)
        });
        if let Some(store) = self.store.clone() {
            let id = id.to_owned();
            let ttl = self.options.idle_timeout;
            tokio::spawn(async move {
                if let Err(err) = store.backend.delete(&id, ttl).await {
                    tracing::warn!(session = %short(&id), "{err}; the session ends here only");
                }
            });
        }
        match handle {
            Some(handle) if handle.is_open() => {
                handle.close(reason);
                true
            }
            _ => false,
        }
    }
}

/// The open sessions of an [`HttpServer`](super::HttpServer), for an operator: list them, end
/// one. Cheap to clone; from [`HttpServer::sessions`](super::HttpServer::sessions).
///
/// ```no_run
/// use mcp_middleware::{Proxy, http::HttpOptions, upstream::StdioServer};
///
/// # async fn run() -> Result<(), mcp_middleware::ProxyError> {
/// let server = Proxy::new(StdioServer::new("my-server")).serve_http(HttpOptions::default()).await?;
/// let sessions = server.sessions();
/// for session in sessions.list() {
///     println!("{} {}", session.id, session.principal);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Sessions(pub(crate) Arc<SessionTable>);

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions").finish_non_exhaustive()
    }
}

impl Sessions {
    /// How logs, hooks and traces name the session whose `Mcp-Session-Id` is `id`: `http-` and
    /// 24 hex digits of its SHA-256, the same on every replica and not the id itself (the
    /// credential on an unauthenticated front).
    ///
    /// ```
    /// let named = mcp_middleware::http::Sessions::log_id("0123456789abcdef0123456789abcdef");
    /// assert!(named.starts_with("http-") && !named.contains("01234567"));
    /// ```
    pub fn log_id(id: &str) -> String {
        crate::session_id::log_id(id)
    }

    /// Every open session.
    pub fn list(&self) -> Vec<SessionSummary> {
        self.0.summaries()
    }

    /// Ends the session `id` (its upstream stops; its client's next request gets `404`), giving
    /// `reason` to requests still open in it. Returns whether such a session was open.
    pub fn end(&self, id: &str, reason: &str) -> bool {
        self.0.end_as_admin(id, reason)
    }
}

// What a front's new session starts from, with live changes (`crate::live`).
impl SessionFactory {
    /// What a new session of the front starts from: the running generation when the proxy
    /// follows a [`Live`](crate::live::Live) handle, else what the proxy was built with. The
    /// upstream is bound to `caller`.
    pub(crate) fn current(&self, caller: &Caller) -> crate::live::Start {
        let installed = self
            .options
            .live
            .as_ref()
            .map(crate::live::Live::current)
            .filter(|generation| generation.installed.is_some());
        match installed.as_deref().and_then(|g| g.installed.as_ref()) {
            Some(installed) => crate::live::Start {
                server: installed.server.for_caller(caller),
                chain: installed.chain.clone(),
                project: installed.project.clone(),
            },
            None => crate::live::Start {
                server: self.server.for_caller(caller),
                chain: self.chain.clone(),
                project: self.project.clone(),
            },
        }
    }

    /// The session options for a session bound to `caller`.
    pub(crate) fn options_for(&self, caller: &Caller) -> SessionOptions {
        let mut options = self.options.clone();
        options.live = options.live.map(|live| live.for_caller(caller));
        options
    }
}
