//! Handshake memory: what a client told its upstream that a restarted upstream must be told
//! again (the accepted `initialize`, `notifications/initialized`, the log level, the resource
//! subscriptions), and the one replay built from it.
//!
//! The one restart mechanism (`upstream/replay.rs`) replays it, for the session's upstream
//! (`session/lifecycle.rs`) and for each server of a `ServerSet` (its merger, per slot). It is
//! plain data (serde), so a shared store can keep it beside the session it belongs to.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What the session must replay to a restarted upstream so it is in the state the client
/// believes it is in. Params are kept as the raw JSON text the client sent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Handshake {
    /// The params of the client's `initialize`, once the upstream accepted it (they hold the
    /// client's info and capabilities and the version it asked for).
    pub(crate) initialize: Option<String>,
    /// The params of an `initialize` sent but not yet answered, by upstream id.
    pub(crate) initialize_in_flight: Option<(u64, String)>,
    /// Whether the client sent `notifications/initialized`.
    pub(crate) initialized: bool,
    /// The params of the last `logging/setLevel`.
    pub(crate) log_level: Option<String>,
    /// Resources the client subscribed to.
    pub(crate) subscriptions: BTreeSet<String>,
    /// The protocol version the upstream answered the accepted `initialize` with.
    #[serde(default)]
    pub(crate) protocol_version: Option<String>,
}

/// One message of a replay after the `initialize` was accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// A notification without params.
    Notify(&'static str),
    /// A request whose answer matters only when it is refused (it is logged).
    Request {
        method: &'static str,
        params: String,
    },
}

impl Handshake {
    /// Keeps what a request sent upstream changes of the state a restart replays.
    pub(crate) fn remember(&mut self, method: &str, params: Option<&str>) {
        // One reader of what a request changes, shared with the store's record of it.
        match Change::of_request(method, params) {
            Some(Change::Level { params }) => self.log_level = Some(params),
            Some(Change::Subscribe { uri }) => {
                self.subscriptions.insert(uri);
            }
            Some(Change::Unsubscribe { uri }) => {
                self.subscriptions.remove(&uri);
            }
            Some(Change::Initialized) | None => {}
        }
    }

    /// Keeps what a client notification changes (`notifications/initialized`).
    pub(crate) fn remember_notification(&mut self, method: &str) {
        if method == "notifications/initialized" {
            self.initialized = true;
        }
    }

    /// An `initialize` with `params` went upstream under `uid`.
    pub(crate) fn initialize_sent(&mut self, uid: u64, params: Option<&str>) {
        self.initialize_in_flight = Some((uid, params.unwrap_or("{}").to_owned()));
    }

    /// The upstream answered request `uid`: if it is the `initialize` in flight and was
    /// accepted (`result` is its result), it becomes the one a restart replays; its params are
    /// returned.
    pub(crate) fn initialize_answered(
        &mut self,
        uid: u64,
        outcome: Result<&str, &str>,
    ) -> Option<String> {
        if self
            .initialize_in_flight
            .as_ref()
            .is_none_or(|(sent, _)| *sent != uid)
        {
            return None;
        }
        let (_, params) = self.initialize_in_flight.take()?;
        let result = outcome.ok()?;
        self.protocol_version = serde_json::from_str::<Map<String, Value>>(result)
            .ok()
            .and_then(|r| r.get("protocolVersion")?.as_str().map(str::to_owned));
        self.initialize = Some(params.clone());
        Some(params)
    }

    /// What follows an accepted replayed `initialize`, in order: `notifications/initialized`
    /// (if the client had sent it), the log level, then the subscriptions `subscribed_here`
    /// says belong to this upstream (every one, for a single upstream).
    pub(crate) fn after_initialize(&self, subscribed_here: impl Fn(&str) -> bool) -> Vec<Step> {
        let mut steps = Vec::new();
        if self.initialized {
            steps.push(Step::Notify("notifications/initialized"));
        }
        if let Some(level) = &self.log_level {
            steps.push(Step::Request {
                method: "logging/setLevel",
                params: level.clone(),
            });
        }
        for uri in self.subscriptions.iter().filter(|uri| subscribed_here(uri)) {
            steps.push(Step::Request {
                method: "resources/subscribe",
                params: serde_json::json!({ "uri": uri }).to_string(),
            });
        }
        steps
    }
}

/// One change of a session's handshake memory, as the store keeps it and replicas announce it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Change {
    /// `logging/setLevel` with these params.
    Level { params: String },
    /// `resources/subscribe` of `uri`.
    Subscribe { uri: String },
    /// `resources/unsubscribe` of `uri`.
    Unsubscribe { uri: String },
    /// The client sent `notifications/initialized` (it never becomes false again).
    Initialized,
}

/// What a [`Change`] is about: changes of one concern replace each other, changes of
/// different concerns never do.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Concern {
    Level,
    Subscription(String),
    Initialized,
}

impl Change {
    /// What this change is about.
    pub(crate) fn concern(&self) -> Concern {
        match self {
            Self::Level { .. } => Concern::Level,
            Self::Subscribe { uri } | Self::Unsubscribe { uri } => {
                Concern::Subscription(uri.clone())
            }
            Self::Initialized => Concern::Initialized,
        }
    }

    /// The change a client request sent upstream makes, if it is one the store keeps
    /// (`logging/setLevel`, `resources/subscribe`, `resources/unsubscribe`).
    pub(crate) fn of_request(method: &str, params: Option<&str>) -> Option<Self> {
        #[derive(Deserialize)]
        struct Uri {
            uri: String,
        }
        let uri = || {
            params
                .and_then(|p| serde_json::from_str::<Uri>(p).ok())
                .map(|p| p.uri)
        };
        match method {
            "logging/setLevel" => Some(Self::Level {
                params: params?.to_owned(),
            }),
            "resources/subscribe" => Some(Self::Subscribe { uri: uri()? }),
            "resources/unsubscribe" => Some(Self::Unsubscribe { uri: uri()? }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_remembers_the_log_level_and_subscriptions() {
        let mut handshake = Handshake::default();
        handshake.remember("logging/setLevel", Some(r#"{"level":"debug"}"#));
        handshake.remember("resources/subscribe", Some(r#"{"uri":"a://1"}"#));
        handshake.remember("resources/subscribe", Some(r#"{"uri":"a://2"}"#));
        handshake.remember("resources/unsubscribe", Some(r#"{"uri":"a://1"}"#));
        handshake.remember("resources/subscribe", Some("not json"));
        handshake.remember("tools/call", Some(r#"{"name":"x"}"#));
        assert_eq!(handshake.log_level.as_deref(), Some(r#"{"level":"debug"}"#));
        assert_eq!(
            handshake.subscriptions.iter().collect::<Vec<_>>(),
            ["a://2"]
        );
    }

    #[test]
    fn only_an_accepted_initialize_is_replayed() {
        let mut handshake = Handshake::default();
        handshake.initialize_sent(3, Some(r#"{"protocolVersion":"2025-11-25"}"#));
        assert_eq!(handshake.initialize_answered(2, Ok("{}")), None);
        assert_eq!(handshake.initialize_answered(3, Err("{}")), None);
        assert_eq!(handshake.initialize, None);
        handshake.initialize_sent(4, None);
        assert_eq!(
            handshake.initialize_answered(4, Ok(r#"{"protocolVersion":"2025-06-18"}"#)),
            Some("{}".to_owned())
        );
        assert_eq!(handshake.initialize.as_deref(), Some("{}"));
        assert_eq!(handshake.protocol_version.as_deref(), Some("2025-06-18"));
        assert_eq!(handshake.initialize_in_flight, None);
    }

    #[test]
    fn the_replay_follows_the_initialize_in_order() {
        let mut handshake = Handshake::default();
        assert!(handshake.after_initialize(|_| true).is_empty());
        handshake.remember_notification("notifications/initialized");
        handshake.remember("logging/setLevel", Some(r#"{"level":"info"}"#));
        handshake.remember("resources/subscribe", Some(r#"{"uri":"b://x"}"#));
        handshake.remember("resources/subscribe", Some(r#"{"uri":"a://y"}"#));
        let steps = handshake.after_initialize(|_| true);
        assert_eq!(
            steps,
            vec![
                Step::Notify("notifications/initialized"),
                Step::Request {
                    method: "logging/setLevel",
                    params: r#"{"level":"info"}"#.to_owned()
                },
                Step::Request {
                    method: "resources/subscribe",
                    params: r#"{"uri":"a://y"}"#.to_owned()
                },
                Step::Request {
                    method: "resources/subscribe",
                    params: r#"{"uri":"b://x"}"#.to_owned()
                },
            ]
        );
        // A server of a set gets only its own subscriptions.
        let only_b = handshake.after_initialize(|uri| uri.starts_with("b:"));
        assert_eq!(only_b.len(), 3);
    }

    #[test]
    fn it_is_plain_data_a_store_can_keep() {
        let mut handshake = Handshake::default();
        handshake.initialize_sent(1, Some(r#"{"clientInfo":{"name":"c","version":"1"}}"#));
        handshake.initialize_answered(1, Ok(r#"{"protocolVersion":"2025-11-25"}"#));
        handshake.remember_notification("notifications/initialized");
        handshake.remember("resources/subscribe", Some(r#"{"uri":"a://1"}"#));
        let stored = serde_json::to_string(&handshake).unwrap();
        let back: Handshake = serde_json::from_str(&stored).unwrap();
        assert_eq!(back, handshake);
    }
}
