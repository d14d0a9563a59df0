//! The shared store's record envelope (`StoreKey::open`: what a replica reads back from Redis,
//! which anyone with access to Redis could have written) on any input. The input is
//! `KEY\nFIELD\nSTORED`; an input whose STORED starts with `!` has the rest sealed here first
//! (under KEY and FIELD), so the fuzzer reaches past the tag into the payload. Checks, for any
//! input:
//! - nothing panics;
//! - a record opens only under the key and field it was sealed for, to exactly its payload,
//!   and sealing that payload again gives the same stored text (one record per payload);
//! - a record whose payload is changed by one byte, or moved to another field, is refused;
//! - a session name is 64 lowercase hex digits and holds nothing of the id.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_middleware::shared_store::{RECORD_PREFIX, StoreKey};

const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut parts = text.splitn(3, '\n');
    let (Some(key), Some(field), Some(stored)) = (parts.next(), parts.next(), parts.next()) else {
        return;
    };
    let Ok(store) = StoreKey::from_secret(SECRET) else {
        panic!("a 32-byte secret is a key");
    };
    let sealed;
    let stored = match stored.strip_prefix('!') {
        Some(payload) => {
            sealed = store.seal(key, field, payload);
            sealed.as_str()
        }
        None => stored,
    };
    let Ok(payload) = store.open(key, field, stored) else {
        return;
    };
    assert!(stored.starts_with(RECORD_PREFIX));
    assert!(stored.ends_with(payload));
    assert_eq!(
        store.seal(key, field, payload),
        stored,
        "one record per payload"
    );
    let other_field = format!("{field}x");
    assert!(
        store.open(key, &other_field, stored).is_err(),
        "moved to another field"
    );
    let mut changed = stored.to_owned();
    changed.push('x');
    assert!(
        store.open(key, field, &changed).is_err(),
        "a payload changed"
    );
    // Whatever the payload, reading it as JSON never panics.
    let _ = serde_json::from_str::<serde_json::Value>(payload);
    let name = store.name(payload);
    assert_eq!(name.len(), 64);
    assert!(
        name.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    );
});
