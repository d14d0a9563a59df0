//! The audit log's HMAC key, and the MACs it makes (the `hmac` crate, SHA-256).

use std::path::Path;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use super::AuditError;

/// An audit log's HMAC key. Its bytes are never shown (`Debug` prints its length only).
///
/// ```
/// use mcp_middleware_models::audit_log::AuditKey;
///
/// let key = AuditKey::new("correct horse battery staple").unwrap();
/// assert_eq!(format!("{key:?}"), "AuditKey(28 bytes)");
/// assert!(AuditKey::new("").is_err());
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct AuditKey(Vec<u8>);

impl std::fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AuditKey({} bytes)", self.0.len())
    }
}

impl AuditKey {
    /// A key of these bytes (a string's UTF-8 bytes); empty is refused.
    pub fn new(bytes: impl AsRef<[u8]>) -> Result<Self, AuditError> {
        let bytes = bytes.as_ref();
        if bytes.is_empty() {
            return Err(AuditError::Key("the key is empty".to_owned()));
        }
        Ok(Self(bytes.to_vec()))
    }

    /// The value of the environment variable `name`.
    pub fn from_env(name: &str) -> Result<Self, AuditError> {
        match std::env::var_os(name) {
            Some(value) if !value.is_empty() => Ok(Self(value.into_encoded_bytes())),
            Some(_) => Err(AuditError::Key(format!(
                "the environment variable `{name}` that holds the audit key is empty"
            ))),
            None => Err(AuditError::Key(format!(
                "the environment variable `{name}` that holds the audit key is not set"
            ))),
        }
    }

    /// The contents of the file at `path`, without trailing line breaks.
    pub fn from_file(path: &Path) -> Result<Self, AuditError> {
        let mut bytes = std::fs::read(path).map_err(|cause| {
            AuditError::Key(format!(
                "the audit key file {} cannot be read: {cause}",
                path.display()
            ))
        })?;
        while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            bytes.pop();
        }
        if bytes.is_empty() {
            return Err(AuditError::Key(format!(
                "the audit key file {} is empty",
                path.display()
            )));
        }
        Ok(Self(bytes))
    }

    /// HMAC-SHA256 of `message` under this key, as 64 lower-case hex digits.
    pub(super) fn mac(&self, message: &[u8]) -> String {
        base16ct::lower::encode_string(&self.hmac(message).finalize().into_bytes())
    }

    /// Whether `mac` (64 lower-case hex digits) is `message`'s MAC under this key, compared in
    /// constant time.
    pub(super) fn verifies(&self, message: &[u8], mac: &str) -> bool {
        let mut tag = [0u8; 32];
        match base16ct::lower::decode(mac, &mut tag) {
            // HMAC-SHA256 tags are 32 bytes; `verify_slice` compares in constant time.
            Ok(decoded) if decoded.len() == 32 => self.hmac(message).verify_slice(decoded).is_ok(),
            _ => false,
        }
    }

    fn hmac(&self, message: &[u8]) -> Hmac<Sha256> {
        // HMAC takes a key of any length (a long one is hashed first), so this cannot fail.
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC accepts keys of every length"));
        mac.update(message);
        mac
    }
}
