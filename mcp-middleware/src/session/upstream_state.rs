//! The upstream's state as the session holds it: down (with why), starting (a replayed
//! handshake or the era probe under way, what waits for it held in [`Replay`]), or up; and
//! what the session asks of it whatever its state (send a line, its backlog, where a start
//! reports).

use std::sync::Arc;

use super::Session;
use crate::upstream::{Outlet, Replay, UpstreamLink};

pub(super) enum UpstreamState {
    /// Not running: the next request starts it.
    Down { reason: String },
    /// Restarted, the handshake being replayed, or the era being probed: client messages wait
    /// in `queued` for that answer ([`Replay`], the one restart mechanism, which a `ServerSet`
    /// uses per server).
    Starting {
        link: UpstreamLink,
        queued: Replay<String>,
    },
    /// Running.
    Up(UpstreamLink),
}

impl Session {
    /// Where a start of the upstream sends what it reads: the loop, and the chain's upstream
    /// end for the answers hook tasks await.
    pub(super) fn outlet(&self) -> Outlet {
        Outlet::tapped(
            self.upstream_events.clone(),
            Arc::new(self.upstream_end.clone()),
            self.order.clone(),
        )
    }

    /// How much waits for the upstream to read it, when that is over the limit.
    pub(super) fn upstream_backlog(&self) -> Option<usize> {
        let link = match &self.upstream {
            UpstreamState::Up(link) | UpstreamState::Starting { link, .. } => link,
            UpstreamState::Down { .. } => return None,
        };
        let queued = link.backlog().queued();
        (queued > self.options.upstream_queue_bytes).then_some(queued)
    }

    /// The error for a request refused because the upstream is not reading.
    pub(super) fn backlog_message(&self, method: &str, queued: usize) -> String {
        format!(
            "upstream `{}` is not reading its input: {queued} bytes already wait for it, over \
             the limit of {}; `{method}` was not sent",
            self.server, self.options.upstream_queue_bytes
        )
    }

    pub(super) fn send_upstream(&mut self, line: String) {
        match &mut self.upstream {
            UpstreamState::Up(link) => link.send(line),
            UpstreamState::Starting { link, .. } => link.send(line),
            UpstreamState::Down { .. } => {}
        }
    }
}
