//! What makes the shared store unable to take over a replica: every record the proxy writes
//! there is authenticated with a key the replicas share, and no key name holds a session id.
//!
//! Whoever can write to the store could otherwise install a configuration (a server's
//! command, the routes) on every replica, or hand a session to another principal; whoever can
//! read it would find every live `Mcp-Session-Id` in the key names. So:
//! - each stored value is a *record*: `mcpm1.` then the base64url (no padding) HMAC-SHA256
//!   tag, a dot, and the payload as it was (JSON). The tag covers the version, the Redis key
//!   the value is stored under and its field (or kind), then the payload, each part but the
//!   last length-prefixed: a record moved to another session, field or generation fails as a
//!   changed one does, and it is checked in constant time ([`ring::hmac::verify`]);
//! - a session is named in key names by [`StoreKey::name`], the hex HMAC-SHA256 of its id
//!   under a subkey of its own: the name tells nothing of the id, and only a replica with the
//!   key can compute it;
//! - what the replicas announce to each other on pub/sub channels (which carries session ids)
//!   is a *message*: `mcpm1e.` then base64url (no padding) of a random nonce, the
//!   ChaCha20-Poly1305 ciphertext and its tag, the channel and kind being the associated data.
//!   A subscriber without the key reads nothing of it, and a message it publishes is refused.
//!
//! The subkeys are derived once (HKDF-SHA256, a label each) from the secret every replica is
//! given (`mcpctl serve --state-key-file`, whose `requestState` key is derived from the same
//! secret under a label of its own).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::{hkdf, hmac};

use crate::sealed_state::{MIN_SECRET_BYTES, StateKeyError};

/// How a replica trusts the shared store and is trusted by it: the [`StoreKey`] its records
/// are authenticated with and, for `rediss://`, the certificates of the TLS connection.
///
/// ```
/// use mcp_middleware::shared_store::{StoreKey, StoreTrust};
///
/// let key = StoreKey::from_secret(&[7u8; 32])?;
/// let trust = StoreTrust::new(key).ca_file("/etc/redis/ca.pem");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct StoreTrust {
    pub(crate) key: StoreKey,
    /// A PEM file of the certificate authorities a `rediss://` server's certificate is
    /// checked against instead of the system's roots.
    pub(crate) ca_file: Option<PathBuf>,
    /// A client certificate chain and its private key (PEM), for a server that asks for one.
    pub(crate) client_identity: Option<(PathBuf, PathBuf)>,
}

impl StoreTrust {
    /// Records authenticated with `key`; a `rediss://` server verified against the system's
    /// roots, and no client certificate.
    pub fn new(key: StoreKey) -> Self {
        Self {
            key,
            ca_file: None,
            client_identity: None,
        }
    }

    /// Checks a `rediss://` server's certificate against the authorities in `path` (PEM)
    /// instead of the system's roots.
    pub fn ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca_file = Some(path.into());
        self
    }

    /// Presents the certificate chain `cert` (PEM) with its private key `key` (PEM) to a
    /// `rediss://` server.
    pub fn client_identity(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.client_identity = Some((cert.into(), key.into()));
        self
    }

    /// The key records are authenticated with.
    pub fn key(&self) -> &StoreKey {
        &self.key
    }
}

/// What every record starts with: the envelope's version.
pub const RECORD_PREFIX: &str = "mcpm1.";

/// Domain separation: the subkeys derived from the shared secret serve only the store.
const HKDF_SALT: &[u8] = b"mcp-middleware shared store";
const RECORDS_INFO: &[u8] = b"store records v1 hmac-sha256";
const NAMES_INFO: &[u8] = b"store session names v1 hmac-sha256";
const MESSAGES_INFO: &[u8] = b"store messages v1 chacha20-poly1305";

/// What every pub/sub message starts with.
// Only the Redis backend publishes messages.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
const MESSAGE_PREFIX: &str = "mcpm1e.";

/// The length of a tag in base64url without padding (32 bytes).
const TAG_CHARS: usize = 43;

/// The keys a replica authenticates the shared store's records and names its sessions with.
/// Derived once from the shared secret; cloning shares it.
///
/// ```
/// use mcp_middleware::shared_store::StoreKey;
///
/// let key = StoreKey::from_secret(b"a secret of at least thirty-two bytes, shared by replicas")?;
/// let record = key.seal("mcpm:{p}:config", "documents", r#"{"a":"b"}"#);
/// assert_eq!(key.open("mcpm:{p}:config", "documents", &record)?, r#"{"a":"b"}"#);
/// // Moved to another key, it is refused.
/// assert!(key.open("mcpm:{q}:config", "documents", &record).is_err());
/// assert!(!key.name("session-1").contains("session-1"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct StoreKey {
    inner: Arc<Keys>,
}

struct Keys {
    records: hmac::Key,
    names: hmac::Key,
    // Only the Redis backend publishes messages.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    messages: LessSafeKey,
}

impl fmt::Debug for StoreKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreKey").finish_non_exhaustive()
    }
}

/// Why a stored record was refused. Every variant means: do not use it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// Not a record at all (written by hand, or by a build before records were authenticated).
    #[error("it is not an authenticated record (no `{RECORD_PREFIX}` envelope)")]
    NotARecord,
    /// The envelope is malformed.
    #[error("its envelope is malformed: {0}")]
    Malformed(&'static str),
    /// The tag does not match: changed, moved from another key or field, or written with
    /// another key.
    #[error(
        "its authentication failed: it was changed, moved from another key, or written by a \
         replica with another key"
    )]
    Forged,
    /// The operating system gave no random bytes for a message's nonce.
    #[error("no random bytes from the operating system for a message: {0}")]
    NoRandomness(String),
}

impl StoreKey {
    /// The keys derived from `secret`, which must have at least [`MIN_SECRET_BYTES`] bytes.
    pub fn from_secret(secret: &[u8]) -> Result<Self, StateKeyError> {
        if secret.len() < MIN_SECRET_BYTES {
            return Err(StateKeyError::TooShort { got: secret.len() });
        }
        let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, HKDF_SALT).extract(secret);
        let derive = |info: &[u8]| match prk.expand(&[info], hmac::HMAC_SHA256) {
            Ok(okm) => hmac::Key::from(okm),
            // `expand` fails only for lengths over 255 hash blocks; an HMAC key is one.
            Err(_) => unreachable!("HKDF-SHA256 expands to one block"),
        };
        let messages = match prk.expand(&[MESSAGES_INFO], &CHACHA20_POLY1305) {
            Ok(okm) => LessSafeKey::new(UnboundKey::from(okm)),
            Err(_) => unreachable!("HKDF-SHA256 expands to 32 bytes"),
        };
        Ok(Self {
            inner: Arc::new(Keys {
                records: derive(RECORDS_INFO),
                names: derive(NAMES_INFO),
                messages,
            }),
        })
    }

    /// The keys from a file's contents (surrounding whitespace ignored), as
    /// [`StateKey::from_file`](crate::sealed_state::StateKey::from_file) reads it.
    pub fn from_file(path: &Path) -> Result<Self, StateKeyError> {
        Self::from_secret(crate::sealed_state::read_secret(path)?.trim_ascii())
    }

    /// How session `id` is named in key names: 64 hex digits.
    pub fn name(&self, id: &str) -> String {
        let tag = hmac::sign(&self.inner.names, id.as_bytes());
        let mut out = String::with_capacity(64);
        for byte in tag.as_ref() {
            out.push(char::from(b"0123456789abcdef"[usize::from(byte >> 4)]));
            out.push(char::from(b"0123456789abcdef"[usize::from(byte & 15)]));
        }
        out
    }

    /// `payload` as the record stored under `key`, field (or kind) `field`.
    pub fn seal(&self, key: &str, field: &str, payload: &str) -> String {
        let tag = hmac::sign(&self.inner.records, &message(key, field, payload));
        let mut out = String::with_capacity(RECORD_PREFIX.len() + TAG_CHARS + 1 + payload.len());
        out.push_str(RECORD_PREFIX);
        URL_SAFE_NO_PAD.encode_string(tag.as_ref(), &mut out);
        out.push('.');
        out.push_str(payload);
        out
    }

    /// The payload of `stored`, if it is the record this key sealed under `key` and `field`.
    pub fn open<'a>(
        &self,
        key: &str,
        field: &str,
        stored: &'a str,
    ) -> Result<&'a str, RecordError> {
        let rest = stored
            .strip_prefix(RECORD_PREFIX)
            .ok_or(RecordError::NotARecord)?;
        let (tag, payload) = rest
            .split_once('.')
            .ok_or(RecordError::Malformed("no dot after the tag"))?;
        if tag.len() != TAG_CHARS {
            return Err(RecordError::Malformed("the tag has the wrong length"));
        }
        let tag = URL_SAFE_NO_PAD
            .decode(tag)
            .map_err(|_| RecordError::Malformed("the tag is not base64url"))?;
        hmac::verify(&self.inner.records, &message(key, field, payload), &tag)
            .map_err(|_| RecordError::Forged)?;
        Ok(payload)
    }
}

// Only the Redis backend publishes messages.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
impl StoreKey {
    /// `text` as the message published on `channel` as `kind`: encrypted and authenticated.
    pub(crate) fn encrypt(
        &self,
        channel: &str,
        kind: &str,
        text: &str,
    ) -> Result<String, RecordError> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|err| RecordError::NoRandomness(err.to_string()))?;
        let mut in_out = text.as_bytes().to_vec();
        self.inner
            .messages
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(message(channel, kind, "")),
                &mut in_out,
            )
            // Only for texts over ChaCha20's 256 GiB limit.
            .map_err(|_| RecordError::Malformed("a message too long to encrypt"))?;
        let mut sealed = Vec::with_capacity(NONCE_LEN + in_out.len());
        sealed.extend_from_slice(&nonce);
        sealed.extend_from_slice(&in_out);
        let mut out = String::from(MESSAGE_PREFIX);
        URL_SAFE_NO_PAD.encode_string(&sealed, &mut out);
        Ok(out)
    }

    /// The text of `message`, if this key encrypted it for `channel` and `kind`.
    pub(crate) fn decrypt(
        &self,
        channel: &str,
        kind: &str,
        message_text: &str,
    ) -> Result<String, RecordError> {
        let encoded = message_text
            .strip_prefix(MESSAGE_PREFIX)
            .ok_or(RecordError::NotARecord)?;
        let mut sealed = URL_SAFE_NO_PAD
            .decode(encoded)
            .map_err(|_| RecordError::Malformed("the message is not base64url"))?;
        if sealed.len() < NONCE_LEN {
            return Err(RecordError::Malformed("the message is too short"));
        }
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&sealed[..NONCE_LEN]);
        let opened = self
            .inner
            .messages
            .open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(message(channel, kind, "")),
                &mut sealed[NONCE_LEN..],
            )
            .map_err(|_| RecordError::Forged)?;
        String::from_utf8(opened.to_vec()).map_err(|_| RecordError::Malformed("not UTF-8"))
    }
}

/// What the tag covers: the envelope's version, then `key` and `field` length-prefixed (no
/// two pairs give the same bytes), then the payload.
fn message(key: &str, field: &str, payload: &str) -> Vec<u8> {
    let mut message =
        Vec::with_capacity(RECORD_PREFIX.len() + 16 + key.len() + field.len() + payload.len());
    message.extend_from_slice(RECORD_PREFIX.as_bytes());
    for part in [key, field] {
        message.extend_from_slice(&(part.len() as u64).to_be_bytes());
        message.extend_from_slice(part.as_bytes());
    }
    message.extend_from_slice(payload.as_bytes());
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> StoreKey {
        StoreKey::from_secret(&[7u8; 32]).expect("32 bytes")
    }

    #[test]
    fn records_open_only_where_they_were_sealed() {
        let key = key();
        let record = key.seal("k", "meta", r#"{"principal":"token:alice"}"#);
        assert!(record.starts_with(RECORD_PREFIX));
        assert_eq!(
            key.open("k", "meta", &record),
            Ok(r#"{"principal":"token:alice"}"#)
        );
        assert_eq!(key.open("k2", "meta", &record), Err(RecordError::Forged));
        assert_eq!(key.open("k", "s:x", &record), Err(RecordError::Forged));
        // The key and field cannot trade bytes: the parts are length-prefixed.
        let split = key.seal("ab", "c", "p");
        assert_eq!(key.open("a", "bc", &split), Err(RecordError::Forged));
        let changed = record.replace("alice", "mallory");
        assert_eq!(key.open("k", "meta", &changed), Err(RecordError::Forged));
        let other = StoreKey::from_secret(&[8u8; 32]).expect("32 bytes");
        assert_eq!(other.open("k", "meta", &record), Err(RecordError::Forged));
        assert_eq!(
            key.open("k", "meta", r#"{"principal":"token:mallory"}"#),
            Err(RecordError::NotARecord)
        );
        assert!(matches!(
            key.open("k", "meta", "mcpm1.short.{}"),
            Err(RecordError::Malformed(_))
        ));
        assert!(matches!(
            key.open("k", "meta", "mcpm1.nodot"),
            Err(RecordError::Malformed(_))
        ));
    }

    #[test]
    fn messages_are_read_only_with_the_key_on_their_channel() {
        let key = key();
        let sent = key
            .encrypt("c", "stream", "session-1 secret")
            .expect("random bytes");
        assert!(!sent.contains("session-1"), "{sent}");
        assert_eq!(
            key.decrypt("c", "stream", &sent).as_deref(),
            Ok("session-1 secret")
        );
        assert_ne!(
            sent,
            key.encrypt("c", "stream", "session-1 secret")
                .expect("random")
        );
        assert_eq!(key.decrypt("d", "stream", &sent), Err(RecordError::Forged));
        assert_eq!(key.decrypt("c", "ended", &sent), Err(RecordError::Forged));
        let other = StoreKey::from_secret(&[8u8; 32]).expect("32 bytes");
        assert_eq!(
            other.decrypt("c", "stream", &sent),
            Err(RecordError::Forged)
        );
        assert_eq!(
            key.decrypt("c", "stream", "plain"),
            Err(RecordError::NotARecord)
        );
        assert!(matches!(
            key.decrypt("c", "stream", "mcpm1e.AAAA"),
            Err(RecordError::Malformed(_))
        ));
        let mut changed = sent.into_bytes();
        let last = changed.len() - 1;
        changed[last] = if changed[last] == b'A' { b'B' } else { b'A' };
        let changed = String::from_utf8(changed).expect("ASCII");
        assert!(key.decrypt("c", "stream", &changed).is_err());
    }

    #[test]
    fn names_are_keyed_digests() {
        let key = key();
        let name = key.name("0123-session");
        assert_eq!(name.len(), 64);
        assert!(name.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(name, key.name("0123-session"), "the same on every replica");
        assert_ne!(name, key.name("0123-session2"));
        let other = StoreKey::from_secret(&[8u8; 32]).expect("32 bytes");
        assert_ne!(name, other.name("0123-session"));
        assert!(StoreKey::from_secret(b"short").is_err());
    }
}
