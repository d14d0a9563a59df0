//! Client certificate reading (`CertificateInfo::from_der`, what a TLS client's certificate
//! goes through before it becomes an identity) on any bytes. Checks, for any input:
//! - nothing panics;
//! - what is read becomes a principal whose parts decode back to exactly the issuer and
//!   subject names read (the principal syntax loses nothing).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_middleware::Identity;
use mcp_middleware::auth::CertificateInfo;

fuzz_target!(|data: &[u8]| {
    let Ok(info) = CertificateInfo::from_der(data) else {
        return;
    };
    let identity = Identity::Certificate {
        subject: info.common_name.clone().unwrap_or_else(|| info.subject.clone()),
        distinguished_name: info.subject.clone(),
        issuer: info.issuer.clone(),
    };
    let principal = identity.principal();
    let parts: Vec<String> = principal
        .split(':')
        .map(|part| {
            percent_encoding::percent_decode_str(part)
                .decode_utf8()
                .expect("principal parts are percent-encoded UTF-8")
                .into_owned()
        })
        .collect();
    assert_eq!(
        parts,
        ["certificate", info.issuer.as_str(), info.subject.as_str()],
        "{principal}"
    );
});
