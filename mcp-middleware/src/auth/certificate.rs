//! [`CertificateInfo`]: what the identity code reads from a client certificate (its subject,
//! its issuer and the end of its validity), parsed with `x509-cert`.
//!
//! rustls has verified the certificate's chain before it gets here; this only reads names.

use x509_cert::Certificate;
use x509_cert::der::oid::ObjectIdentifier;
use x509_cert::der::{Decode, Tag, Tagged};
use x509_cert::ext::pkix::name::DirectoryString;
use x509_cert::name::Name;

/// `id-at-commonName` (2.5.4.3).
const COMMON_NAME: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.4.3");

/// The subject, issuer and validity end of a DER X.509 certificate.
///
/// ```
/// use mcp_middleware::auth::CertificateInfo;
///
/// assert!(CertificateInfo::from_der(b"not a certificate").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CertificateInfo {
    /// The subject's common name (the last CN, as the most specific), if it has one that is
    /// a string.
    pub common_name: Option<String>,
    /// The subject as an RFC 4514 string (`CN=alice,O=Example`).
    pub subject: String,
    /// The issuer as an RFC 4514 string.
    pub issuer: String,
    /// The end of the validity period (`notAfter`), in seconds since the Unix epoch.
    pub not_after: i64,
}

/// A certificate that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the certificate is not DER X.509: {0}")]
pub struct CertificateError(String);

impl CertificateInfo {
    /// Reads a DER certificate (the whole input, nothing after it).
    pub fn from_der(der: &[u8]) -> Result<Self, CertificateError> {
        let certificate =
            Certificate::from_der(der).map_err(|err| CertificateError(err.to_string()))?;
        let tbs = certificate.tbs_certificate();
        let not_after = tbs.validity().not_after.to_unix_duration().as_secs();
        Ok(Self {
            common_name: common_name(tbs.subject()),
            subject: tbs.subject().to_string(),
            issuer: tbs.issuer().to_string(),
            not_after: i64::try_from(not_after).unwrap_or(i64::MAX),
        })
    }
}

/// The last common name of `name` that is a directory string.
fn common_name(name: &Name) -> Option<String> {
    name.iter()
        .filter(|attribute| attribute.oid == COMMON_NAME)
        .filter_map(|attribute| {
            // IA5String is not a DirectoryString, but some issuers write CNs with it.
            if attribute.value.tag() == Tag::Ia5String {
                return std::str::from_utf8(attribute.value.value())
                    .ok()
                    .map(str::to_owned);
            }
            DirectoryString::try_from(&attribute.value)
                .ok()
                .map(|text| text.value().into_owned())
        })
        .last()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;

    fn fixture(name: &str) -> Vec<u8> {
        let path = format!(
            "{}/tests/fixtures/identity/{name}.pem",
            env!("CARGO_MANIFEST_DIR")
        );
        CertificateDer::from_pem_file(&path)
            .unwrap_or_else(|err| panic!("{path}: {err}"))
            .to_vec()
    }

    #[test]
    fn subjects_issuers_and_expiry_are_read() {
        let alice = CertificateInfo::from_der(&fixture("alice")).unwrap();
        assert_eq!(alice.common_name.as_deref(), Some("alice"));
        assert_eq!(alice.subject, "CN=alice,O=Example Org");
        assert_eq!(alice.issuer, "CN=mcp-middleware test CA");
        // Issued for 100 years from 2026.
        assert!(alice.not_after > 4_000_000_000, "{}", alice.not_after);
        let mallory = CertificateInfo::from_der(&fixture("mallory")).unwrap();
        assert_eq!(mallory.issuer, "CN=rogue test CA");
    }

    #[test]
    fn the_same_common_name_under_another_name_is_told_apart() {
        let alice = CertificateInfo::from_der(&fixture("alice")).unwrap();
        let other = CertificateInfo::from_der(&fixture("alice-other-org")).unwrap();
        assert_eq!(alice.common_name, other.common_name);
        assert_ne!(alice.subject, other.subject);
    }

    #[test]
    fn anything_else_is_an_error() {
        let mut der = fixture("alice");
        assert!(CertificateInfo::from_der(&der[..der.len() - 1]).is_err());
        der.push(0);
        assert!(CertificateInfo::from_der(&der).is_err(), "trailing bytes");
        assert!(CertificateInfo::from_der(&[]).is_err());
        assert!(CertificateInfo::from_der(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]).is_err());
    }
}
