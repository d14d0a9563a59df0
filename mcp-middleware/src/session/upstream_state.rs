//! The upstream's state as the session holds it: down (with why), starting (a replayed
//! handshake or the era probe under way, what waits for it held in [`Replay`]), or up; and
//! what the session asks of it whatever its state (send a line, its backlog, where a start
//! reports).
//!
//! Everything that waits for a restarted or probed upstream waits in the one [`Replay`] of
//! [`UpstreamState::Starting`], raw client messages and hooks' requests alike ([`Held`]), so
//! what came first goes first once the replayed handshake is answered.

use std::sync::Arc;

use super::Session;
use crate::context::LoopCall;
use crate::jsonrpc::{self, Message};
use crate::upstream::{Outlet, Replay, UpstreamLink};

/// What waits for a starting upstream, in the order it came.
#[derive(Debug)]
pub(super) enum Held {
    /// A line from the client (or one a hook relays as the client's), as it came.
    Line(String),
    /// A hook's request for the upstream ([`LoopCall::Upstream`]), served by the loop once the
    /// upstream is ready.
    Hook(LoopCall),
}

impl From<String> for Held {
    fn from(line: String) -> Self {
        Held::Line(line)
    }
}

impl Held {
    /// Whether this is the hook request sent under upstream id `uid`.
    pub(super) fn is_hook_request(&self, uid: u64) -> bool {
        matches!(self, Held::Hook(LoopCall::Upstream { uid: held, .. }) if *held == uid)
    }

    /// Fails what was held because the upstream could not be made ready (`reason`): a request
    /// gets an error under its id, a hook's request an error for its hook; a notification or
    /// response is dropped. Returns the line for the client, if any.
    pub(super) fn fail(self, reason: &str) -> Option<String> {
        match self {
            Held::Line(line) => match Message::parse(&line) {
                Ok(Message::Request { id, method, .. }) => Some(jsonrpc::error(
                    Some(id),
                    jsonrpc::UPSTREAM_UNAVAILABLE,
                    &format!("upstream unavailable for `{method}`: {reason}"),
                )),
                _ => None,
            },
            Held::Hook(LoopCall::Upstream { method, reply, .. }) => {
                let _ = reply.send(Err(super::hooked::unavailable(&method, reason)));
                None
            }
            Held::Hook(_) => None,
        }
    }
}

pub(super) enum UpstreamState {
    /// Not running: the next request starts it.
    Down { reason: String },
    /// Restarted, the handshake being replayed, or the era being probed: client messages and
    /// hooks' requests wait in `queued` for that answer ([`Replay`], the one restart mechanism, which a `ServerSet`
    /// uses per server).
    Starting {
        link: UpstreamLink,
        queued: Replay<Held>,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn hook_request(
        uid: u64,
    ) -> (
        Held,
        tokio::sync::oneshot::Receiver<crate::context::RawOutcome>,
    ) {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let call = LoopCall::Upstream {
            uid,
            call: 1,
            method: "tools/call".to_owned(),
            params: None,
            reply,
        };
        (Held::Hook(call), answer)
    }

    #[test]
    fn a_held_hook_request_is_found_by_its_upstream_id() {
        let (held, _answer) = hook_request(7);
        assert!(held.is_hook_request(7));
        assert!(!held.is_hook_request(8));
        assert!(!Held::from("7".to_owned()).is_hook_request(7));
    }

    #[test]
    fn what_was_held_fails_each_the_way_it_came() {
        let request = Held::from(r#"{"jsonrpc":"2.0","id":"a","method":"tools/list"}"#.to_owned());
        let line = request.fail("it died").expect("a request is answered");
        assert!(line.contains(r#""id":"a""#), "{line}");
        assert!(
            line.contains("upstream unavailable for `tools/list`: it died"),
            "{line}"
        );

        let notification =
            Held::from(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned());
        assert!(notification.fail("it died").is_none(), "nobody to answer");

        let (hooked, mut answer) = hook_request(3);
        assert!(
            hooked.fail("it died").is_none(),
            "the hook is answered, not the client"
        );
        let error = answer.try_recv().expect("answered").expect_err("an error");
        assert_eq!(error.code.0, jsonrpc::UPSTREAM_UNAVAILABLE as i32);
        assert!(
            error.message.contains("`tools/call`: it died"),
            "{}",
            error.message
        );
    }
}
