//! Project YAML loading (`mcpctl apply -f`): any text either loads or is refused with a located
//! error; nothing panics, nothing hangs.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = mcpctl::store::parse::parse_documents("fuzz.yaml", text);
    }
});
