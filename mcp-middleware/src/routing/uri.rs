//! Resource URIs as routes compare them: RFC 3986 / RFC 3987 normalised by
//! [`fluent_uri`], and hidden resource templates (RFC 6570) turned into globs.
//!
//! A server decodes and resolves a URI before it looks a resource up, so
//! `demo://resource/static/x/../document/a.md`, `demo://resource/static/document/%61.md` and
//! `DEMO://Resource/static/document/a.md` all reach `demo://resource/static/document/a.md`.
//! Routes therefore match hidden patterns against the normalised form (dot segments removed,
//! percent-encodings of unreserved characters decoded, hex digits upper-cased, scheme and host
//! lower-cased), and the proxy forwards that form, so the server reads exactly what was checked.
//! Encoded `/`, `\` and NUL (`%2F`, `%5C`, `%00`) are refused outright: RFC 3986 keeps them
//! distinct from the characters they encode, but many servers decode them anyway, and a
//! decoded `%2F` is a path separator no normalisation on this side can see.

use fluent_uri::Iri;

/// Why a resource URI is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BadUri {
    /// It carries a percent-encoded `/`, `\` or NUL.
    EncodedSeparator(&'static str),
    /// It is not an absolute URI (or IRI); the parser's reason.
    Unparsable(String),
}

impl std::fmt::Display for BadUri {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::EncodedSeparator(what) => write!(
                f,
                "it carries {what}, which servers may decode into a path separator or a string end"
            ),
            Self::Unparsable(reason) => write!(f, "it is not an absolute RFC 3986 URI ({reason})"),
        }
    }
}

/// `uri` in its normalised form, or why it is refused.
///
/// ```text
/// demo://Resource/static/x/../document/%61.md  ->  demo://resource/static/document/a.md
/// ```
pub(crate) fn normalize(uri: &str) -> Result<String, BadUri> {
    if let Some(what) = encoded_separator(uri) {
        return Err(BadUri::EncodedSeparator(what));
    }
    let parsed = Iri::parse(uri).map_err(|err| BadUri::Unparsable(err.to_string()))?;
    Ok(parsed.normalize().as_str().to_owned())
}

/// `uri` normalised if it parses, without refusing anything: for names that may be a URI or a
/// URI template (a completion's `ref/resource`, a listing's entries, a route's pattern).
pub(crate) fn normalized_if_uri(uri: &str) -> Option<String> {
    let normalized = Iri::parse(uri).ok()?.normalize().as_str().to_owned();
    (normalized != uri).then_some(normalized)
}

/// Which encoded separator `uri` carries, if any (any case of the hex digits).
fn encoded_separator(uri: &str) -> Option<&'static str> {
    let bytes = uri.as_bytes();
    bytes.windows(3).find_map(|w| {
        if w[0] != b'%' {
            return None;
        }
        match [w[1], w[2].to_ascii_uppercase()] {
            [b'2', b'F'] => Some("an encoded `/` (%2F)"),
            [b'5', b'C'] => Some("an encoded `\\` (%5C)"),
            [b'0', b'0'] => Some("an encoded NUL (%00)"),
            _ => None,
        }
    })
}

/// For a pattern holding RFC 6570 expressions (`{id}`, `{+path}`, `{/a,b}`, `{?q}` ...): the
/// glob that matches every URI the template expands to, each expression becoming `*`. That is
/// wider than the template (a `{id}` expansion has no `/`), which errs on the side of hiding.
/// `None` for a pattern without expressions.
pub(crate) fn template_glob(pattern: &str) -> Option<String> {
    if !pattern.contains('{') {
        return None;
    }
    let mut glob = String::with_capacity(pattern.len());
    let mut rest = pattern;
    while let Some(open) = rest.find('{') {
        glob.push_str(&rest[..open]);
        glob.push('*');
        rest = match rest[open..].find('}') {
            Some(close) => &rest[open + close + 1..],
            // An expression left open runs to the end: still `*`.
            None => "",
        };
    }
    glob.push_str(rest);
    Some(glob)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_one_uri_normalise_alike() {
        let target = "demo://resource/static/document/architecture.md";
        for spelling in [
            target,
            "demo://resource/static/x/../document/architecture.md",
            "demo://resource/static/x/%2e%2E/document/architecture.md",
            "demo://resource/static/./document/./architecture.md",
            "DEMO://RESOURCE/static/document/architecture.md",
            "demo://resource/static/document/%61rchitecture.md",
            "demo://resource/%73tatic/document/architecture.md",
            "demo://resource/static/document/x/../../document/architecture.md",
        ] {
            assert_eq!(normalize(spelling).unwrap(), target, "{spelling}");
        }
    }

    #[test]
    fn encoded_separators_and_non_uris_are_refused() {
        for uri in [
            "demo://resource/static/document%2Farchitecture.md",
            "demo://resource/static/document%2farchitecture.md",
            "demo://resource/static/document%5Carchitecture.md",
            "demo://resource/static/document/architecture.md%00",
        ] {
            assert!(
                matches!(normalize(uri), Err(BadUri::EncodedSeparator(_))),
                "{uri}"
            );
        }
        for uri in ["no scheme", "demo://x/a b", "demo://x\\y", "demo://x/\0"] {
            assert!(
                matches!(normalize(uri), Err(BadUri::Unparsable(_))),
                "{uri}"
            );
        }
    }

    #[test]
    fn templates_become_globs() {
        assert_eq!(
            template_glob("demo://resource/dynamic/text/{id}").as_deref(),
            Some("demo://resource/dynamic/text/*")
        );
        assert_eq!(
            template_glob("file://{+path}{?a,b}{#frag}").as_deref(),
            Some("file://***")
        );
        assert_eq!(template_glob("x/{open").as_deref(), Some("x/*"));
        assert_eq!(template_glob("plain"), None);
    }
}
