//! The proxy's entry: every line a client sends is read by `Message::parse_validated` (a fast
//! envelope scanner, serde_json as the fallback, and the whole line checked as JSON), and a
//! request's id is spliced into the original bytes. Checks, for any input:
//! - nothing panics;
//! - whatever is accepted is JSON, and the method read agrees with serde_json's;
//! - splicing a new id into a request yields a request with that id, the same method and the
//!   same params.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_middleware::jsonrpc::{Message, range_in, splice};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(message) = Message::parse_validated(line) else {
        return;
    };
    serde_json::from_str::<serde::de::IgnoredAny>(line).expect("the entry accepted invalid JSON");
    // Syntax allows lone surrogate escapes (`\udddd`), which a `Value` refuses to decode.
    let Ok(parsed) = serde_json::from_str::<Value>(line) else {
        return;
    };
    if let Message::Request { method, .. } | Message::Notification { method, .. } = &message {
        assert_eq!(parsed["method"].as_str(), Some(method.as_ref()), "{parsed}");
    }
    if let Message::Request { id, method, params } = message {
        let spliced = splice(line, &[(range_in(line, id), "4242")]);
        match Message::parse_validated(&spliced) {
            Ok(Message::Request {
                id: new_id,
                method: new_method,
                params: new_params,
            }) => {
                assert_eq!(new_id, "4242");
                assert_eq!(new_method, method);
                assert_eq!(
                    new_params.map(|p| serde_json::from_str::<Value>(p).ok()),
                    params.map(|p| serde_json::from_str::<Value>(p).ok())
                );
            }
            other => panic!("splicing the id broke the request: {other:?} from {parsed}"),
        }
    }
});
