//! The upstream's life: starting it again after it died, replaying the client's handshake and
//! session state to the new process, holding client messages meanwhile, and failing what was
//! pending when it dies.

use super::bridge::ClientEra;
use super::upstream_state::Held;
use super::{Pending, ProxyRequest, Session, UpstreamState};
use crate::exchange::Step;
use crate::jsonrpc;
use crate::upstream::Replay;

impl Session {
    /// Makes sure an upstream is running, starting it if it is down. On failure the client gets
    /// an error for `id` and `false` is returned.
    pub(super) fn ensure_upstream(&mut self, id: Option<&str>, method: &str) -> bool {
        let UpstreamState::Down { reason } = &self.upstream else {
            return true;
        };
        tracing::info!(%reason, "restarting the upstream for `{method}`");
        self.generation += 1;
        let link = match self.server.spawn(
            self.generation,
            self.options.max_message_bytes,
            self.outlet(),
        ) {
            Ok(link) => link,
            Err(err) => {
                if let Some(id) = id {
                    self.to_client(jsonrpc::error(
                        Some(id),
                        jsonrpc::UPSTREAM_UNAVAILABLE,
                        &format!("upstream unavailable for `{method}`: {err}"),
                    ));
                }
                self.upstream = UpstreamState::Down {
                    reason: err.to_string(),
                };
                return false;
            }
        };
        // The one restart mechanism (`upstream/replay.rs`, a `ServerSet` uses it per server):
        // the client's `initialize` first, and client messages wait for its answer.
        let uid = self.next_upstream_id();
        match Replay::restart(&self.handshake, uid) {
            Some((line, replay)) => {
                self.pending
                    .insert(uid, Pending::Proxy(ProxyRequest::ReplayInitialize));
                link.send(line);
                self.upstream = UpstreamState::Starting {
                    link,
                    queued: replay,
                };
            }
            None => self.upstream = UpstreamState::Up(link),
        }
        true
    }

    /// Holds client messages, starting with `line`, until the upstream answers the proxy's
    /// request `uid` (the era probe).
    pub(super) fn hold_client(&mut self, uid: u64, line: String) {
        self.upstream = match std::mem::replace(
            &mut self.upstream,
            UpstreamState::Down {
                reason: String::new(),
            },
        ) {
            UpstreamState::Up(link) => {
                let mut queued = Replay::until(uid);
                queued.hold(Held::Line(line));
                UpstreamState::Starting { link, queued }
            }
            UpstreamState::Starting { link, mut queued } => {
                queued.hold(Held::Line(line));
                UpstreamState::Starting { link, queued }
            }
            down @ UpstreamState::Down { .. } => down,
        };
    }

    /// The upstream is ready: a restarted one is told what the client had told the previous one
    /// (`notifications/initialized`, the log level, the resource subscriptions), then the held
    /// client messages go through in order.
    pub(super) fn release_held(&mut self) {
        let UpstreamState::Starting { link, queued } = std::mem::replace(
            &mut self.upstream,
            UpstreamState::Down {
                reason: String::new(),
            },
        ) else {
            return;
        };
        let released = queued.answered(&self.handshake, true, |_| true);
        self.upstream = UpstreamState::Up(link);
        for step in released.steps {
            match step {
                Step::Notify(method) => self.send_upstream(jsonrpc::notification(method, None)),
                Step::Request { method, params } => self.send_proxy_request(method, &params),
            }
        }
        // In the order they came; one that starts another wait (the era probe) holds the
        // rest behind it again.
        for held in released.held {
            match held {
                Held::Line(line) => self.on_client_line(line),
                Held::Hook(call) => self.on_loop_call(call),
            }
        }
    }

    /// The upstream could not be made ready: fail the held requests with `reason`.
    pub(super) fn give_up_start(&mut self, reason: String) {
        tracing::warn!("{reason}");
        let queued = self.mark_down(&reason);
        self.era = ClientEra::Unknown;
        self.fail_queued(queued, &reason);
    }

    /// Marks the upstream down (dropping its link kills it) and returns what was held for it
    /// (client messages and hooks' requests).
    fn mark_down(&mut self, reason: &str) -> Vec<Held> {
        for (_, waiter) in self.stop_direct() {
            let _ = waiter.reply.send(Err(rmcp::model::ErrorData::new(
                rmcp::model::ErrorCode(jsonrpc::UPSTREAM_UNAVAILABLE as i32),
                format!(
                    "{reason} before answering `{}`; the next request starts it again",
                    waiter.method
                ),
                None,
            )));
        }
        let down = UpstreamState::Down {
            reason: reason.to_owned(),
        };
        match std::mem::replace(&mut self.upstream, down) {
            UpstreamState::Starting { queued, .. } => queued.abandon(),
            _ => Vec::new(),
        }
    }

    /// Fails what was held for an upstream that could not be made ready (`reason`).
    pub(super) fn fail_queued(&mut self, queued: Vec<Held>, reason: &str) {
        for held in queued {
            if let Some(line) = held.fail(reason) {
                self.to_client(line);
            }
        }
    }

    pub(super) fn on_upstream_closed(&mut self, how: &str) {
        let reason = format!("upstream `{}` {how}", self.server);
        tracing::warn!("{reason}");
        let queued = self.mark_down(&reason);
        self.fail_queued(queued, &reason);
        let failed = self.pending.drain();
        for (uid, pending) in failed {
            match pending {
                Pending::Client { id, method, .. } => {
                    let message = format!(
                        "{reason} before answering `{method}`; the next request starts it again"
                    );
                    self.to_client(jsonrpc::error(
                        Some(&id),
                        jsonrpc::UPSTREAM_UNAVAILABLE,
                        &message,
                    ));
                    self.observe_end(uid, crate::model::Outcome::Error, Some(message));
                }
                Pending::Hook { method, reply, .. } => {
                    let _ = reply.send(Err(rmcp::model::ErrorData::new(
                        rmcp::model::ErrorCode(jsonrpc::UPSTREAM_UNAVAILABLE as i32),
                        format!(
                            "{reason} before answering `{method}`; the next request starts it again"
                        ),
                        None,
                    )));
                }
                // A suspended call's client learns on its retry that the round is gone.
                Pending::Proxy(_) | Pending::Suspended { .. } => {}
            }
        }
        // Requests a hook sent the client do not depend on the upstream.
        self.upstream_requests
            .retain(|_, request| request.hook.is_some());
        if let ClientEra::Bridged(bridged) = &mut self.era {
            bridged.clear_requests();
        }
    }

    /// The answer to a request the proxy sent on its own behalf.
    pub(super) fn on_proxy_response(&mut self, purpose: ProxyRequest, outcome: Result<&str, &str>) {
        match purpose {
            ProxyRequest::ReplayInitialize => match outcome {
                Ok(_) => self.release_held(),
                Err(error) => self.give_up_start(format!(
                    "the restarted upstream rejected the replayed initialize: {}",
                    error
                )),
            },
            ProxyRequest::SetState => {
                if let Err(error) = outcome {
                    tracing::warn!(
                        error = error,
                        "the upstream refused session state the proxy set"
                    );
                }
            }
            ProxyRequest::Probe { request_params } => {
                self.on_probe_answer(&request_params, outcome)
            }
            ProxyRequest::BridgeInitialize { params } => {
                self.on_bridge_initialized(params, outcome)
            }
        }
    }

    /// Sends the upstream a request whose answer only matters if it fails (it is logged).
    pub(super) fn send_proxy_request(&mut self, method: &str, params: &str) {
        let uid = self.next_upstream_id();
        self.pending
            .insert(uid, Pending::Proxy(ProxyRequest::SetState));
        self.send_upstream(jsonrpc::request(
            itoa::Buffer::new().format(uid),
            method,
            Some(params),
        ));
    }
}
