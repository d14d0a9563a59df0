//! Project YAML loading (`mcpctl apply -f`): any text either loads or is refused with a located
//! error; nothing panics, nothing hangs. (`parse_documents` turns a panic of the YAML library
//! into an error, so the panic hook that would abort the fuzzer is silenced for the call.)
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let _ = mcpctl::store::parse::parse_documents("fuzz.yaml", text);
        std::panic::set_hook(hook);
    }
});
