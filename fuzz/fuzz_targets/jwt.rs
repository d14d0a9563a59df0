//! JWT verification (`JwtVerifier::verify`) on any input. Input starting with a NUL byte is a
//! token as a client sends it; any other input is `HEADER\nCLAIMS`, JSON text signed here with
//! the verifier's HMAC secret, so the fuzzer reaches past the signature into header and claims
//! reading. Checks, for any input:
//! - nothing panics;
//! - an accepted token is three canonical base64url parts (each re-encodes to itself);
//! - its header and claims are JSON objects in which no member name appears twice, so a
//!   first-wins and a last-wins reader see the same token;
//! - its `alg` is the HMAC one the key verifies, its `typ` absent, `JWT` or `at+jwt`, its
//!   `exp` not past (with the leeway) on the verifier's clock.
#![no_main]

use std::time::{Duration, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use libfuzzer_sys::fuzz_target;
use mcp_middleware::auth::{JwtKey, JwtVerifier};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::Value;

const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";
const NOW: u64 = 1_000_000_000;

/// Every member of a JSON object in order, duplicates kept (what neither reader hides).
fn members(bytes: &[u8]) -> Option<Vec<(String, Value)>> {
    struct Members;
    impl<'de> Visitor<'de> for Members {
        type Value = Vec<(String, Value)>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(entry) = map.next_entry::<String, Value>()? {
                out.push(entry);
            }
            Ok(out)
        }
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let out = (&mut de).deserialize_map(Members).ok()?;
    de.end().ok()?;
    Some(out)
}

fn no_duplicates(members: &[(String, Value)]) -> bool {
    let mut names: Vec<&str> = members.iter().map(|(n, _)| n.as_str()).collect();
    names.sort_unstable();
    names.windows(2).all(|w| w[0] != w[1])
}

fn sign(header: &[u8], claims: &[u8]) -> String {
    let signed = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header),
        URL_SAFE_NO_PAD.encode(claims)
    );
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, SECRET);
    let tag = ring::hmac::sign(&key, signed.as_bytes());
    format!("{signed}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
}

fuzz_target!(|data: &[u8]| {
    let token = match data.split_first() {
        Some((0, rest)) => match std::str::from_utf8(rest) {
            Ok(text) => text.to_owned(),
            Err(_) => return,
        },
        _ => {
            let split = data.iter().position(|b| *b == b'\n').unwrap_or(data.len());
            let (header, claims) = data.split_at(split);
            sign(header, claims.get(1..).unwrap_or_default())
        }
    };
    let verifier = JwtVerifier::new(JwtKey::hmac(SECRET.to_vec()).expect("a good secret"))
        .clock(|| UNIX_EPOCH + Duration::from_secs(NOW));
    let Ok(identity) = verifier.verify(&token) else {
        return;
    };
    let parts: Vec<&str> = token.split('.').collect();
    assert_eq!(parts.len(), 3, "{token}");
    let decoded: Vec<Vec<u8>> = parts
        .iter()
        .map(|part| {
            let bytes = URL_SAFE_NO_PAD.decode(part).expect("accepted parts are base64url");
            assert_eq!(&URL_SAFE_NO_PAD.encode(&bytes), part, "non-canonical base64url");
            bytes
        })
        .collect();
    let header = members(&decoded[0]).expect("an accepted header is a JSON object");
    let claims = members(&decoded[1]).expect("accepted claims are a JSON object");
    assert!(no_duplicates(&header), "duplicate header member accepted: {header:?}");
    assert!(no_duplicates(&claims), "duplicate claim accepted: {claims:?}");
    let get = |members: &[(String, Value)], name: &str| {
        members.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone())
    };
    assert!(
        matches!(get(&header, "alg"), Some(Value::String(alg)) if alg.starts_with("HS")),
        "{header:?}"
    );
    match get(&header, "typ") {
        None => {}
        Some(Value::String(typ)) => {
            let typ = typ.to_ascii_lowercase();
            let typ = typ.strip_prefix("application/").unwrap_or(&typ);
            assert!(typ == "jwt" || typ == "at+jwt", "typ {typ} accepted");
        }
        Some(other) => panic!("typ {other} accepted"),
    }
    let exp = get(&claims, "exp").and_then(|v| v.as_f64()).expect("exp is required");
    assert!(exp + 60.0 >= NOW as f64, "expired token accepted: {exp}");
    assert!(!identity.subject().is_empty());
});
