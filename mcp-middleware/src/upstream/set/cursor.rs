//! The cursors of a [`ServerSet`](super::ServerSet)'s merged lists: where the next page starts
//! (which server, and that server's own cursor, if any), sealed so that a client can only hand
//! back a cursor the proxy gave it.
//!
//! A cursor is `base64url(tag ‖ payload)`, the payload the JSON object `{"s": INDEX, "c":
//! CURSOR or null}` (the server's place in the set: names need not be unique) and the tag an HMAC-SHA256 (ring) over the list method and the payload, under
//! a key drawn for each running set (one per session). Without the key a client cannot make the
//! proxy send a cursor of its choosing to a server of its choosing: a cursor it made up, changed,
//! took from another list method or from another session is refused.

use std::borrow::Cow;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::hmac;
use serde::{Deserialize, Serialize};

/// How many characters of a refused cursor an error message shows.
const SHOWN: usize = 48;

/// The key cursors are sealed with; every running set draws its own.
pub(super) struct CursorKey(hmac::Key);

/// Where a merged list goes on: the server (its index in the set) and the cursor to send it
/// (none: its first page).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Position<'a> {
    #[serde(rename = "s")]
    pub(super) server: usize,
    #[serde(rename = "c", borrow)]
    pub(super) cursor: Option<Cow<'a, str>>,
}

/// Why a cursor the client sent was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(super) enum CursorError {
    /// Not base64url, too short or not the payload the proxy writes.
    #[error("invalid cursor `{0}` for {1}: it is not a cursor this proxy hands out")]
    Malformed(String, String),
    /// Well formed, but the seal does not match.
    #[error(
        "invalid cursor `{0}` for {1}: its seal does not match (a cursor is only good for the list and the session it came from)"
    )]
    Forged(String, String),
}

impl CursorKey {
    /// A fresh random key.
    pub(super) fn generate() -> Result<Self, ring::error::Unspecified> {
        hmac::Key::generate(hmac::HMAC_SHA256, &ring::rand::SystemRandom::new()).map(Self)
    }

    /// The cursor that resumes `method` at `position`.
    pub(super) fn seal(&self, method: &str, position: &Position<'_>) -> String {
        // Serialising two strings cannot fail; the fallback is never used.
        let payload = serde_json::to_vec(position).unwrap_or_default();
        let tag = hmac::sign(&self.0, &signed(method, &payload));
        let mut sealed = tag.as_ref().to_vec();
        sealed.extend_from_slice(&payload);
        URL_SAFE_NO_PAD.encode(sealed)
    }

    /// The position a cursor of `method` stands for, if this key sealed it for `method`.
    pub(super) fn open(
        &self,
        method: &str,
        cursor: &str,
    ) -> Result<Position<'static>, CursorError> {
        let malformed = || CursorError::Malformed(shown(cursor), method.to_owned());
        let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| malformed())?;
        let tag_len = hmac::HMAC_SHA256.digest_algorithm().output_len();
        if bytes.len() <= tag_len {
            return Err(malformed());
        }
        let (tag, payload) = bytes.split_at(tag_len);
        hmac::verify(&self.0, &signed(method, payload), tag)
            .map_err(|_| CursorError::Forged(shown(cursor), method.to_owned()))?;
        let position: Position<'_> = serde_json::from_slice(payload).map_err(|_| malformed())?;
        Ok(Position {
            server: position.server,
            cursor: position.cursor.map(|c| Cow::Owned(c.into_owned())),
        })
    }
}

/// What the tag covers: the method, a NUL (no method name has one), the payload.
fn signed(method: &str, payload: &[u8]) -> Vec<u8> {
    let mut signed = Vec::with_capacity(method.len() + 1 + payload.len());
    signed.extend_from_slice(method.as_bytes());
    signed.push(0);
    signed.extend_from_slice(payload);
    signed
}

/// A refused cursor as an error message shows it: its start, so a long one does not flood logs.
fn shown(cursor: &str) -> String {
    match cursor.char_indices().nth(SHOWN) {
        Some((end, _)) => format!("{}…", &cursor[..end]),
        None => cursor.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(server: usize, cursor: Option<&str>) -> Position<'_> {
        Position {
            server,
            cursor: cursor.map(Cow::Borrowed),
        }
    }

    #[test]
    fn a_sealed_cursor_opens_to_its_position() {
        let key = CursorKey::generate().unwrap();
        for position in [at(0, None), at(1, Some("page 2 \u{e9}\"")), at(7, Some(""))] {
            let cursor = key.seal("tools/list", &position);
            assert!(
                cursor
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            );
            assert_eq!(key.open("tools/list", &cursor), Ok(position.clone()));
        }
    }

    #[test]
    fn another_method_or_key_or_a_changed_byte_is_forged() {
        let key = CursorKey::generate().unwrap();
        let cursor = key.seal("tools/list", &at(0, Some("2")));
        assert!(matches!(
            key.open("prompts/list", &cursor),
            Err(CursorError::Forged(..))
        ));
        let other = CursorKey::generate().unwrap();
        assert!(matches!(
            other.open("tools/list", &cursor),
            Err(CursorError::Forged(..))
        ));
        let mut bytes = URL_SAFE_NO_PAD.decode(&cursor).unwrap();
        let last = bytes.len() - 2;
        bytes[last] ^= 1;
        let changed = URL_SAFE_NO_PAD.encode(bytes);
        assert!(matches!(
            key.open("tools/list", &changed),
            Err(CursorError::Forged(..))
        ));
    }

    #[test]
    fn what_is_not_a_cursor_is_malformed_and_named() {
        let key = CursorKey::generate().unwrap();
        for text in ["", "not base64!", "c2hvcnQ", "{\"s\":0,\"c\":null}"] {
            let err = key.open("tools/list", text).unwrap_err();
            assert!(matches!(err, CursorError::Malformed(..)), "{text:?}: {err}");
            assert!(err.to_string().contains("tools/list"), "{err}");
        }
        let long = "x".repeat(500);
        let message = key.open("tools/list", &long).unwrap_err().to_string();
        assert!(
            message.len() < 200 && message.contains("xxxx…"),
            "{message}"
        );
    }
}
