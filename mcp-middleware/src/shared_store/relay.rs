//! The ids a replica gives the server-to-client requests it sends on a shared session
//! (sampling, elicitation, roots, ping), so that an answer POSTed to any replica finds the one
//! whose upstream asked.
//!
//! With a shared store the client may answer through another replica than the one holding the
//! request. Each replica has a random [`ReplicaTag`]; a server request's id becomes the string
//! `"mcpm:{tag}:{id}"` (the core session's own id, as raw JSON, after the second colon) on its
//! way to the client, and an answer's id is read back the same way. A replica that receives an
//! answer carrying another tag relays it to that replica (see `events_redis`); one carrying its
//! own tag puts the original id back and hands it to its session. Nothing here is secret: the
//! tag only names a replica.

use std::fmt;

/// A replica of a shared store, as named in event ids and relayed request ids: 32 random
/// bits, never zero (so that a request stream's number, `tag << 32 | n`, is never the
/// standalone stream's `0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ReplicaTag(u32);

impl ReplicaTag {
    /// A fresh tag for this process.
    // Only the Redis backend makes tags; without it only the unit test does.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn random() -> Self {
        let mut bytes = [0u8; 4];
        // Without randomness the process id still tells replicas on one host apart; a
        // collision between hosts only makes two replicas take each other's answers for theirs,
        // which the session id (random, per session) then keeps apart.
        if getrandom::fill(&mut bytes).is_err() {
            bytes = std::process::id().to_be_bytes();
        }
        Self(u32::from_be_bytes(bytes).max(1))
    }

    /// The tag with value `value` (`None` for 0, which names no replica).
    pub(crate) fn new(value: u32) -> Option<Self> {
        (value != 0).then_some(Self(value))
    }

    /// The first number of this replica's request streams: `tag << 32`. Stream numbers are
    /// then unique across the replicas of a session, so `Last-Event-ID` says whose they are.
    pub(crate) fn first_stream(self) -> u64 {
        u64::from(self.0) << 32
    }

    /// The replica whose request stream `stream` is (`None` for the standalone stream and for
    /// streams numbered without a tag).
    pub(crate) fn of_stream(stream: u64) -> Option<Self> {
        Self::new(u32::try_from(stream >> 32).ok()?)
    }
}

impl fmt::Display for ReplicaTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:08x}", self.0)
    }
}

const PREFIX: &str = "mcpm:";

/// The id (raw JSON) the client sees for a server request whose id is `id` (raw JSON) on the
/// replica tagged `tag`.
pub(crate) fn encode(tag: ReplicaTag, id: &str) -> String {
    // A JSON string: the raw id's quotes and backslashes are escaped.
    serde_json::Value::String(tagged(tag, id)).to_string()
}

/// The text of the string [`encode`] makes (unquoted), for ids inside parsed params.
pub(crate) fn tagged(tag: ReplicaTag, id: &str) -> String {
    format!("{PREFIX}{tag}:{id}")
}

/// The replica and original id (raw JSON) of an id made by [`encode`]; `None` for any other
/// id (one the client chose, or an untagged server request's).
pub(crate) fn decode(id: &str) -> Option<(ReplicaTag, String)> {
    if !id.starts_with('"') {
        return None;
    }
    let text: String = serde_json::from_str(id).ok()?;
    let rest = text.strip_prefix(PREFIX)?;
    let (tag, original) = rest.split_once(':')?;
    if tag.len() != 8 {
        return None;
    }
    let tag = ReplicaTag::new(u32::from_str_radix(tag, 16).ok()?)?;
    // The original must itself be a JSON-RPC id: a number or a string.
    match serde_json::from_str::<serde_json::Value>(original).ok()? {
        serde_json::Value::Number(_) | serde_json::Value::String(_) => {
            Some((tag, original.to_owned()))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_naming_their_replica() {
        let tag = ReplicaTag::new(0xdead_beef).unwrap();
        for id in ["7", r#""abc""#, r#""with \"quotes\" and \\""#, "-3"] {
            let encoded = encode(tag, id);
            assert!(encoded.starts_with("\"mcpm:deadbeef:"), "{encoded}");
            assert_eq!(decode(&encoded), Some((tag, id.to_owned())), "{encoded}");
        }
    }

    #[test]
    fn other_ids_are_not_taken_for_relayed_ones() {
        for id in [
            "7",
            r#""7""#,
            r#""mcpm:zz:1""#,
            r#""mcpm:00000000:1""#,
            r#""mcpm:deadbeef:{}""#,
            r#""mcpm:deadbeef""#,
            "null",
        ] {
            assert_eq!(decode(id), None, "{id}");
        }
    }

    #[test]
    fn stream_numbers_name_their_replica() {
        let tag = ReplicaTag::new(5).unwrap();
        let stream = tag.first_stream() + 3;
        assert_eq!(ReplicaTag::of_stream(stream), Some(tag));
        assert_eq!(ReplicaTag::of_stream(0), None);
        assert_eq!(ReplicaTag::of_stream(17), None);
        assert_ne!(ReplicaTag::random().first_stream(), 0);
    }
}
