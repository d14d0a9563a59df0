//! Sealed state: what the proxy hands a client to bring back later (a 2026-07-28 client's
//! `requestState`), sealed so that the client can neither read nor change it, nor use it on
//! another session, as another principal, or after it expired.
//!
//! A client is not trusted with such state: a `requestState` names an input round
//! the proxy keeps open, so a forged one could resume another session's call. Each state is
//! sealed with ChaCha20-Poly1305 (`ring`, an AEAD) under a [`StateKey`]; the sealed text carries
//! a random nonce and the time it expires, and the session and principal it was issued to are
//! the AEAD's associated data: they are not in the token, yet opening it with any other session
//! or principal fails exactly as a tampered token does.
//!
//! The key comes from configuration ([`StateKey::from_secret`], [`StateKey::from_file`]:
//! `mcpctl proxy|serve --state-key-file FILE`), so replicas that share it accept each other's
//! states; without one, [`StateKey::process`] is random per process, and a state does not
//! outlive the process that issued it.
//!
//! Token syntax: `mcpmw1.` then base64url (no padding) of nonce (12 bytes) || ciphertext || tag
//! (16 bytes); the plaintext is the expiry (Unix seconds, 8 bytes big-endian) then the payload.
//! The prefix tells the proxy's states from an upstream's own `requestState`, which passes
//! through untouched.
//!
//! ```
//! use mcp_middleware::sealed_state::{Binding, StateKey};
//! use std::time::Duration;
//!
//! let key = StateKey::from_secret(b"a secret of at least thirty-two bytes, shared by replicas")?;
//! let alice = Binding::new("session-1", "token:alice");
//! let token = key.seal(&alice, Duration::from_secs(300), "round/7");
//! assert!(token.starts_with("mcpmw1."));
//! assert_eq!(key.open(&alice, &token)?, "round/7");
//! let mallory = Binding::new("session-1", "token:mallory");
//! assert!(key.open(&mallory, &token).is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::hkdf;
use ring::rand::{SecureRandom, SystemRandom};

/// What every sealed token starts with.
pub const PREFIX: &str = "mcpmw1.";

/// The fewest bytes a configured secret may have.
pub const MIN_SECRET_BYTES: usize = 32;

/// Domain separation: the key derived from a secret serves only this purpose.
const HKDF_SALT: &[u8] = b"mcp-middleware sealed state";
const HKDF_INFO: &[u8] = b"requestState v1 chacha20-poly1305";
const TAG_LEN: usize = 16;
const EXPIRY_LEN: usize = 8;

/// The key states are sealed with. Cloning it shares it.
///
/// ```
/// use mcp_middleware::sealed_state::StateKey;
///
/// assert!(StateKey::from_secret(b"too short").is_err());
/// let key = StateKey::from_secret(&[7u8; 32]).unwrap();
/// assert!(!format!("{key:?}").contains("7, 7"), "Debug never shows the key");
/// ```
#[derive(Clone)]
pub struct StateKey {
    key: LessSafeKey,
    /// Where it came from, for `Debug`.
    origin: &'static str,
}

impl fmt::Debug for StateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StateKey")
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

/// Why a key could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateKeyError {
    /// The secret is too short to be a key.
    #[error(
        "the state key has {got} bytes; it needs at least {MIN_SECRET_BYTES} (e.g. `head -c 32 \
         /dev/urandom > FILE`)"
    )]
    TooShort {
        /// How many bytes it has (surrounding whitespace of a file not counted).
        got: usize,
    },
    /// The key file could not be read.
    #[error("the state key file {path} could not be read: {message}")]
    Unreadable {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
}

/// Why a token was refused. Every variant means: do not resume anything.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The text is not a state this proxy seals (no [`PREFIX`]).
    #[error("requestState is not one the proxy issued")]
    NotOurs,
    /// The text has the prefix but is not a sealed state at all.
    #[error("requestState is malformed: {0}")]
    Malformed(&'static str),
    /// It does not open under this key, session and principal: changed, issued to another
    /// session or principal, or sealed with another key.
    #[error(
        "requestState was not issued to this session: it was changed, or it belongs to another \
         session or principal, or to a proxy with another state key"
    )]
    Forged,
    /// It opened, but its time is up.
    #[error("requestState expired {0} s ago")]
    Expired(u64),
}

/// Who a state is issued to: the session and the principal
/// ([`Identity::principal`](crate::Identity::principal)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binding<'a> {
    session: &'a str,
    principal: &'a str,
}

impl<'a> Binding<'a> {
    /// The binding to `session` and `principal`.
    pub fn new(session: &'a str, principal: &'a str) -> Self {
        Self { session, principal }
    }

    /// The associated data: both parts length-prefixed, so no two bindings have the same.
    fn aad(&self) -> Vec<u8> {
        let mut aad = Vec::with_capacity(16 + self.session.len() + self.principal.len());
        for part in [self.session, self.principal] {
            aad.extend_from_slice(&(part.len() as u64).to_be_bytes());
            aad.extend_from_slice(part.as_bytes());
        }
        aad
    }
}

fn rng() -> &'static SystemRandom {
    static RNG: OnceLock<SystemRandom> = OnceLock::new();
    RNG.get_or_init(SystemRandom::new)
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

impl StateKey {
    /// A key derived (HKDF-SHA256) from `secret`, which must have at least
    /// [`MIN_SECRET_BYTES`] bytes: every process given the same secret has the same key.
    pub fn from_secret(secret: &[u8]) -> Result<Self, StateKeyError> {
        if secret.len() < MIN_SECRET_BYTES {
            return Err(StateKeyError::TooShort { got: secret.len() });
        }
        Ok(Self::derive(secret, "configured"))
    }

    /// A key from a file's contents (surrounding whitespace ignored, so a hex or base64 line
    /// written with `echo` works as well as raw bytes).
    pub fn from_file(path: &Path) -> Result<Self, StateKeyError> {
        Self::from_secret(read_secret(path)?.trim_ascii())
    }

    /// A fresh random key (what tests and a process without configuration use).
    pub fn random() -> Self {
        let mut secret = [0u8; 32];
        if rng().fill(&mut secret).is_err() {
            // The system's generator failing is not recoverable; fall back on getrandom,
            // which reads the same source and panics with a clear message if it cannot.
            getrandom::fill(&mut secret).unwrap_or_else(|err| {
                panic!("no random bytes for the state key from the operating system: {err}")
            });
        }
        Self::derive(&secret, "random")
    }

    /// This process's random key: the same for every session that is given no key.
    pub fn process() -> Self {
        static PROCESS: OnceLock<StateKey> = OnceLock::new();
        PROCESS
            .get_or_init(|| {
                let mut key = Self::random();
                key.origin = "random per process";
                key
            })
            .clone()
    }

    fn derive(secret: &[u8], origin: &'static str) -> Self {
        let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, HKDF_SALT).extract(secret);
        let info = [HKDF_INFO];
        // `expand` fails only for lengths over 255 hash blocks; a 32-byte key is one.
        let key = match prk.expand(&info, &CHACHA20_POLY1305) {
            Ok(okm) => UnboundKey::from(okm),
            Err(_) => unreachable!("HKDF-SHA256 expands to 32 bytes"),
        };
        Self {
            key: LessSafeKey::new(key),
            origin,
        }
    }

    /// Seals `payload` for `binding`, valid for `ttl`.
    pub fn seal(&self, binding: &Binding<'_>, ttl: Duration, payload: &str) -> String {
        self.seal_at(binding, now_secs().saturating_add(ttl.as_secs()), payload)
    }

    fn seal_at(&self, binding: &Binding<'_>, expires: u64, payload: &str) -> String {
        let mut nonce = [0u8; NONCE_LEN];
        if rng().fill(&mut nonce).is_err() {
            getrandom::fill(&mut nonce).unwrap_or_else(|err| {
                panic!("no random bytes for a state nonce from the operating system: {err}")
            });
        }
        let mut in_out = Vec::with_capacity(EXPIRY_LEN + payload.len() + TAG_LEN);
        in_out.extend_from_slice(&expires.to_be_bytes());
        in_out.extend_from_slice(payload.as_bytes());
        let sealed = self.key.seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(binding.aad()),
            &mut in_out,
        );
        if sealed.is_err() {
            // Only for plaintexts over ChaCha20's 256 GiB limit.
            unreachable!("a state payload is far below ChaCha20-Poly1305's limit");
        }
        let mut token = Vec::with_capacity(NONCE_LEN + in_out.len());
        token.extend_from_slice(&nonce);
        token.extend_from_slice(&in_out);
        let mut out = String::from(PREFIX);
        URL_SAFE_NO_PAD.encode_string(&token, &mut out);
        out
    }

    /// The payload of `token`, if this key sealed it for `binding` and it has not expired.
    pub fn open(&self, binding: &Binding<'_>, token: &str) -> Result<String, OpenError> {
        self.open_at(binding, token, now_secs())
    }

    fn open_at(&self, binding: &Binding<'_>, token: &str, now: u64) -> Result<String, OpenError> {
        let body = token.strip_prefix(PREFIX).ok_or(OpenError::NotOurs)?;
        let mut bytes = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| OpenError::Malformed("not base64url"))?;
        if bytes.len() < NONCE_LEN + EXPIRY_LEN + TAG_LEN {
            return Err(OpenError::Malformed("too short"));
        }
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&bytes[..NONCE_LEN]);
        let plain = self
            .key
            .open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(binding.aad()),
                &mut bytes[NONCE_LEN..],
            )
            .map_err(|_| OpenError::Forged)?;
        let (expiry, payload) = plain.split_at(EXPIRY_LEN);
        let mut expires = [0u8; EXPIRY_LEN];
        expires.copy_from_slice(expiry);
        let expires = u64::from_be_bytes(expires);
        if now >= expires {
            return Err(OpenError::Expired(now - expires));
        }
        // Sealed from a `&str`: the bytes are UTF-8 unless the key sealed something else.
        String::from_utf8(payload.to_vec()).map_err(|_| OpenError::Malformed("not text"))
    }
}

/// The bytes of a key file (every key the replicas share is read this way).
pub(crate) fn read_secret(path: &Path) -> Result<Vec<u8>, StateKeyError> {
    std::fs::read(path).map_err(|err| StateKeyError::Unreadable {
        path: path.display().to_string(),
        message: err.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SESSION: &str = "4242-1";
    const ALICE: &str = "token:alice";

    fn key() -> StateKey {
        StateKey::from_secret(b"0123456789abcdef0123456789abcdef").expect("a key")
    }

    #[test]
    fn a_sealed_state_opens_for_its_session_and_principal_only() {
        let key = key();
        let alice = Binding::new(SESSION, ALICE);
        let token = key.seal(&alice, Duration::from_secs(60), "round/1");
        assert_eq!(key.open(&alice, &token).as_deref(), Ok("round/1"));
        let other_session = Binding::new("4242-2", ALICE);
        assert_eq!(key.open(&other_session, &token), Err(OpenError::Forged));
        let other_principal = Binding::new(SESSION, "token:bob");
        assert_eq!(key.open(&other_principal, &token), Err(OpenError::Forged));
        // Moving bytes between the parts does not make another valid binding.
        let shifted = Binding::new("4242-1token:alice", "");
        assert_eq!(key.open(&shifted, &token), Err(OpenError::Forged));
    }

    #[test]
    fn the_payload_is_not_readable_and_every_seal_differs() {
        let key = key();
        let alice = Binding::new(SESSION, ALICE);
        let a = key.seal(&alice, Duration::from_secs(60), "round/secret-name");
        let b = key.seal(&alice, Duration::from_secs(60), "round/secret-name");
        assert_ne!(a, b, "a fresh nonce each time");
        let decoded = URL_SAFE_NO_PAD.decode(&a[PREFIX.len()..]).unwrap();
        let needle = b"secret-name";
        assert!(!decoded.windows(needle.len()).any(|w| w == needle));
    }

    #[test]
    fn a_changed_byte_anywhere_is_refused() {
        let key = key();
        let alice = Binding::new(SESSION, ALICE);
        let token = key.seal(&alice, Duration::from_secs(60), "round/1");
        let bytes = URL_SAFE_NO_PAD.decode(&token[PREFIX.len()..]).unwrap();
        for at in 0..bytes.len() {
            let mut changed = bytes.clone();
            changed[at] ^= 0x01;
            let forged = format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(&changed));
            assert_eq!(
                key.open(&alice, &forged),
                Err(OpenError::Forged),
                "byte {at}"
            );
        }
        let cut = format!(
            "{PREFIX}{}",
            URL_SAFE_NO_PAD.encode(&bytes[..bytes.len() - 1])
        );
        assert_eq!(key.open(&alice, &cut), Err(OpenError::Forged));
    }

    #[test]
    fn an_expired_state_is_refused_and_says_so() {
        let key = key();
        let alice = Binding::new(SESSION, ALICE);
        let token = key.seal_at(&alice, 1_000, "round/1");
        assert_eq!(key.open_at(&alice, &token, 999).as_deref(), Ok("round/1"));
        assert_eq!(
            key.open_at(&alice, &token, 1_000),
            Err(OpenError::Expired(0))
        );
        assert_eq!(
            key.open_at(&alice, &token, 1_030),
            Err(OpenError::Expired(30))
        );
        let err = key.open_at(&alice, &token, 1_030).unwrap_err().to_string();
        assert!(err.contains("expired 30 s ago"), "{err}");
        // The expiry is inside the seal: changing it is tampering.
        let live = key.seal(&alice, Duration::from_secs(60), "round/2");
        assert!(key.open(&alice, &live).is_ok());
    }

    #[test]
    fn another_key_and_foreign_text_are_refused() {
        let alice = Binding::new(SESSION, ALICE);
        let token = key().seal(&alice, Duration::from_secs(60), "round/1");
        assert_eq!(
            StateKey::random().open(&alice, &token),
            Err(OpenError::Forged)
        );
        let same_secret = StateKey::from_secret(b"0123456789abcdef0123456789abcdef").unwrap();
        assert!(
            same_secret.open(&alice, &token).is_ok(),
            "replicas share a key"
        );
        assert_eq!(
            key().open(&alice, "upstream-state"),
            Err(OpenError::NotOurs)
        );
        assert_eq!(
            key().open(&alice, "mcpmw1.***"),
            Err(OpenError::Malformed("not base64url"))
        );
        assert_eq!(
            key().open(&alice, "mcpmw1.AAAA"),
            Err(OpenError::Malformed("too short"))
        );
    }

    #[test]
    fn the_process_key_is_shared_and_secrets_are_checked() {
        let alice = Binding::new(SESSION, ALICE);
        let token = StateKey::process().seal(&alice, Duration::from_secs(60), "x");
        assert!(StateKey::process().open(&alice, &token).is_ok());
        assert!(matches!(
            StateKey::from_secret(&[1u8; 31]),
            Err(StateKeyError::TooShort { got: 31 })
        ));
        let dir = std::env::temp_dir().join(format!("sealed-state-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("key");
        std::fs::write(&file, b"0123456789abcdef0123456789abcdef\n").unwrap();
        let from_file = StateKey::from_file(&file).unwrap();
        assert!(
            from_file
                .open(&alice, &key().seal(&alice, Duration::from_secs(60), "y"))
                .is_ok()
        );
        let missing = StateKey::from_file(&dir.join("missing"))
            .unwrap_err()
            .to_string();
        assert!(
            missing.contains("missing") && missing.contains("could not be read"),
            "{missing}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
