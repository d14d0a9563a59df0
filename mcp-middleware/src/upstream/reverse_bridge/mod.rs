//! The reverse era bridge: an adapter between a session and one upstream connection that makes
//! a 2026-07-28-only server look like a 2025-11-25 one.
//!
//! Every stdio and HTTP upstream is connected through [`connect`], per server (so each server
//! of a [`super::ServerSet`] is probed on its own) and per start (a restarted server is probed
//! again). The session above keeps talking the handshake era it negotiated with its client; the
//! translation lives here, on the upstream side, in [`translate::Bridge`].
//!
//! How the era is found (the "probe `server/discover`, fall back to `initialize`", in the
//! order that keeps a dual-era server transparent): a 2025 client's `initialize` goes to the
//! server as it is. A server that answers it is a handshake server and nothing is translated.
//! One that refuses it as a 2026-07-28 server does (`-32022`, or method not found) is probed
//! with `server/discover`; if that offers 2026-07-28 the connection is bridged from then on. A
//! dual-era stdio server decides its era on its first request, so probing it with
//! `server/discover` first would lock it into 2026-07-28 and make every 2025 client bridged
//! instead of served natively. A 2026-07-28 client's requests pass through untouched (the
//! session's forward bridge handles a handshake-only server); the adapter only notes what the
//! server answered to record its era.

mod translate;

use std::time::Duration;

use tokio::sync::mpsc;

use super::era_probe::EraRecord;
use super::{Outlet, ReaderOut, UpstreamEvent, UpstreamLink};
use crate::error::UpstreamError;
use crate::transport::queue::LineQueue;
use translate::{Bridge, Out};

/// How long a closing connection's server gets to exit after the session let go of it.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Connects one upstream through the era adapter: `spawn` starts the real connection with the
/// adapter's event channel; the returned link is what the session writes to.
pub(crate) fn connect(
    name: String,
    record: Option<EraRecord>,
    generation: u64,
    events: Outlet,
    spawn: impl FnOnce(ReaderOut) -> Result<UpstreamLink, UpstreamError>,
) -> Result<UpstreamLink, UpstreamError> {
    let (tx, mut from_upstream) = mpsc::channel::<UpstreamEvent>(64);
    let (reader_out, step_out) = ReaderOut::new(tx);
    let inner = spawn(reader_out)?;
    // The session sees the backlog of the server's own queue (it refuses requests when the
    // server stops reading), not of this adapter's, which it empties at once.
    let (outgoing, mut from_session, handover) =
        LineQueue::sharing_with_handover(inner.queue().gauge().clone());
    // The server's reader cuts answers through only while nothing here translates them.
    let cut = inner.cut_through().cloned();
    let outer_cut = cut.clone();
    let task = tokio::spawn(async move {
        let up = inner.queue();
        let mut bridge = Bridge::new(name, record);
        let mut handover = Some(handover);
        loop {
            if let Some(cut) = &cut {
                cut.set_open(bridge.is_transparent());
            }
            // Transparent with nothing to watch is for good (the session's lines are no longer
            // looked at): the session's lines then go to the server's queue without a hop
            // through this task.
            if bridge.is_transparent()
                && let Some(handover) = &handover
                && !handover.is_complete()
            {
                handover.complete(&mut from_session, &up);
                // And the server's reader sends to the session itself.
                if !step_out.complete(&mut from_upstream, &events).await {
                    return;
                }
            }
            tokio::select! {
                queued = from_session.recv() => {
                    let Some(queued) = queued else {
                        // Our clones of the server's queue go first (the handover holds one):
                        // while they live the server's input stays open and it never sees its
                        // end.
                        drop(handover.take());
                        drop(up);
                        inner.shut_down(SHUTDOWN_GRACE).await;
                        return;
                    };
                    let (line, belongs) = queued.into_record();
                    if bridge.is_transparent() {
                        let _ = up.send_record(line, belongs);
                        continue;
                    }
                    for out in bridge.on_session_line(line, belongs) {
                        if !deliver(out, &up, &events, generation).await {
                            return;
                        }
                    }
                }
                event = from_upstream.recv() => {
                    let (line, request) = match event {
                        Some(UpstreamEvent::Line { line, .. }) => {
                            (line, None)
                        }
                        Some(UpstreamEvent::LineFor { line, request, .. }) => {
                            (line, Some(request))
                        }
                        Some(other) => {
                            if !events.send(other).await {
                                return;
                            }
                            continue;
                        }
                        None => return,
                    };
                    if bridge.is_transparent() {
                        let event = match request {
                            Some(request) => UpstreamEvent::LineFor { generation, line, request },
                            None => UpstreamEvent::Line { generation, line },
                        };
                        if !events.send(event).await {
                            return;
                        }
                        continue;
                    }
                    for out in bridge.on_upstream_line(line, request) {
                        if !deliver(out, &up, &events, generation).await {
                            return;
                        }
                    }
                }
            }
        }
    });
    let link = UpstreamLink::new(outgoing, task);
    Ok(match outer_cut {
        Some(cut) => link.with_cut_through(cut),
        None => link,
    })
}

/// Sends one translated message on its way; false when the session is gone.
async fn deliver(out: Out, up: &LineQueue, events: &Outlet, generation: u64) -> bool {
    match out {
        Out::Up(line, belongs) => {
            // A closed queue means the server is gone; its reader reports that.
            let _ = up.send_record(line, belongs);
            true
        }
        Out::Down(line, None) => events.send(UpstreamEvent::Line { generation, line }).await,
        Out::Down(line, Some(request)) => {
            events
                .send(UpstreamEvent::LineFor {
                    generation,
                    line,
                    request,
                })
                .await
        }
    }
}
