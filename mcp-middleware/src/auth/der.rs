//! The little DER the identity code reads: a public key's algorithm and bits
//! (`SubjectPublicKeyInfo`), and a certificate's subject name and validity.
//!
//! A full X.509 parser would cost a dependency tree; what is needed here is a few fixed paths
//! into structures that rustls (certificates) or the operator (keys) already handed over. Every
//! read is bounds-checked and returns `None` on anything unexpected.

/// Universal tags.
const INTEGER: u8 = 0x02;
const BIT_STRING: u8 = 0x03;
const OID: u8 = 0x06;
const UTF8_STRING: u8 = 0x0c;
const PRINTABLE_STRING: u8 = 0x13;
const T61_STRING: u8 = 0x14;
const IA5_STRING: u8 = 0x16;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;
const UNIVERSAL_STRING: u8 = 0x1c;
const BMP_STRING: u8 = 0x1e;
const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
/// `[0]` EXPLICIT, constructed: a certificate's version.
const CONTEXT_0: u8 = 0xa0;

/// rsaEncryption, 1.2.840.113549.1.1.1.
pub(crate) const OID_RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
/// id-ecPublicKey, 1.2.840.10045.2.1.
pub(crate) const OID_EC: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
/// prime256v1 (P-256), 1.2.840.10045.3.1.7.
pub(crate) const OID_P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
/// secp384r1 (P-384), 1.3.132.0.34.
pub(crate) const OID_P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];
/// Ed25519, 1.3.101.112.
pub(crate) const OID_ED25519: &[u8] = &[0x2b, 0x65, 0x70];

/// One element: its tag, its contents, and what follows it.
fn element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    if tag & 0x1f == 0x1f {
        return None; // multi-byte tags never occur in what is read here
    }
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let mut len = 0usize;
        for &byte in &rest[..count] {
            len = (len << 8) | usize::from(byte);
        }
        rest = &rest[count..];
        len
    };
    if rest.len() < len {
        return None;
    }
    let (contents, after) = rest.split_at(len);
    Some((tag, contents, after))
}

/// The contents of an element that must have tag `want`, and what follows it.
fn expect(input: &[u8], want: u8) -> Option<(&[u8], &[u8])> {
    let (tag, contents, rest) = element(input)?;
    (tag == want).then_some((contents, rest))
}

/// A public key read from a `SubjectPublicKeyInfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PublicKeyInfo {
    /// The algorithm's OID (contents).
    pub(crate) algorithm: Vec<u8>,
    /// The parameters' OID, when they are one (an EC key's curve).
    pub(crate) parameter: Option<Vec<u8>>,
    /// The key bits: an RSA key's PKCS#1 `RSAPublicKey`, an EC key's point, an Ed25519 key.
    pub(crate) key: Vec<u8>,
}

/// Reads a DER `SubjectPublicKeyInfo` (a PEM `PUBLIC KEY`).
pub(crate) fn public_key_info(der: &[u8]) -> Option<PublicKeyInfo> {
    let (spki, _) = expect(der, SEQUENCE)?;
    let (algorithm_id, rest) = expect(spki, SEQUENCE)?;
    let (algorithm, params) = expect(algorithm_id, OID)?;
    let parameter = expect(params, OID).map(|(oid, _)| oid.to_vec());
    let (bits, _) = expect(rest, BIT_STRING)?;
    let (&unused, key) = bits.split_first()?;
    if unused != 0 {
        return None;
    }
    Some(PublicKeyInfo {
        algorithm: algorithm.to_vec(),
        parameter,
        key: key.to_vec(),
    })
}

/// What the identity code reads from a certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CertificateInfo {
    /// The subject's common name (the last CN, as the most specific), if it has one.
    pub(crate) common_name: Option<String>,
    /// The subject as an RFC 4514 string (`CN=alice,O=Example`).
    pub(crate) distinguished_name: String,
    /// The end of the validity period, in seconds since the Unix epoch.
    pub(crate) not_after: i64,
}

/// Reads the subject and the end of validity of a DER certificate.
pub(crate) fn certificate_info(der: &[u8]) -> Option<CertificateInfo> {
    let (certificate, _) = expect(der, SEQUENCE)?;
    let (tbs, _) = expect(certificate, SEQUENCE)?;
    let mut rest = tbs;
    if let Some((CONTEXT_0, _, after)) = element(rest) {
        rest = after; // version
    }
    let (_serial, rest) = expect(rest, INTEGER)?;
    let (_signature, rest) = expect(rest, SEQUENCE)?;
    let (_issuer, rest) = expect(rest, SEQUENCE)?;
    let (validity, rest) = expect(rest, SEQUENCE)?;
    let (subject, _) = expect(rest, SEQUENCE)?;
    let (_, _, after_not_before) = element(validity)?;
    let (tag, not_after, _) = element(after_not_before)?;
    let not_after = time(tag, not_after)?;
    let (common_name, distinguished_name) = name(subject)?;
    Some(CertificateInfo {
        common_name,
        distinguished_name,
        not_after,
    })
}

/// A `Name` (the contents of its SEQUENCE): its last common name and its RFC 4514 form.
fn name(mut rdns: &[u8]) -> Option<(Option<String>, String)> {
    let mut parts = Vec::new();
    let mut common_name = None;
    while !rdns.is_empty() {
        let (mut set, rest) = expect(rdns, SET)?;
        rdns = rest;
        let mut attributes = Vec::new();
        while !set.is_empty() {
            let (pair, rest) = expect(set, SEQUENCE)?;
            set = rest;
            let (oid, value) = expect(pair, OID)?;
            let (tag, contents, after) = element(value)?;
            let text = string(tag, contents);
            let key = attribute_name(oid);
            if oid == [0x55, 0x04, 0x03]
                && let Some(text) = &text
            {
                common_name = Some(text.clone());
            }
            let value = match (&text, key) {
                (Some(text), Some(_)) => escape(text),
                // Unknown attributes, and values that are not strings: `#` and the DER.
                _ => format!("#{}", hex(&value[..value.len() - after.len()])),
            };
            let key = key.map_or_else(|| dotted(oid), str::to_owned);
            attributes.push(format!("{key}={value}"));
        }
        parts.push(attributes.join("+"));
    }
    // RFC 4514 writes the most specific RDN first: the reverse of the encoding's order.
    parts.reverse();
    Some((common_name, parts.join(",")))
}

fn attribute_name(oid: &[u8]) -> Option<&'static str> {
    Some(match oid {
        [0x55, 0x04, 0x03] => "CN",
        [0x55, 0x04, 0x05] => "serialNumber",
        [0x55, 0x04, 0x06] => "C",
        [0x55, 0x04, 0x07] => "L",
        [0x55, 0x04, 0x08] => "ST",
        [0x55, 0x04, 0x09] => "STREET",
        [0x55, 0x04, 0x0a] => "O",
        [0x55, 0x04, 0x0b] => "OU",
        [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01] => "emailAddress",
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19] => "DC",
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x01] => "UID",
        _ => return None,
    })
}

/// A directory string's text.
fn string(tag: u8, contents: &[u8]) -> Option<String> {
    match tag {
        UTF8_STRING | PRINTABLE_STRING | IA5_STRING => String::from_utf8(contents.to_vec()).ok(),
        // Teletex strings are in practice Latin-1.
        T61_STRING => Some(contents.iter().map(|&b| char::from(b)).collect()),
        BMP_STRING => {
            let units: Vec<u16> = contents
                .chunks(2)
                .map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))
                .collect();
            String::from_utf16(&units).ok()
        }
        UNIVERSAL_STRING => contents
            .chunks(4)
            .map(|c| {
                let mut word = [0u8; 4];
                word[..c.len()].copy_from_slice(c);
                char::from_u32(u32::from_be_bytes(word))
            })
            .collect(),
        _ => None,
    }
}

/// RFC 4514 escaping of an attribute value.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, '"' | '+' | ',' | ';' | '<' | '>' | '\\')
            || (i == 0 && matches!(c, ' ' | '#'))
            || (i == last && c == ' ');
        if c == '\0' {
            out.push_str("\\00");
            continue;
        }
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An OID's dotted-decimal form.
fn dotted(oid: &[u8]) -> String {
    let mut arcs = Vec::new();
    let mut value = 0u64;
    for &byte in oid {
        value = (value << 7) | u64::from(byte & 0x7f);
        if byte & 0x80 == 0 {
            arcs.push(value);
            value = 0;
        }
    }
    let mut out = String::new();
    if let Some(&first) = arcs.first() {
        let (a, b) = match first {
            0..40 => (0, first),
            40..80 => (1, first - 40),
            _ => (2, first - 80),
        };
        out = format!("{a}.{b}");
    }
    for arc in arcs.iter().skip(1) {
        out.push_str(&format!(".{arc}"));
    }
    out
}

/// A `UTCTime` or `GeneralizedTime` (`Z` form, as RFC 5280 requires) in Unix seconds.
fn time(tag: u8, contents: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(contents).ok()?;
    let text = text.strip_suffix('Z')?;
    let (year, rest) = match tag {
        UTC_TIME if text.len() == 12 => {
            let yy: i64 = text.get(..2)?.parse().ok()?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &text[2..])
        }
        GENERALIZED_TIME if text.len() == 14 => (text.get(..4)?.parse().ok()?, &text[4..]),
        _ => return None,
    };
    if !rest.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let field = |i: usize| -> Option<i64> { rest.get(i..i + 2)?.parse().ok() };
    let (month, day, hour, minute, second) =
        (field(0)?, field(2)?, field(4)?, field(6)?, field(8)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_count_from_the_epoch() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(time(UTC_TIME, b"700101000000Z"), Some(0));
        assert_eq!(
            time(GENERALIZED_TIME, b"20380119031408Z"),
            Some(2_147_483_648)
        );
        assert_eq!(time(UTC_TIME, b"491231235959Z"), Some(2_524_607_999));
        assert_eq!(time(UTC_TIME, b"700101000000"), None);
        assert_eq!(time(UTC_TIME, b"701301000000Z"), None);
    }

    #[test]
    fn lengths_are_bounds_checked() {
        assert_eq!(element(&[0x30, 0x03, 0x01]), None);
        assert_eq!(element(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]), None);
        assert_eq!(
            element(&[0x30, 0x81, 0x01, 0x05]),
            Some((0x30, &[5u8][..], &[][..]))
        );
        assert_eq!(public_key_info(&[0x30, 0x00]), None);
        assert_eq!(certificate_info(b"not a certificate"), None);
    }

    #[test]
    fn names_are_written_as_rfc_4514() {
        // SEQUENCE { SET { SEQUENCE { C, "US" } }, SET { SEQUENCE { O, "A, B" } },
        //            SET { SEQUENCE { CN, " alice" } } }
        let der = [
            0x31, 0x0b, 0x30, 0x09, 0x06, 0x03, 0x55, 0x04, 0x06, 0x13, 0x02, b'U', b'S', 0x31,
            0x0d, 0x30, 0x0b, 0x06, 0x03, 0x55, 0x04, 0x0a, 0x0c, 0x04, b'A', b',', b' ', b'B',
            0x31, 0x0f, 0x30, 0x0d, 0x06, 0x03, 0x55, 0x04, 0x03, 0x0c, 0x06, b' ', b'a', b'l',
            b'i', b'c', b'e',
        ];
        let (cn, dn) = name(&der).expect("a name");
        assert_eq!(cn.as_deref(), Some(" alice"));
        assert_eq!(dn, "CN=\\ alice,O=A\\, B,C=US");
        assert_eq!(
            dotted(&[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01]),
            "1.2.840.10045.2.1"
        );
    }
}
