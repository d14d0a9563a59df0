//! The admin API's request parsing (`mcpctl serve --admin-listen`): the login form and query
//! parameters (`form_value`) and `POST /api/apply` bodies (`parse_apply_body`), on any bytes.
//! The first byte picks the body's `Content-Type` (YAML, JSON, JSON with a charset, or one the
//! API refuses); the rest is the body, and, read as text, a form. Checks, for any input:
//! - nothing panics (the YAML reader's panics are turned into errors, so the panic hook that
//!   would abort the fuzzer is silenced for the call, as in `project_yaml`);
//! - an accepted body holds at least one resource; a refused one says why, per document;
//! - a refused media type is refused whatever the body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpctl::admin_request::{ApplyBodyError, form_value, parse_apply_body};

const CONTENT_TYPES: [&str; 4] = [
    "application/yaml",
    "application/json",
    "application/json; charset=utf-8",
    "text/plain",
];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let content_type = CONTENT_TYPES[usize::from(selector) % CONTENT_TYPES.len()];
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let parsed = parse_apply_body(content_type, body);
    std::panic::set_hook(hook);
    match &parsed {
        Ok(resources) => assert!(!resources.is_empty(), "an accepted body holds resources"),
        Err(ApplyBodyError::UnsupportedMediaType) => {
            assert_eq!(
                content_type, "text/plain",
                "only the refused type is refused"
            )
        }
        Err(ApplyBodyError::Documents(problems)) => {
            assert!(!problems.is_empty(), "a refusal says why");
            assert!(problems.iter().all(|p| p["message"].is_string()));
        }
    }
    if content_type == "text/plain" {
        assert!(matches!(parsed, Err(ApplyBodyError::UnsupportedMediaType)));
    }
    let text = String::from_utf8_lossy(body);
    for name in ["token", "tail", "follow", ""] {
        let _ = form_value(&text, name);
    }
});
