//! [`Replay`]: the one restart mechanism, for every connection that is started again: a
//! session's upstream, and each server slot of a [`ServerSet`](super::ServerSet).
//!
//! A connection started again after the client's handshake is sent the client's accepted
//! `initialize` first ([`Replay::restart`]). Until it is answered, everything else for that
//! connection waits in order ([`Replay::hold`]): a server must see its handshake before
//! anything else, and one that refuses it must not be sent the rest. Its answer releases the
//! rest of the handshake ([`Handshake::after_initialize`]: `notifications/initialized`, the
//! log level, the subscriptions) and then what was held, in the order it came
//! ([`Replay::answered`]). What is held is anything the caller must send after the answer (a
//! session holds the client's lines and its hooks' requests in one queue), so the order in
//! which they came is the order they go. The same gate holds messages while the session waits for another
//! answer of its own (the era probe, [`Replay::until`]).
//!
//! What is remembered ([`Handshake`]) is plain data a shared store keeps; a `Replay` lives only
//! while a start is under way and is rebuilt from the handshake on any replica.

use crate::exchange::{Handshake, Step};
use crate::jsonrpc;

/// What a connection being started holds until an answer it waits for (cloning copies it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Replay<T> {
    /// The id of the request whose answer releases what is held.
    awaited: u64,
    /// Whether that request is a replayed `initialize` (the rest of the handshake follows it).
    handshake: bool,
    held: Vec<T>,
}

/// What the answer to the awaited request lets through, in order.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Released<T> {
    /// The rest of the handshake, for a replayed `initialize` that was accepted.
    pub(crate) steps: Vec<Step>,
    /// What was held.
    pub(crate) held: Vec<T>,
}

impl<T> Replay<T> {
    /// A connection starts again: when the client had completed an `initialize`, the request
    /// to send first (under `id`) and the replay that waits for its answer.
    pub(crate) fn restart(handshake: &Handshake, id: u64) -> Option<(String, Self)> {
        let params = handshake.initialize.as_deref()?;
        let line = jsonrpc::request(itoa::Buffer::new().format(id), "initialize", Some(params));
        Some((
            line,
            Self {
                awaited: id,
                handshake: true,
                held: Vec::new(),
            },
        ))
    }

    /// The replay of an `initialize` the caller already sent under `id` (a session restored
    /// from a shared store).
    pub(crate) fn replaying(id: u64) -> Self {
        Self {
            awaited: id,
            handshake: true,
            held: Vec::new(),
        }
    }

    /// Holds what comes until request `id` (the caller's own) is answered.
    pub(crate) fn until(id: u64) -> Self {
        Self {
            awaited: id,
            handshake: false,
            held: Vec::new(),
        }
    }

    /// Holds `message` until the awaited answer, behind what is already held.
    pub(crate) fn hold(&mut self, message: impl Into<T>) {
        self.held.push(message.into());
    }

    /// Drops what is held and no longer wanted (`keep` is false for it: a request cancelled
    /// while it waited); the rest keeps its order.
    pub(crate) fn retain(&mut self, keep: impl FnMut(&T) -> bool) {
        self.held.retain(keep);
    }

    /// Whether `id` is the request this replay waits for.
    pub(crate) fn awaits(&self, id: u64) -> bool {
        self.awaited == id
    }

    /// The awaited request was answered (`accepted` when it succeeded): what may go now. A
    /// refused `initialize` releases no handshake steps; what was held is given back either
    /// way, for the caller to send or to fail. `subscribed_here` picks the subscriptions this
    /// connection serves (a set's server: the resources it listed).
    pub(crate) fn answered(
        self,
        handshake: &Handshake,
        accepted: bool,
        subscribed_here: impl Fn(&str) -> bool,
    ) -> Released<T> {
        let steps = if self.handshake && accepted {
            handshake.after_initialize(subscribed_here)
        } else {
            Vec::new()
        };
        Released {
            steps,
            held: self.held,
        }
    }

    /// The connection went away before the answer: what was held, to fail.
    pub(crate) fn abandon(self) -> Vec<T> {
        self.held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handshake() -> Handshake {
        let mut handshake = Handshake::default();
        handshake.initialize_sent(1, Some(r#"{"protocolVersion":"2025-11-25"}"#));
        assert!(
            handshake
                .initialize_answered(1, Ok(r#"{"protocolVersion":"2025-11-25"}"#))
                .is_some()
        );
        handshake.remember_notification("notifications/initialized");
        handshake.remember("logging/setLevel", Some(r#"{"level":"debug"}"#));
        handshake.remember("resources/subscribe", Some(r#"{"uri":"a://1"}"#));
        handshake.remember("resources/subscribe", Some(r#"{"uri":"b://2"}"#));
        handshake
    }

    #[test]
    fn nothing_is_replayed_before_the_client_initialized() {
        assert!(Replay::<String>::restart(&Handshake::default(), 7).is_none());
    }

    #[test]
    fn a_restart_sends_the_initialize_first_and_holds_the_rest_until_it_is_answered() {
        let handshake = handshake();
        let (line, mut replay) = Replay::<&str>::restart(&handshake, 7).unwrap();
        assert_eq!(
            line,
            r#"{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#
        );
        replay.hold("first");
        replay.hold("second");
        assert!(replay.awaits(7) && !replay.awaits(8));
        let released = replay.answered(&handshake, true, |uri| uri == "a://1");
        assert_eq!(released.held, ["first", "second"], "in the order they came");
        let methods: Vec<&str> = released
            .steps
            .iter()
            .map(|step| match step {
                Step::Notify(method) => *method,
                Step::Request { method, .. } => method,
            })
            .collect();
        assert_eq!(
            methods,
            [
                "notifications/initialized",
                "logging/setLevel",
                "resources/subscribe"
            ],
            "only the subscription this connection serves"
        );
    }

    #[test]
    fn a_refused_replay_releases_no_handshake_and_gives_the_held_back() {
        let handshake = handshake();
        let (_, mut replay) = Replay::<i32>::restart(&handshake, 3).unwrap();
        replay.hold(1);
        let released = replay.answered(&handshake, false, |_| true);
        assert!(released.steps.is_empty());
        assert_eq!(released.held, [1]);
    }

    #[test]
    fn a_gate_of_the_callers_own_releases_only_what_it_held() {
        let handshake = handshake();
        let mut probe = Replay::<&str>::until(9);
        probe.hold("request");
        let released = probe.answered(&handshake, true, |_| true);
        assert!(released.steps.is_empty(), "a probe replays nothing");
        assert_eq!(released.held, ["request"]);

        let (_, mut gone) = Replay::<&str>::restart(&handshake, 4).unwrap();
        gone.hold("lost");
        assert_eq!(gone.abandon(), ["lost"]);
    }

    /// What a session holds: the client's lines and its hooks' requests, in one queue.
    #[derive(Debug, PartialEq, Eq)]
    enum Kind {
        Raw(&'static str),
        Hooked(u64),
    }

    impl From<&'static str> for Kind {
        fn from(line: &'static str) -> Self {
            Kind::Raw(line)
        }
    }

    #[test]
    fn raw_and_hooked_requests_held_together_go_in_the_order_they_came() {
        let handshake = handshake();
        let (_, mut replay) = Replay::<Kind>::restart(&handshake, 5).unwrap();
        replay.hold(Kind::Hooked(10));
        replay.hold("raw one");
        replay.hold(Kind::Hooked(11));
        replay.hold("raw two");
        let released = replay.answered(&handshake, true, |_| true);
        assert!(!released.steps.is_empty(), "the handshake goes first");
        assert_eq!(
            released.held,
            [
                Kind::Hooked(10),
                Kind::Raw("raw one"),
                Kind::Hooked(11),
                Kind::Raw("raw two")
            ]
        );
    }

    #[test]
    fn what_is_withdrawn_while_held_is_not_released_and_the_rest_keeps_its_order() {
        let handshake = handshake();
        let (_, mut replay) = Replay::<Kind>::restart(&handshake, 5).unwrap();
        replay.hold("a");
        replay.hold(Kind::Hooked(1));
        replay.hold("b");
        replay.hold(Kind::Hooked(2));
        replay.retain(|held| *held != Kind::Hooked(1));
        assert_eq!(
            replay.abandon(),
            [Kind::Raw("a"), Kind::Raw("b"), Kind::Hooked(2)]
        );
    }
}
