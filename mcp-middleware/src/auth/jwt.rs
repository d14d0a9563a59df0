//! [`JwtVerifier`]: JSON Web Tokens (RFC 7519) verified against configured keys.
//!
//! The checks, in order, each failing closed with an [`AuthFailure`] that says what was wrong
//! and never repeats the token's contents or the configuration:
//!
//! 1. The compact form: three parts joined by `.` (five, an encrypted JWE, are refused), each
//!    base64url **without padding and canonical** (no `=`, no set bits after the last byte),
//!    as RFC 7515 §2 defines it.
//! 2. The header: one JSON object with no member name twice at any depth (so
//!    `{"alg":"none","alg":"HS256"}` is malformed, whatever a last-wins reader would make of
//!    it), `typ` absent or `JWT` / `at+jwt` (RFC 9068 access tokens; case-insensitive, an
//!    `application/` prefix allowed, RFC 7515 §4.1.9), no `crit`, and an `alg` the proxy
//!    supports: never `none`.
//! 3. A configured key that fits the header's `kid` and `alg`. A key decides which algorithms
//!    it verifies (an HMAC secret HS*, an RSA key RS* and PS*, a P-256 key ES256, a P-384 key
//!    ES384, an Ed25519 key EdDSA, a JWK with `alg` that one alone), so an RSA public key is
//!    never used as an HMAC secret.
//! 4. The signature, by the `jsonwebtoken` crate.
//! 5. The claims: one JSON object with no member name twice; `exp` (required unless turned
//!    off), `nbf`, `iss` and `aud` when configured, and the subject claim. Times allow
//!    [`JwtVerifier::leeway`] of clock skew and come from [`JwtVerifier::clock`].
//!
//! **Why `jsonwebtoken` on its `rust_crypto` backend.** `jsonwebtoken` is the maintained,
//! widely used JOSE crate; it verifies HS, RS, PS, ES and EdDSA signatures. Its other backend,
//! `aws_lc_rs`, compiles AWS-LC (C and assembly) with a C toolchain, a second C crypto
//! library beside the `ring` that rustls uses; `rust_crypto` is pure Rust and shares its
//! `sha2`/`digest`/`const-oid` with rmcp's tree and its `der`/`spki` with `x509-cert`, which
//! reads the keys and certificates here. (The `rsa` crate's advisory RUSTSEC-2023-0071 is a
//! timing leak of private-key operations; the proxy only verifies with public keys.)
//! `jsonwebtoken` checks that a key's family fits the algorithm, refuses padded base64 and
//! unknown algorithms; the proxy adds what it does not check: duplicate member names,
//! non-canonical base64 in the parts it hands on, `typ`, and RSA keys under 2048 bits. The
//! time claims are checked here, not by the crate, so that they use the verifier's clock.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use rustls::pki_types::SubjectPublicKeyInfoDer;
use rustls::pki_types::pem::PemObject;
use serde_json::{Map, Value};
use x509_cert::der::Decode;
use x509_cert::der::oid::ObjectIdentifier;
use x509_cert::spki::SubjectPublicKeyInfoRef;

use super::{AuthError, AuthFailure, IssuerKeys};
use crate::auth::Identity;

/// rsaEncryption.
const OID_RSA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");
/// id-ecPublicKey.
const OID_EC: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
/// prime256v1 (P-256).
const OID_P256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7");
/// secp384r1 (P-384).
const OID_P384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.34");
/// id-Ed25519.
const OID_ED25519: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.101.112");

/// The smallest HMAC secret accepted, in bytes (RFC 7518 §3.2: at least the hash's size).
const MIN_HMAC_SECRET: usize = 32;
/// The smallest RSA modulus accepted, in bits (RFC 7518 §3.3).
const MIN_RSA_BITS: usize = 2048;

/// A key JWTs may be signed with: an HMAC secret, or an RSA, EC (P-256, P-384) or Ed25519
/// public key, optionally with a key id (`kid`) to match the token header's.
///
/// ```
/// use mcp_middleware::auth::JwtKey;
///
/// let secret = JwtKey::hmac(b"a secret of at least thirty-two bytes!".to_vec()).unwrap();
/// assert_eq!(secret.algorithms(), ["HS256", "HS384", "HS512"]);
/// assert!(JwtKey::hmac(b"short".to_vec()).is_err());
/// ```
#[derive(Clone)]
pub struct JwtKey {
    kid: Option<String>,
    kind: KeyKind,
    /// The one algorithm the key is for, when its JWK says so.
    only: Option<Algorithm>,
    decoding: DecodingKey,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyKind {
    Hmac,
    Rsa,
    P256,
    P384,
    Ed25519,
}

impl std::fmt::Debug for JwtKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key material.
        f.debug_struct("JwtKey")
            .field("kid", &self.kid)
            .field("kind", &self.kind)
            .field("only", &self.only)
            .finish_non_exhaustive()
    }
}

/// Every algorithm the proxy verifies, by its `alg` name (case-sensitive, RFC 7515 §4.1.1).
const ALGORITHMS: [(&str, Algorithm); 12] = [
    ("HS256", Algorithm::HS256),
    ("HS384", Algorithm::HS384),
    ("HS512", Algorithm::HS512),
    ("RS256", Algorithm::RS256),
    ("RS384", Algorithm::RS384),
    ("RS512", Algorithm::RS512),
    ("PS256", Algorithm::PS256),
    ("PS384", Algorithm::PS384),
    ("PS512", Algorithm::PS512),
    ("ES256", Algorithm::ES256),
    ("ES384", Algorithm::ES384),
    ("EdDSA", Algorithm::EdDSA),
];

fn algorithm(name: &str) -> Option<Algorithm> {
    ALGORITHMS.iter().find(|(n, _)| *n == name).map(|(_, a)| *a)
}

/// Strict base64url (RFC 7515 §2): no padding, no whitespace, no trailing bits.
fn decode(text: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD.decode(text).ok()
}

impl JwtKey {
    /// An HMAC secret for HS256, HS384 and HS512; at least 32 bytes (RFC 7518 asks a key as
    /// long as the hash).
    pub fn hmac(secret: impl Into<Vec<u8>>) -> Result<Self, AuthError> {
        let secret = secret.into();
        if secret.len() < MIN_HMAC_SECRET {
            return Err(AuthError::Key(format!(
                "an HMAC secret must be at least {MIN_HMAC_SECRET} bytes, this one has {}",
                secret.len()
            )));
        }
        let decoding = DecodingKey::from_secret(&secret)
            .map_err(|err| AuthError::Key(format!("the HMAC secret cannot be used: {err}")))?;
        Ok(Self::new(KeyKind::Hmac, decoding))
    }

    /// A public key in PEM (`-----BEGIN PUBLIC KEY-----`, the `SubjectPublicKeyInfo` that
    /// `openssl pkey -pubout` writes): RSA of at least 2048 bits (for RS* and PS*), EC P-256
    /// (ES256), EC P-384 (ES384) or Ed25519 (EdDSA).
    pub fn from_pem(pem: &[u8]) -> Result<Self, AuthError> {
        let spki = SubjectPublicKeyInfoDer::from_pem_slice(pem)
            .map_err(|err| AuthError::Key(format!("no PEM `PUBLIC KEY` could be read: {err}")))?;
        Self::from_spki_der(spki.as_ref())
    }

    /// [`from_pem`](Self::from_pem) on the contents of `path`.
    pub fn from_pem_file(path: impl AsRef<Path>) -> Result<Self, AuthError> {
        let path = path.as_ref();
        let pem = std::fs::read(path).map_err(|cause| AuthError::Read {
            path: path.to_owned(),
            cause,
        })?;
        Self::from_pem(&pem).map_err(|err| err.in_file(path))
    }

    /// A public key as DER `SubjectPublicKeyInfo`.
    pub fn from_spki_der(der: &[u8]) -> Result<Self, AuthError> {
        let not_spki =
            |_| AuthError::Key("the public key is not a DER SubjectPublicKeyInfo".to_owned());
        let info = SubjectPublicKeyInfoRef::from_der(der).map_err(not_spki)?;
        let bits = info.subject_public_key.as_bytes().ok_or_else(|| {
            AuthError::Key("the public key's bit string is not whole bytes".to_owned())
        })?;
        let oid = info.algorithm.oid;
        if oid == OID_RSA {
            let key = pkcs1::RsaPublicKey::<x509_cert::der::asn1::UintRef<'_>>::from_der(bits)
                .map_err(|_| {
                    AuthError::Key("the RSA public key is not a PKCS#1 RSAPublicKey".to_owned())
                })?;
            return Self::rsa(key.modulus.as_bytes(), key.public_exponent.as_bytes());
        }
        if oid == OID_EC {
            let curve = info.algorithm.parameters_oid().ok();
            return match curve {
                Some(c) if c == OID_P256 => Self::ec(KeyKind::P256, bits),
                Some(c) if c == OID_P384 => Self::ec(KeyKind::P384, bits),
                _ => Err(AuthError::Key(
                    "only P-256 and P-384 EC keys are supported".to_owned(),
                )),
            };
        }
        if oid == OID_ED25519 {
            return Self::ed25519(bits);
        }
        Err(AuthError::Key(
            "the public key is not RSA, EC or Ed25519".to_owned(),
        ))
    }

    /// A key from a JWK (RFC 7517): `kty` `oct` (`k`), `RSA` (`n`, `e`), `EC` (`crv` P-256 or
    /// P-384, `x`, `y`) or `OKP` (`crv` Ed25519, `x`); its `kid` and `alg` are kept. Binary
    /// members are base64url without padding, as RFC 7518 writes them.
    pub fn from_jwk(jwk: &Value) -> Result<Self, AuthError> {
        let field = |name: &str| -> Result<Vec<u8>, AuthError> {
            let text = jwk
                .get(name)
                .and_then(Value::as_str)
                .ok_or_else(|| AuthError::Key(format!("the JWK has no string member `{name}`")))?;
            decode(text).ok_or_else(|| {
                AuthError::Key(format!(
                    "the JWK's `{name}` is not base64url without padding"
                ))
            })
        };
        let kty = jwk.get("kty").and_then(Value::as_str).unwrap_or_default();
        let crv = jwk.get("crv").and_then(Value::as_str).unwrap_or_default();
        let mut key = match (kty, crv) {
            ("oct", _) => Self::hmac(field("k")?)?,
            ("RSA", _) => Self::rsa(&field("n")?, &field("e")?)?,
            ("EC", "P-256" | "P-384") => {
                let (x, y) = (field("x")?, field("y")?);
                let mut point = vec![0x04];
                point.extend_from_slice(&x);
                point.extend_from_slice(&y);
                let kind = if crv == "P-256" {
                    KeyKind::P256
                } else {
                    KeyKind::P384
                };
                Self::ec(kind, &point)?
            }
            ("OKP", "Ed25519") => Self::ed25519(&field("x")?)?,
            _ => {
                return Err(AuthError::Key(format!(
                    "unsupported JWK: kty `{kty}`{}",
                    if crv.is_empty() {
                        String::new()
                    } else {
                        format!(", crv `{crv}`")
                    }
                )));
            }
        };
        if let Some(kid) = jwk.get("kid").and_then(Value::as_str) {
            key.kid = Some(kid.to_owned());
        }
        if let Some(alg) = jwk.get("alg").and_then(Value::as_str) {
            let alg = algorithm(alg).filter(|a| key.accepts(*a)).ok_or_else(|| {
                AuthError::Key(format!("the JWK's `alg` `{alg}` does not fit its key"))
            })?;
            key.only = Some(alg);
        }
        Ok(key)
    }

    /// The keys in `path`: a PEM public key (see [`from_pem`](Self::from_pem)), a JWK, or a JWK
    /// set (`{"keys": [...]}`), told apart by their first character.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Vec<Self>, AuthError> {
        let path = path.as_ref();
        let text = std::fs::read(path).map_err(|cause| AuthError::Read {
            path: path.to_owned(),
            cause,
        })?;
        let keys = if text.trim_ascii_start().starts_with(b"{") {
            let json = String::from_utf8_lossy(&text);
            let value = strict_json(&json, "the key file").map_err(|err| err.in_file(path))?;
            if value.get("keys").is_some() {
                Self::from_jwks(&json)
            } else {
                Self::from_jwk(&value).map(|key| vec![key])
            }
        } else {
            Self::from_pem(&text).map(|key| vec![key])
        };
        keys.map_err(|err| err.in_file(path))
    }

    /// Every key of a JWK set (`{"keys": [...]}`), as an identity provider publishes them.
    pub fn from_jwks(json: &str) -> Result<Vec<Self>, AuthError> {
        let set = strict_json(json, "the JWK set")?;
        let keys = set
            .get("keys")
            .and_then(Value::as_array)
            .ok_or_else(|| AuthError::Key("the JWK set has no `keys` array".to_owned()))?;
        keys.iter()
            .enumerate()
            .map(|(i, jwk)| {
                Self::from_jwk(jwk).map_err(|err| match err {
                    AuthError::Key(message) => AuthError::Key(format!("key {i}: {message}")),
                    other => other,
                })
            })
            .collect()
    }

    /// Sets the key id: a token whose header names a `kid` is checked only against keys with
    /// that id (and keys without one).
    pub fn with_kid(mut self, kid: impl Into<String>) -> Self {
        self.kid = Some(kid.into());
        self
    }

    /// The algorithms the key verifies (`alg` values).
    pub fn algorithms(&self) -> Vec<&'static str> {
        ALGORITHMS
            .iter()
            .filter(|(_, a)| self.accepts(*a))
            .map(|(n, _)| *n)
            .collect()
    }

    fn new(kind: KeyKind, decoding: DecodingKey) -> Self {
        Self {
            kid: None,
            kind,
            only: None,
            decoding,
        }
    }

    /// An RSA key from its big-endian modulus and exponent.
    fn rsa(n: &[u8], e: &[u8]) -> Result<Self, AuthError> {
        let n = strip_leading_zeros(n);
        let bits = n.len() * 8 - n.first().map_or(8, |b| b.leading_zeros() as usize);
        if bits < MIN_RSA_BITS {
            return Err(AuthError::Key(format!(
                "an RSA key must have at least {MIN_RSA_BITS} bits, this one has {bits}"
            )));
        }
        if strip_leading_zeros(e).is_empty() {
            return Err(AuthError::Key("the RSA key's exponent is zero".to_owned()));
        }
        Ok(Self::new(
            KeyKind::Rsa,
            DecodingKey::from_rsa_raw_components(n, e),
        ))
    }

    /// An EC key from its SEC1 point.
    fn ec(kind: KeyKind, point: &[u8]) -> Result<Self, AuthError> {
        let coordinate = if kind == KeyKind::P256 { 32 } else { 48 };
        // Uncompressed (0x04 x y) or compressed (0x02/0x03 x).
        let fits = match point.first() {
            Some(0x04) => point.len() == 1 + 2 * coordinate,
            Some(0x02 | 0x03) => point.len() == 1 + coordinate,
            _ => false,
        };
        if !fits {
            return Err(AuthError::Key(format!(
                "the EC public key is not a point on {}",
                if kind == KeyKind::P256 {
                    "P-256"
                } else {
                    "P-384"
                }
            )));
        }
        Ok(Self::new(kind, DecodingKey::from_ec_der(point)))
    }

    fn ed25519(key: &[u8]) -> Result<Self, AuthError> {
        if key.len() != 32 {
            return Err(AuthError::Key(
                "an Ed25519 public key is 32 bytes".to_owned(),
            ));
        }
        Ok(Self::new(KeyKind::Ed25519, DecodingKey::from_ed_der(key)))
    }

    fn accepts(&self, alg: Algorithm) -> bool {
        use Algorithm::*;
        if self.only.is_some_and(|only| only != alg) {
            return false;
        }
        match self.kind {
            KeyKind::Hmac => matches!(alg, HS256 | HS384 | HS512),
            KeyKind::Rsa => matches!(alg, RS256 | RS384 | RS512 | PS256 | PS384 | PS512),
            KeyKind::P256 => alg == ES256,
            KeyKind::P384 => alg == ES384,
            KeyKind::Ed25519 => alg == EdDSA,
        }
    }
}

fn strip_leading_zeros(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len());
    &bytes[start..]
}

/// `json` as strict JSON (no member name twice), or an error naming `what`.
fn strict_json(json: &str, what: &str) -> Result<Value, AuthError> {
    crate::strict_json::parse(json)
        .map_err(|err| AuthError::Key(format!("{what} is not strict JSON: {err}")))
}

/// Whether a `typ` header names a JWT: `JWT` or `at+jwt` (RFC 9068), case-insensitively, with
/// or without the `application/` prefix RFC 7515 §4.1.9 lets senders omit.
fn typ_is_jwt(typ: &str) -> bool {
    let media = match typ.get(..12) {
        Some(prefix) if prefix.eq_ignore_ascii_case("application/") => &typ[12..],
        _ => typ,
    };
    media.eq_ignore_ascii_case("jwt") || media.eq_ignore_ascii_case("at+jwt")
}

/// Verifies JWTs and turns them into [`Identity::Jwt`].
///
/// ```
/// use std::time::Duration;
/// use mcp_middleware::auth::{JwtKey, JwtVerifier};
///
/// let key = JwtKey::hmac(b"a secret of at least thirty-two bytes!".to_vec()).unwrap();
/// let verifier = JwtVerifier::new(key)
///     .issuer("https://issuer.example.com")
///     .audience("mcp-proxy")
///     .subject_claim("email")
///     .leeway(Duration::from_secs(30));
/// // A token that is not a JWT at all:
/// assert!(verifier.verify("not-a-jwt").is_err());
/// ```
#[derive(Debug, Clone)]
pub struct JwtVerifier {
    keys: Vec<JwtKey>,
    /// Keys fetched from the issuer, besides `keys`.
    issuer_keys: Option<IssuerKeys>,
    issuer: Option<String>,
    audience: Option<String>,
    subject_claim: String,
    leeway: Duration,
    require_exp: bool,
    clock: Clock,
}

/// What a verifier reads the time from.
#[derive(Clone)]
struct Clock(Arc<dyn Fn() -> SystemTime + Send + Sync>);

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Clock")
    }
}

impl JwtVerifier {
    /// A verifier with one key; by default it requires `exp`, takes the subject from `sub`,
    /// allows 60 s of clock skew and checks neither issuer nor audience (the HTTP front warns
    /// when it starts with either unset).
    pub fn new(key: JwtKey) -> Self {
        Self::with_keys(vec![key])
    }

    /// A verifier trying several keys (a JWK set: see [`JwtKey::from_jwks`]).
    pub fn with_keys(keys: Vec<JwtKey>) -> Self {
        Self {
            keys,
            issuer_keys: None,
            issuer: None,
            audience: None,
            subject_claim: "sub".to_owned(),
            leeway: Duration::from_secs(60),
            require_exp: true,
            clock: Clock(Arc::new(SystemTime::now)),
        }
    }

    /// A verifier of the tokens of an issuer, with the keys it publishes (fetched by
    /// [`IssuerKeys::load`], and again when a token names a key it does not have): requires
    /// `iss` to be that issuer.
    pub fn from_issuer(keys: IssuerKeys) -> Self {
        let issuer = keys.issuer().to_owned();
        let mut verifier = Self::with_keys(Vec::new()).issuer(issuer);
        verifier.issuer_keys = Some(keys);
        verifier
    }

    /// The issuer's keys, when they are fetched from it.
    pub fn issuer_keys(&self) -> Option<&IssuerKeys> {
        self.issuer_keys.as_ref()
    }

    /// Adds a key.
    pub fn key(mut self, key: JwtKey) -> Self {
        self.keys.push(key);
        self
    }

    /// Requires the `iss` claim to be `issuer`.
    pub fn issuer(mut self, issuer: impl Into<String>) -> Self {
        self.issuer = Some(issuer.into());
        self
    }

    /// Requires the `aud` claim to be, or to contain, `audience`.
    pub fn audience(mut self, audience: impl Into<String>) -> Self {
        self.audience = Some(audience.into());
        self
    }

    pub(crate) fn default_audience(mut self, audience: &str) -> Self {
        if self.audience.is_none() {
            self.audience = Some(audience.to_owned());
        }
        self
    }

    /// The claim the subject is taken from (default `sub`); it must be a non-empty string.
    pub fn subject_claim(mut self, claim: impl Into<String>) -> Self {
        self.subject_claim = claim.into();
        self
    }

    /// The clock skew allowed on `exp` and `nbf` (default 60 s).
    pub fn leeway(mut self, leeway: Duration) -> Self {
        self.leeway = leeway;
        self
    }

    /// Reads the time `exp` and `nbf` are checked against from `clock` instead of the system
    /// clock: for a trusted time source, or for tests that move time on instead of waiting.
    pub fn clock(mut self, clock: impl Fn() -> SystemTime + Send + Sync + 'static) -> Self {
        self.clock = Clock(Arc::new(clock));
        self
    }

    /// Whether a token must carry `exp` (default: yes; a token without it never expires).
    pub fn require_exp(mut self, required: bool) -> Self {
        self.require_exp = required;
        self
    }

    pub(crate) fn leeway_of(&self) -> Duration {
        self.leeway
    }

    /// Logs a warning for each claim check that is off: a verifier without an audience
    /// accepts tokens the identity provider issued for any other service, one without an
    /// issuer tokens of any issuer its keys verify. Called once, when the HTTP front starts.
    pub(crate) fn warn_about_open_checks(&self) {
        if self.audience.is_none() {
            tracing::warn!(
                "JWTs are accepted without an audience check: a token the identity provider \
                 issued for any other service is accepted too (set an audience, e.g. \
                 `--jwt-audience`)"
            );
        }
        if self.issuer.is_none() {
            tracing::warn!(
                "JWTs are accepted without an issuer check: any issuer whose tokens the keys \
                 verify is accepted (set an issuer, e.g. `--jwt-issuer`)"
            );
        }
    }

    /// Verifies `token` (compact serialization) now.
    pub fn verify(&self, token: &str) -> Result<Identity, AuthFailure> {
        let now = (self.clock.0)()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        self.verify_at(token, now)
    }

    /// Verifies `token` as of `now` (Unix seconds).
    pub(crate) fn verify_at(&self, token: &str, now: f64) -> Result<Identity, AuthFailure> {
        let parts: Vec<&str> = token.split('.').collect();
        let [header_b64, payload_b64, signature_b64] = parts[..] else {
            return Err(AuthFailure::Malformed(if parts.len() == 5 {
                "it is encrypted (JWE), which the proxy does not accept"
            } else {
                "it is not three base64url parts joined by `.`"
            }));
        };
        let header = decode(header_b64)
            .ok_or(AuthFailure::Malformed(
                "its header is not base64url without padding",
            ))
            .and_then(|bytes| {
                crate::strict_json::object(&bytes).ok_or(AuthFailure::Malformed(
                    "its header is not one JSON object with distinct member names",
                ))
            })?;
        let payload = decode(payload_b64).ok_or(AuthFailure::Malformed(
            "its claims are not base64url without padding",
        ))?;
        if decode(signature_b64).is_none() {
            return Err(AuthFailure::Malformed(
                "its signature is not base64url without padding",
            ));
        }
        match header.get("typ") {
            None => {}
            Some(Value::String(typ)) if typ_is_jwt(typ) => {}
            Some(_) => {
                return Err(AuthFailure::Malformed("its `typ` is not `JWT` or `at+jwt`"));
            }
        }
        if header.contains_key("crit") {
            return Err(AuthFailure::Malformed(
                "its header has `crit` extensions, which the proxy does not understand",
            ));
        }
        let alg = match header.get("alg") {
            Some(Value::String(name)) => {
                algorithm(name).ok_or(AuthFailure::UnsupportedAlgorithm)?
            }
            _ => return Err(AuthFailure::Malformed("its header has no string `alg`")),
        };
        let kid = match header.get("kid") {
            None => None,
            Some(Value::String(kid)) => Some(kid.as_str()),
            Some(_) => return Err(AuthFailure::Malformed("its `kid` is not a string")),
        };
        let fetched = self
            .issuer_keys
            .as_ref()
            .map(IssuerKeys::keys)
            .unwrap_or_default();
        let candidates = self
            .keys
            .iter()
            .chain(fetched.iter())
            .filter(|k| k.accepts(alg))
            .filter(|k| match (kid, &k.kid) {
                (Some(wanted), Some(have)) => wanted == have,
                _ => true,
            });
        let mut validation = Validation::new(alg);
        // Claims are checked below, against the verifier's clock.
        validation.required_spec_claims.clear();
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        let mut outcome = Err(AuthFailure::UnknownKey);
        for key in candidates {
            match jsonwebtoken::decode::<serde::de::IgnoredAny>(token, &key.decoding, &validation) {
                Ok(_) => {
                    outcome = Ok(());
                    break;
                }
                Err(err) => {
                    use jsonwebtoken::errors::ErrorKind;
                    outcome = Err(match err.kind() {
                        ErrorKind::Json(_) | ErrorKind::Base64(_) | ErrorKind::Utf8(_) => {
                            AuthFailure::Malformed("its header or claims cannot be read")
                        }
                        ErrorKind::InvalidToken => {
                            AuthFailure::Malformed("its header asks for what the proxy refuses")
                        }
                        // A signature that does not verify, or a key that cannot verify it.
                        _ => AuthFailure::BadSignature,
                    });
                    if !matches!(outcome, Err(AuthFailure::BadSignature)) {
                        break;
                    }
                }
            }
        }
        outcome?;
        let claims = crate::strict_json::object(&payload).ok_or(AuthFailure::Malformed(
            "its claims are not one JSON object with distinct member names",
        ))?;
        self.check_claims(claims, now)
    }

    fn check_claims(&self, claims: Map<String, Value>, now: f64) -> Result<Identity, AuthFailure> {
        let leeway = self.leeway.as_secs_f64();
        let time = |name: &str, malformed: &'static str| -> Result<Option<f64>, AuthFailure> {
            match claims.get(name) {
                None => Ok(None),
                Some(value) => value
                    .as_f64()
                    .map(Some)
                    .ok_or(AuthFailure::Malformed(malformed)),
            }
        };
        match time("exp", "its `exp` is not a number")? {
            Some(exp) if now > exp + leeway => return Err(AuthFailure::Expired("JWT")),
            None if self.require_exp => {
                return Err(AuthFailure::Claims("the JWT has no expiry (`exp`)"));
            }
            _ => {}
        }
        if let Some(nbf) = time("nbf", "its `nbf` is not a number")?
            && now + leeway < nbf
        {
            return Err(AuthFailure::NotYetValid);
        }
        let issuer = match claims.get("iss") {
            None => None,
            Some(Value::String(iss)) => Some(iss.clone()),
            Some(_) => return Err(AuthFailure::Malformed("its `iss` is not a string")),
        };
        if let Some(wanted) = &self.issuer
            && issuer.as_deref() != Some(wanted.as_str())
        {
            return Err(AuthFailure::WrongIssuer);
        }
        if let Some(wanted) = &self.audience {
            let fits = match claims.get("aud") {
                Some(Value::String(aud)) => aud == wanted,
                Some(Value::Array(auds)) => auds.iter().any(|a| a.as_str() == Some(wanted)),
                _ => false,
            };
            if !fits {
                return Err(AuthFailure::WrongAudience);
            }
        }
        let subject = claims
            .get(&self.subject_claim)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or(AuthFailure::Claims("the JWT does not name its subject"))?
            .to_owned();
        Ok(Identity::Jwt {
            subject,
            issuer,
            claims,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn b64(bytes: &[u8]) -> String {
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// An HS256 token over exactly these header and claims bytes.
    fn hs256_raw(header: &str, claims: &str) -> String {
        let signed = format!("{}.{}", b64(header.as_bytes()), b64(claims.as_bytes()));
        sign_hs256(&signed, SECRET)
    }

    fn sign_hs256(signed: &str, secret: &[u8]) -> String {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
        let tag = ring::hmac::sign(&key, signed.as_bytes());
        format!("{signed}.{}", b64(tag.as_ref()))
    }

    fn hs256(header: &Value, claims: &Value) -> String {
        hs256_raw(&header.to_string(), &claims.to_string())
    }

    fn verifier() -> JwtVerifier {
        JwtVerifier::new(JwtKey::hmac(SECRET.to_vec()).unwrap())
    }

    fn fixture(name: &str) -> String {
        format!(
            "{}/tests/fixtures/identity/{name}",
            env!("CARGO_MANIFEST_DIR")
        )
    }

    #[test]
    fn claims_are_checked_with_leeway() {
        let header = serde_json::json!({"alg": "HS256", "typ": "JWT"});
        let at = 1_000_000.0;
        let token = hs256(
            &header,
            &serde_json::json!({"sub": "alice", "exp": 1_000_030}),
        );
        let identity = verifier().verify_at(&token, at).unwrap();
        assert_eq!(identity.subject(), "alice");
        // Expired 30 s ago: within the 60 s leeway, then past it.
        assert!(verifier().verify_at(&token, at + 60.0).is_ok());
        let late = verifier().verify_at(&token, at + 120.0).unwrap_err();
        assert_eq!(late, AuthFailure::Expired("JWT"));
        let early = hs256(
            &header,
            &serde_json::json!({"sub": "a", "exp": 2e6, "nbf": 1_000_500}),
        );
        assert_eq!(
            verifier().verify_at(&early, at),
            Err(AuthFailure::NotYetValid)
        );
        let forever = hs256(&header, &serde_json::json!({"sub": "a"}));
        assert!(matches!(
            verifier().verify_at(&forever, at),
            Err(AuthFailure::Claims(_))
        ));
        assert!(
            verifier()
                .require_exp(false)
                .verify_at(&forever, at)
                .is_ok()
        );
    }

    #[test]
    fn issuer_audience_and_subject_claim() {
        let header = serde_json::json!({"alg": "HS256"});
        let claims = serde_json::json!({
            "sub": "u-1", "email": "a@example.com", "iss": "https://idp", "aud": ["x", "mcp"], "exp": 2e9
        });
        let token = hs256(&header, &claims);
        let v = verifier()
            .issuer("https://idp")
            .audience("mcp")
            .subject_claim("email");
        let identity = v.verify_at(&token, 1e9).unwrap();
        assert_eq!(identity.subject(), "a@example.com");
        assert_eq!(identity.claims().unwrap()["sub"], "u-1");
        let wrong_issuer = verifier().issuer("https://configured-idp");
        assert_eq!(
            wrong_issuer.verify_at(&token, 1e9),
            Err(AuthFailure::WrongIssuer)
        );
        let wrong_audience = verifier().audience("configured-audience");
        assert_eq!(
            wrong_audience.verify_at(&token, 1e9),
            Err(AuthFailure::WrongAudience)
        );
        // The messages say what was wrong, not what the proxy expected.
        for failure in [AuthFailure::WrongIssuer, AuthFailure::WrongAudience] {
            let text = failure.to_string();
            assert!(!text.contains("configured-"), "{text}");
        }
        assert!(
            verifier()
                .subject_claim("name")
                .verify_at(&token, 1e9)
                .is_err()
        );
    }

    #[test]
    fn padded_and_non_canonical_base64_is_malformed() {
        let claims = r#"{"sub":"alice","exp":2000000000}"#;
        // Headers whose lengths leave a partial group, so padding and trailing bits exist.
        let header = r#"{"alg":"HS256"}"#;
        assert_eq!(
            header.len() % 3,
            0,
            "pick a header that pads in the claims instead"
        );
        let token = hs256_raw(header, claims);
        assert!(verifier().verify_at(&token, 1e9).is_ok());
        let parts: Vec<&str> = token.split('.').collect();
        assert_ne!(parts[1].len() % 4, 0, "the claims part needs padding");

        // Padding: the same bytes, `=`-padded, re-signed so only the encoding is wrong.
        let padded_claims = format!("{}{}", parts[1], "=".repeat(4 - parts[1].len() % 4));
        let padded = sign_hs256(&format!("{}.{padded_claims}", parts[0]), SECRET);
        assert!(matches!(
            verifier().verify_at(&padded, 1e9),
            Err(AuthFailure::Malformed(_))
        ));
        let padded_signature = format!("{token}=");
        assert!(matches!(
            verifier().verify_at(&padded_signature, 1e9),
            Err(AuthFailure::Malformed(_))
        ));

        // Trailing bits: the last character changed in bits that encode nothing.
        let last = parts[1].chars().last().unwrap();
        let index = URL_SAFE_ALPHABET.find(last).unwrap();
        let sloppy_last = URL_SAFE_ALPHABET.as_bytes()[index ^ 1] as char;
        let sloppy = format!("{}{sloppy_last}", &parts[1][..parts[1].len() - 1]);
        assert_eq!(
            base64::engine::GeneralPurpose::new(
                &base64::alphabet::URL_SAFE,
                base64::engine::GeneralPurposeConfig::new()
                    .with_decode_allow_trailing_bits(true)
                    .with_decode_padding_mode(base64::engine::DecodePaddingMode::RequireNone),
            )
            .decode(&sloppy)
            .unwrap(),
            claims.as_bytes(),
            "a lenient decoder reads the same claims"
        );
        let non_canonical = sign_hs256(&format!("{}.{sloppy}", parts[0]), SECRET);
        assert!(matches!(
            verifier().verify_at(&non_canonical, 1e9),
            Err(AuthFailure::Malformed(_))
        ));
        // The standard alphabet's `+` and `/` are not base64url.
        assert!(matches!(
            verifier().verify_at(&format!("{}+.{}.{}", parts[0], parts[1], parts[2]), 1e9),
            Err(AuthFailure::Malformed(_))
        ));
    }

    const URL_SAFE_ALPHABET: &str =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

    #[test]
    fn duplicate_members_are_malformed_whatever_wins() {
        let claims = r#"{"sub":"alice","exp":2000000000}"#;
        for header in [
            r#"{"alg":"none","alg":"HS256"}"#,
            r#"{"alg":"HS256","alg":"HS256"}"#,
            r#"{"alg":"HS256","kid":"a","kid":"b"}"#,
            r#"{"alg":"HS256","typ":"JWT","typ":"JWT"}"#,
            r#"{"alg":"HS256","\u0061lg":"none"}"#,
        ] {
            let token = hs256_raw(header, claims);
            assert!(
                matches!(
                    verifier().verify_at(&token, 1e9),
                    Err(AuthFailure::Malformed(_))
                ),
                "{header}"
            );
        }
        let twice = hs256_raw(
            r#"{"alg":"HS256"}"#,
            r#"{"sub":"alice","sub":"root","exp":2000000000}"#,
        );
        assert!(matches!(
            verifier().verify_at(&twice, 1e9),
            Err(AuthFailure::Malformed(_))
        ));
        let nested = hs256_raw(
            r#"{"alg":"HS256"}"#,
            r#"{"sub":"alice","exp":2000000000,"roles":{"a":1,"a":2}}"#,
        );
        assert!(verifier().verify_at(&nested, 1e9).is_err());
    }

    #[test]
    fn typ_is_absent_jwt_or_at_jwt() {
        let claims = serde_json::json!({"sub": "alice", "exp": 2e9});
        for typ in [
            "JWT",
            "jwt",
            "at+jwt",
            "AT+JWT",
            "application/at+jwt",
            "Application/JWT",
        ] {
            let token = hs256(&serde_json::json!({"alg": "HS256", "typ": typ}), &claims);
            assert!(verifier().verify_at(&token, 1e9).is_ok(), "{typ}");
        }
        for typ in [
            serde_json::json!("JOSE"),
            serde_json::json!("dpop+jwt"),
            serde_json::json!("secevent+jwt"),
            serde_json::json!("application/"),
            serde_json::json!(""),
            serde_json::json!(["JWT"]),
            serde_json::json!(null),
        ] {
            let token = hs256(&serde_json::json!({"alg": "HS256", "typ": typ}), &claims);
            assert!(
                matches!(
                    verifier().verify_at(&token, 1e9),
                    Err(AuthFailure::Malformed(_))
                ),
                "{typ}"
            );
        }
    }

    #[test]
    fn unsigned_and_unknown_algorithms_are_refused() {
        let claims = serde_json::json!({"sub": "alice", "exp": 2e9}).to_string();
        for alg in ["none", "None", "NONE", "hs256", "HS1", "RSA-OAEP"] {
            let none = format!(
                "{}.{}.",
                b64(format!(r#"{{"alg":"{alg}"}}"#).as_bytes()),
                b64(claims.as_bytes())
            );
            assert_eq!(
                verifier().verify_at(&none, 1e9),
                Err(AuthFailure::UnsupportedAlgorithm),
                "{alg}"
            );
            let signed = hs256_raw(&format!(r#"{{"alg":"{alg}"}}"#), &claims);
            assert_eq!(
                verifier().verify_at(&signed, 1e9),
                Err(AuthFailure::UnsupportedAlgorithm),
                "{alg}"
            );
        }
        let no_alg = hs256_raw("{}", &claims);
        assert!(matches!(
            verifier().verify_at(&no_alg, 1e9),
            Err(AuthFailure::Malformed(_))
        ));
        let crit = hs256(
            &serde_json::json!({"alg": "HS256", "crit": ["exp"]}),
            &serde_json::json!({"sub": "alice", "exp": 2e9}),
        );
        assert!(verifier().verify_at(&crit, 1e9).is_err());
        assert!(matches!(
            verifier().verify_at("a.b.c.d.e", 1e9),
            Err(AuthFailure::Malformed(_))
        ));
        assert!(verifier().verify_at("", 1e9).is_err());
    }

    #[test]
    fn an_rsa_public_key_is_never_an_hmac_secret() {
        // The classic confusion: sign HS256 with the bytes of the RSA public key the proxy
        // verifies RS256 with (its PEM, or its DER), hoping the verifier uses them as a secret.
        let pem = std::fs::read(fixture("jwt-rsa.pub.pem")).unwrap();
        let der = SubjectPublicKeyInfoDer::from_pem_slice(&pem).unwrap();
        let rsa = JwtVerifier::new(JwtKey::from_pem(&pem).unwrap());
        let claims = serde_json::json!({"sub": "root", "exp": 2e9}).to_string();
        for secret in [&pem[..], der.as_ref()] {
            for alg in ["HS256", "HS384", "HS512"] {
                let signed = format!(
                    "{}.{}",
                    b64(format!(r#"{{"alg":"{alg}","typ":"JWT"}}"#).as_bytes()),
                    b64(claims.as_bytes())
                );
                let token = sign_hs256(&signed, secret);
                assert_eq!(
                    rsa.verify_at(&token, 1e9),
                    Err(AuthFailure::UnknownKey),
                    "{alg}"
                );
            }
        }
        // And an RS256 token is never checked against an HMAC secret.
        let private =
            rustls::pki_types::PrivatePkcs8KeyDer::from_pem_file(fixture("jwt-rsa.key")).unwrap();
        let pair = ring::signature::RsaKeyPair::from_pkcs8(private.secret_pkcs8_der()).unwrap();
        let signed = format!(
            "{}.{}",
            b64(br#"{"alg":"RS256"}"#),
            b64(br#"{"sub":"alice","exp":2000000000}"#)
        );
        let mut signature = vec![0; pair.public().modulus_len()];
        pair.sign(
            &ring::signature::RSA_PKCS1_SHA256,
            &ring::rand::SystemRandom::new(),
            signed.as_bytes(),
            &mut signature,
        )
        .unwrap();
        let rs256 = format!("{signed}.{}", b64(&signature));
        assert_eq!(rsa.verify_at(&rs256, 1e9).unwrap().subject(), "alice");
        assert_eq!(
            verifier().verify_at(&rs256, 1e9),
            Err(AuthFailure::UnknownKey)
        );
    }

    #[test]
    fn tampering_and_wrong_keys_are_bad_signatures() {
        let claims = serde_json::json!({"sub": "alice", "exp": 2e9});
        let token = hs256(&serde_json::json!({"alg": "HS256"}), &claims);
        let mut parts: Vec<&str> = token.split('.').collect();
        let forged = b64(br#"{"sub":"root","exp":2000000000}"#);
        parts[1] = &forged;
        assert_eq!(
            verifier().verify_at(&parts.join("."), 1e9),
            Err(AuthFailure::BadSignature)
        );
        let other = JwtVerifier::new(
            JwtKey::hmac(b"another secret of thirty-two bytes!!".to_vec()).unwrap(),
        );
        assert_eq!(other.verify_at(&token, 1e9), Err(AuthFailure::BadSignature));
    }

    #[test]
    fn kids_pick_keys() {
        let claims = serde_json::json!({"sub": "alice", "exp": 2e9});
        let token = hs256(&serde_json::json!({"alg": "HS256", "kid": "k2"}), &claims);
        let wrong = JwtKey::hmac(b"another secret of thirty-two bytes!!".to_vec()).unwrap();
        let v = JwtVerifier::new(wrong.with_kid("k1"))
            .key(JwtKey::hmac(SECRET.to_vec()).unwrap().with_kid("k2"));
        assert!(v.verify_at(&token, 1e9).is_ok());
        let only_k1 = JwtVerifier::new(JwtKey::hmac(SECRET.to_vec()).unwrap().with_kid("k1"));
        assert_eq!(only_k1.verify_at(&token, 1e9), Err(AuthFailure::UnknownKey));
        let bad_kid = hs256(&serde_json::json!({"alg": "HS256", "kid": 7}), &claims);
        assert!(matches!(
            v.verify_at(&bad_kid, 1e9),
            Err(AuthFailure::Malformed(_))
        ));
    }

    #[test]
    fn keys_are_read_from_pem_and_jwk_sets() {
        let rsa = JwtKey::from_pem_file(fixture("jwt-rsa.pub.pem")).unwrap();
        assert_eq!(
            rsa.algorithms(),
            ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512"]
        );
        let ec = JwtKey::from_pem_file(fixture("jwt-ec.pub.pem")).unwrap();
        assert_eq!(ec.algorithms(), ["ES256"]);
        let jwks = format!(
            r#"{{"keys": [{{"kty": "oct", "kid": "h", "alg": "HS256", "k": "{}"}},
                          {{"kty": "EC", "crv": "P-256", "x": "{x}", "y": "{x}"}}]}}"#,
            b64(SECRET),
            x = b64(&[7; 32]),
        );
        let keys = JwtKey::from_jwks(&jwks).unwrap();
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[0].algorithms(), ["HS256"]);
        assert_eq!(keys[1].algorithms(), ["ES256"]);
        let err = JwtKey::from_jwks(r#"{"keys": [{"kty": "oct", "k": "AA"}]}"#).unwrap_err();
        assert!(err.to_string().contains("key 0"), "{err}");
        let padded = format!(r#"{{"kty": "oct", "k": "{}="}}"#, b64(&SECRET[..31]));
        assert!(JwtKey::from_jwk(&serde_json::from_str(&padded).unwrap()).is_err());
        let twice = r#"{"keys": [], "keys": []}"#;
        assert!(JwtKey::from_jwks(twice).is_err());
        let small_rsa = format!(
            r#"{{"kty": "RSA", "n": "{}", "e": "AQAB"}}"#,
            b64(&[0xff; 128])
        );
        let err = JwtKey::from_jwk(&serde_json::from_str(&small_rsa).unwrap()).unwrap_err();
        assert!(err.to_string().contains("2048"), "{err}");
    }
}
