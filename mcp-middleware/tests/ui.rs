//! What `#[proxy_model]` accepts and how it refuses the rest.
//!
//! `ui/pass/*.rs` must compile and run (each `main` checks the model's descriptor);
//! `ui/fail/*.rs` must fail to compile with exactly the diagnostics in the `.stderr` beside them.
//! Cross-crate cases extend the models of `tests/ui-parents` (`mcp_middleware_ui_parents`).
//!
//! After changing a diagnostic on purpose, regenerate with `TRYBUILD=overwrite cargo test -p
//! mcp-middleware --test ui` and read every changed `.stderr`.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/pass/*.rs");
    cases.compile_fail("tests/ui/fail/*.rs");
}
