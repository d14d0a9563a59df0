//! [`JwtVerifier`]: JSON Web Tokens (RFC 7519) verified against configured keys.
//!
//! The checks, in order: the compact form (three base64url parts; encrypted tokens are
//! refused), the header (`alg` other than `none`, no `crit` extension), a configured key that
//! fits the header's `kid` and `alg` (the key decides which algorithms it accepts, so an RSA
//! public key can never be used as an HMAC secret), the signature, then the claims: `exp`
//! (required unless turned off), `nbf`, `iss` and `aud` when configured, and the subject
//! claim. Times allow [`JwtVerifier::leeway`] of clock skew.
//!
//! Signatures are checked with `ring`: HS256/384/512, RS256/384/512, PS256/384/512, ES256,
//! ES384 and EdDSA (Ed25519).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};
use rustls::pki_types::SubjectPublicKeyInfoDer;
use rustls::pki_types::pem::PemObject;
use serde_json::{Map, Value};

use super::der::{self, OID_EC, OID_ED25519, OID_P256, OID_P384, OID_RSA};
use super::{AuthError, AuthFailure};
use crate::context::Identity;

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
    material: Material,
    /// The one algorithm the key is for, when its JWK says so.
    only: Option<Algorithm>,
}

#[derive(Clone)]
enum Material {
    Hmac(Vec<u8>),
    /// PKCS#1 `RSAPublicKey` DER.
    Rsa(Vec<u8>),
    /// Modulus and exponent, big-endian (from a JWK).
    RsaComponents {
        n: Vec<u8>,
        e: Vec<u8>,
    },
    /// An uncompressed point.
    P256(Vec<u8>),
    P384(Vec<u8>),
    Ed25519(Vec<u8>),
}

impl std::fmt::Debug for JwtKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.material {
            Material::Hmac(_) => "hmac",
            Material::Rsa(_) | Material::RsaComponents { .. } => "rsa",
            Material::P256(_) => "ec-p256",
            Material::P384(_) => "ec-p384",
            Material::Ed25519(_) => "ed25519",
        };
        f.debug_struct("JwtKey")
            .field("kid", &self.kid)
            .field("kind", &kind)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Algorithm {
    Hs256,
    Hs384,
    Hs512,
    Rs256,
    Rs384,
    Rs512,
    Ps256,
    Ps384,
    Ps512,
    Es256,
    Es384,
    EdDsa,
}

const ALGORITHMS: [(&str, Algorithm); 12] = [
    ("HS256", Algorithm::Hs256),
    ("HS384", Algorithm::Hs384),
    ("HS512", Algorithm::Hs512),
    ("RS256", Algorithm::Rs256),
    ("RS384", Algorithm::Rs384),
    ("RS512", Algorithm::Rs512),
    ("PS256", Algorithm::Ps256),
    ("PS384", Algorithm::Ps384),
    ("PS512", Algorithm::Ps512),
    ("ES256", Algorithm::Es256),
    ("ES384", Algorithm::Es384),
    ("EdDSA", Algorithm::EdDsa),
];

impl Algorithm {
    fn parse(name: &str) -> Option<Self> {
        ALGORITHMS.iter().find(|(n, _)| *n == name).map(|(_, a)| *a)
    }

    fn name(self) -> &'static str {
        ALGORITHMS
            .iter()
            .find(|(_, a)| *a == self)
            .map_or("?", |(n, _)| n)
    }
}

/// The smallest HMAC secret accepted, in bytes (RFC 7518 §3.2: at least the hash's size).
const MIN_HMAC_SECRET: usize = 32;

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
        Ok(Self::new(Material::Hmac(secret)))
    }

    /// A public key in PEM (`-----BEGIN PUBLIC KEY-----`, the `SubjectPublicKeyInfo` that
    /// `openssl pkey -pubout` writes): RSA (for RS* and PS*), EC P-256 (ES256), EC P-384
    /// (ES384) or Ed25519 (EdDSA).
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
        let info = der::public_key_info(der).ok_or_else(|| {
            AuthError::Key("the public key is not a DER SubjectPublicKeyInfo".to_owned())
        })?;
        let material = match (info.algorithm.as_slice(), info.parameter.as_deref()) {
            (OID_RSA, _) => Material::Rsa(info.key),
            (OID_EC, Some(OID_P256)) => Material::P256(info.key),
            (OID_EC, Some(OID_P384)) => Material::P384(info.key),
            (OID_EC, _) => {
                return Err(AuthError::Key(
                    "only P-256 and P-384 EC keys are supported".to_owned(),
                ));
            }
            (OID_ED25519, _) => Material::Ed25519(info.key),
            _ => {
                return Err(AuthError::Key(
                    "the public key is not RSA, EC or Ed25519".to_owned(),
                ));
            }
        };
        Ok(Self::new(material))
    }

    /// A key from a JWK (RFC 7517): `kty` `oct` (`k`), `RSA` (`n`, `e`), `EC` (`crv` P-256 or
    /// P-384, `x`, `y`) or `OKP` (`crv` Ed25519, `x`); its `kid` and `alg` are kept.
    pub fn from_jwk(jwk: &Value) -> Result<Self, AuthError> {
        let field = |name: &str| -> Result<Vec<u8>, AuthError> {
            let text = jwk
                .get(name)
                .and_then(Value::as_str)
                .ok_or_else(|| AuthError::Key(format!("the JWK has no string member `{name}`")))?;
            decode(text)
                .ok_or_else(|| AuthError::Key(format!("the JWK's `{name}` is not base64url")))
        };
        let kty = jwk.get("kty").and_then(Value::as_str).unwrap_or_default();
        let crv = jwk.get("crv").and_then(Value::as_str).unwrap_or_default();
        let mut key = match (kty, crv) {
            ("oct", _) => Self::hmac(field("k")?)?,
            ("RSA", _) => Self::new(Material::RsaComponents {
                n: field("n")?,
                e: field("e")?,
            }),
            ("EC", "P-256" | "P-384") => {
                let (x, y) = (field("x")?, field("y")?);
                let mut point = vec![0x04];
                point.extend_from_slice(&x);
                point.extend_from_slice(&y);
                Self::new(if crv == "P-256" {
                    Material::P256(point)
                } else {
                    Material::P384(point)
                })
            }
            ("OKP", "Ed25519") => Self::new(Material::Ed25519(field("x")?)),
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
            let alg = Algorithm::parse(alg)
                .filter(|a| key.accepts(*a))
                .ok_or_else(|| {
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
            let value: Value = serde_json::from_str(&json)
                .map_err(|err| AuthError::Key(format!("not JSON: {err}")).in_file(path))?;
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
        let set: Value = serde_json::from_str(json)
            .map_err(|err| AuthError::Key(format!("the JWK set is not JSON: {err}")))?;
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

    fn new(material: Material) -> Self {
        Self {
            kid: None,
            material,
            only: None,
        }
    }

    fn accepts(&self, alg: Algorithm) -> bool {
        use Algorithm::*;
        if self.only.is_some_and(|only| only != alg) {
            return false;
        }
        match self.material {
            Material::Hmac(_) => matches!(alg, Hs256 | Hs384 | Hs512),
            Material::Rsa(_) | Material::RsaComponents { .. } => {
                matches!(alg, Rs256 | Rs384 | Rs512 | Ps256 | Ps384 | Ps512)
            }
            Material::P256(_) => alg == Es256,
            Material::P384(_) => alg == Es384,
            Material::Ed25519(_) => alg == EdDsa,
        }
    }

    fn verify(&self, alg: Algorithm, message: &[u8], sig: &[u8]) -> bool {
        use Algorithm::*;
        let rsa: &signature::RsaParameters = match alg {
            Rs256 => &signature::RSA_PKCS1_2048_8192_SHA256,
            Rs384 => &signature::RSA_PKCS1_2048_8192_SHA384,
            Rs512 => &signature::RSA_PKCS1_2048_8192_SHA512,
            Ps256 => &signature::RSA_PSS_2048_8192_SHA256,
            Ps384 => &signature::RSA_PSS_2048_8192_SHA384,
            Ps512 => &signature::RSA_PSS_2048_8192_SHA512,
            _ => &signature::RSA_PKCS1_2048_8192_SHA256,
        };
        match &self.material {
            Material::Hmac(secret) => {
                let algorithm = match alg {
                    Hs256 => ring::hmac::HMAC_SHA256,
                    Hs384 => ring::hmac::HMAC_SHA384,
                    Hs512 => ring::hmac::HMAC_SHA512,
                    _ => return false,
                };
                let key = ring::hmac::Key::new(algorithm, secret);
                ring::hmac::verify(&key, message, sig).is_ok()
            }
            Material::Rsa(der) => UnparsedPublicKey::new(rsa, der)
                .verify(message, sig)
                .is_ok(),
            Material::RsaComponents { n, e } => RsaPublicKeyComponents { n, e }
                .verify(rsa, message, sig)
                .is_ok(),
            Material::P256(point) => {
                UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point)
                    .verify(message, sig)
                    .is_ok()
            }
            Material::P384(point) => {
                UnparsedPublicKey::new(&signature::ECDSA_P384_SHA384_FIXED, point)
                    .verify(message, sig)
                    .is_ok()
            }
            Material::Ed25519(key) => UnparsedPublicKey::new(&signature::ED25519, key)
                .verify(message, sig)
                .is_ok(),
        }
    }
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
    /// allows 60 s of clock skew and checks neither issuer nor audience.
    pub fn new(key: JwtKey) -> Self {
        Self::with_keys(vec![key])
    }

    /// A verifier trying several keys (a JWK set: see [`JwtKey::from_jwks`]).
    pub fn with_keys(keys: Vec<JwtKey>) -> Self {
        Self {
            keys,
            issuer: None,
            audience: None,
            subject_claim: "sub".to_owned(),
            leeway: Duration::from_secs(60),
            require_exp: true,
            clock: Clock(Arc::new(SystemTime::now)),
        }
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

    /// Verifies `token` (compact serialization) now.
    pub fn verify(&self, token: &str) -> Result<Identity, AuthFailure> {
        let now = (self.clock.0)()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        self.verify_at(token, now)
    }

    /// Verifies `token` as of `now` (Unix seconds).
    pub(crate) fn verify_at(&self, token: &str, now: f64) -> Result<Identity, AuthFailure> {
        let malformed = |why: &str| AuthFailure::Malformed(format!("the JWT {why}"));
        let mut parts = token.split('.');
        let (Some(header_b64), Some(payload_b64), Some(sig_b64)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Err(malformed("is not three base64url parts joined by `.`"));
        };
        if parts.next().is_some() {
            return Err(malformed(
                "has more than three parts (encrypted JWTs are not supported)",
            ));
        }
        let header: Map<String, Value> = decode(header_b64)
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .ok_or_else(|| malformed("header is not base64url JSON"))?;
        let alg_name = header
            .get("alg")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if alg_name.is_empty() || alg_name.eq_ignore_ascii_case("none") {
            return Err(AuthFailure::Signature(
                "the JWT is not signed (`alg` is missing or `none`)".to_owned(),
            ));
        }
        if header.contains_key("crit") {
            return Err(malformed(
                "header has `crit` extensions, which the proxy does not understand",
            ));
        }
        let alg = Algorithm::parse(alg_name).ok_or_else(|| {
            AuthFailure::Signature(format!("the JWT's `alg` `{alg_name}` is not supported"))
        })?;
        let kid = header.get("kid").and_then(Value::as_str);
        let candidates: Vec<&JwtKey> = self
            .keys
            .iter()
            .filter(|k| k.accepts(alg))
            .filter(|k| match (kid, &k.kid) {
                (Some(wanted), Some(have)) => wanted == have,
                _ => true,
            })
            .collect();
        if candidates.is_empty() {
            return Err(AuthFailure::Signature(format!(
                "no configured key verifies `{}`{}",
                alg.name(),
                kid.map(|k| format!(" tokens with `kid` `{k}`"))
                    .unwrap_or_else(|| " tokens".to_owned())
            )));
        }
        let signature = decode(sig_b64).ok_or_else(|| malformed("signature is not base64url"))?;
        let signed = &token.as_bytes()[..header_b64.len() + 1 + payload_b64.len()];
        if !candidates.iter().any(|k| k.verify(alg, signed, &signature)) {
            return Err(AuthFailure::Signature(
                "the JWT's signature does not verify with the configured key".to_owned(),
            ));
        }
        let claims: Map<String, Value> = decode(payload_b64)
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .ok_or_else(|| malformed("payload is not base64url JSON"))?;
        self.check_claims(claims, now)
    }

    fn check_claims(&self, claims: Map<String, Value>, now: f64) -> Result<Identity, AuthFailure> {
        let leeway = self.leeway.as_secs_f64();
        let time = |name: &str| -> Result<Option<f64>, AuthFailure> {
            match claims.get(name) {
                None => Ok(None),
                Some(value) => value.as_f64().map(Some).ok_or_else(|| {
                    AuthFailure::Claims(format!("the JWT's `{name}` is not a number"))
                }),
            }
        };
        match time("exp")? {
            Some(exp) if now > exp + leeway => {
                return Err(AuthFailure::Expired(format!(
                    "the JWT expired {} s ago",
                    (now - exp).round() as i64
                )));
            }
            None if self.require_exp => {
                return Err(AuthFailure::Claims(
                    "the JWT has no `exp` (expiry), which the proxy requires".to_owned(),
                ));
            }
            _ => {}
        }
        if let Some(nbf) = time("nbf")?
            && now + leeway < nbf
        {
            return Err(AuthFailure::NotYetValid(format!(
                "the JWT is not valid for another {} s (`nbf`)",
                (nbf - now).round() as i64
            )));
        }
        let issuer = claims.get("iss").and_then(Value::as_str).map(str::to_owned);
        if let Some(wanted) = &self.issuer
            && issuer.as_deref() != Some(wanted.as_str())
        {
            return Err(AuthFailure::Claims(format!(
                "the JWT's issuer is {}, not `{wanted}`",
                issuer
                    .as_deref()
                    .map_or_else(|| "missing".to_owned(), |i| format!("`{i}`"))
            )));
        }
        if let Some(wanted) = &self.audience {
            let fits = match claims.get("aud") {
                Some(Value::String(aud)) => aud == wanted,
                Some(Value::Array(auds)) => auds.iter().any(|a| a.as_str() == Some(wanted)),
                _ => false,
            };
            if !fits {
                return Err(AuthFailure::Claims(format!(
                    "the JWT's audience does not include `{wanted}`"
                )));
            }
        }
        let subject = claims
            .get(&self.subject_claim)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                AuthFailure::Claims(format!(
                    "the JWT has no non-empty string claim `{}` to name its subject",
                    self.subject_claim
                ))
            })?
            .to_owned();
        Ok(Identity::Jwt {
            subject,
            issuer,
            claims,
        })
    }
}

/// Strict base64url without padding (RFC 7515 §2); `None` on any other character.
pub(crate) fn decode(text: &str) -> Option<Vec<u8>> {
    let text = text.trim_end_matches('=');
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for byte in text.bytes() {
        let value = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    // A lone trailing character carries fewer than 8 bits: not a valid encoding.
    (text.len() % 4 != 1).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn encode(bytes: &[u8]) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let b = [
                chunk[0],
                *chunk.get(1).unwrap_or(&0),
                *chunk.get(2).unwrap_or(&0),
            ];
            let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
            for i in 0..=chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            }
        }
        out
    }

    fn hs256(header: &Value, claims: &Value) -> String {
        let signed = format!(
            "{}.{}",
            encode(header.to_string().as_bytes()),
            encode(claims.to_string().as_bytes())
        );
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, SECRET);
        let tag = ring::hmac::sign(&key, signed.as_bytes());
        format!("{signed}.{}", encode(tag.as_ref()))
    }

    fn verifier() -> JwtVerifier {
        JwtVerifier::new(JwtKey::hmac(SECRET.to_vec()).unwrap())
    }

    #[test]
    fn base64url_round_trips() {
        for len in 0..20 {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            assert_eq!(decode(&encode(&bytes)).as_deref(), Some(&bytes[..]));
        }
        assert_eq!(decode("a+b/"), None);
        assert_eq!(decode("abcde"), None);
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
        assert!(matches!(late, AuthFailure::Expired(_)), "{late}");
        let early = hs256(
            &header,
            &serde_json::json!({"sub": "a", "exp": 2e6, "nbf": 1_000_500}),
        );
        assert!(matches!(
            verifier().verify_at(&early, at),
            Err(AuthFailure::NotYetValid(_))
        ));
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
        assert!(verifier().issuer("other").verify_at(&token, 1e9).is_err());
        assert!(verifier().audience("nope").verify_at(&token, 1e9).is_err());
        assert!(
            verifier()
                .subject_claim("name")
                .verify_at(&token, 1e9)
                .is_err()
        );
    }

    #[test]
    fn unsigned_confused_and_tampered_tokens_are_refused() {
        let claims = serde_json::json!({"sub": "alice", "exp": 2e9});
        let none = format!(
            "{}.{}.",
            encode(br#"{"alg":"none"}"#),
            encode(claims.to_string().as_bytes())
        );
        assert!(matches!(
            verifier().verify_at(&none, 1e9),
            Err(AuthFailure::Signature(_))
        ));
        // An HMAC token checked against an RSA key is never tried with the key's bytes.
        let token = hs256(&serde_json::json!({"alg": "HS256"}), &claims);
        let rsa_only = JwtVerifier::new(JwtKey::new(Material::Rsa(SECRET.to_vec())));
        let err = rsa_only.verify_at(&token, 1e9).unwrap_err().to_string();
        assert!(err.contains("no configured key verifies `HS256`"), "{err}");
        let mut parts: Vec<&str> = token.split('.').collect();
        let forged = encode(br#"{"sub":"root","exp":2000000000}"#);
        parts[1] = &forged;
        assert!(matches!(
            verifier().verify_at(&parts.join("."), 1e9),
            Err(AuthFailure::Signature(_))
        ));
        let crit = hs256(&serde_json::json!({"alg": "HS256", "crit": ["x"]}), &claims);
        assert!(verifier().verify_at(&crit, 1e9).is_err());
        assert!(verifier().verify_at("a.b.c.d.e", 1e9).is_err());
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
        assert!(only_k1.verify_at(&token, 1e9).is_err());
    }

    #[test]
    fn jwks_are_read() {
        let jwks = format!(
            r#"{{"keys": [{{"kty": "oct", "kid": "h", "alg": "HS256", "k": "{}"}},
                          {{"kty": "EC", "crv": "P-256", "x": "AA", "y": "AA"}}]}}"#,
            encode(SECRET)
        );
        let keys = JwtKey::from_jwks(&jwks).unwrap();
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[0].algorithms(), ["HS256"]);
        assert_eq!(keys[1].algorithms(), ["ES256"]);
        let err = JwtKey::from_jwks(r#"{"keys": [{"kty": "oct", "k": "AA"}]}"#).unwrap_err();
        assert!(err.to_string().contains("key 0"), "{err}");
    }
}
