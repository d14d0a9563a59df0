//! [`Identity`]: who is on the other end of a session, and the principal string
//! configurations and quotas name it by.

use serde_json::Value;

/// Who is on the other end of a session.
///
/// Resolved once, when the session starts, and the same for every hook and observer of the
/// session ([`Context::identity`](crate::Context::identity)). On stdio it is the local user; on the HTTP front it comes
/// from the credential the client authenticated with (see [`crate::auth`]): a bearer token from
/// the token list, a verified JWT, or a TLS client certificate; with no authentication
/// configured, an HTTP client is [`Identity::Anonymous`].
///
/// ```
/// use mcp_middleware::Identity;
///
/// let local = Identity::local_user();
/// assert_eq!(local.kind(), "local");
/// assert!(!local.subject().is_empty());
/// assert_eq!(Identity::Anonymous.subject(), "anonymous");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Identity {
    /// A stdio client: the local user who started the proxy.
    LocalUser {
        /// The user name (`$USER`, or `unknown`).
        name: String,
    },
    /// An HTTP client of a front that authenticates no one.
    Anonymous,
    /// An HTTP client that presented a bearer token from the configured token list.
    Token {
        /// The subject the token list maps the token to.
        subject: String,
    },
    /// An HTTP client that presented a JWT the proxy verified.
    Jwt {
        /// The configured subject claim (`sub` by default).
        subject: String,
        /// The `iss` claim, if any.
        issuer: Option<String>,
        /// Every claim of the token the request presented.
        claims: serde_json::Map<String, Value>,
    },
    /// An HTTP client that presented a TLS client certificate issued by the configured CA.
    Certificate {
        /// The subject's common name (CN), or the whole distinguished name when it has none.
        subject: String,
        /// The subject's distinguished name, as RFC 4514 writes it (`CN=alice,O=Example`).
        distinguished_name: String,
        /// The issuer's distinguished name (RFC 4514): two CAs may issue the same subject.
        issuer: String,
    },
}

impl Identity {
    /// The local user: on Unix the name the user database gives the process's user id (so it
    /// holds with `$USER` unset or wrong), else `$USER` (or `$USERNAME`), else the user id
    /// itself (a container's user without a passwd entry).
    pub fn local_user() -> Self {
        let from_env = || {
            std::env::var("USER")
                .or_else(|_| std::env::var("USERNAME"))
                .ok()
        };
        #[cfg(unix)]
        let name = {
            let uid = nix::unistd::Uid::current();
            match nix::unistd::User::from_uid(uid) {
                Ok(Some(user)) => user.name,
                _ => from_env().unwrap_or_else(|| uid.to_string()),
            }
        };
        #[cfg(not(unix))]
        let name = from_env().unwrap_or_else(|| "unknown".to_owned());
        Identity::LocalUser { name }
    }

    /// The name the identity goes by, for logs and audit records: the user name, the token
    /// list's subject, the JWT's subject claim, the certificate's common name, or `anonymous`.
    pub fn subject(&self) -> &str {
        match self {
            Identity::LocalUser { name } => name,
            Identity::Anonymous => "anonymous",
            Identity::Token { subject }
            | Identity::Jwt { subject, .. }
            | Identity::Certificate { subject, .. } => subject,
        }
    }

    /// How the identity was established: `local`, `anonymous`, `token`, `jwt` or `certificate`.
    pub fn kind(&self) -> &'static str {
        match self {
            Identity::LocalUser { .. } => "local",
            Identity::Anonymous => "anonymous",
            Identity::Token { .. } => "token",
            Identity::Jwt { .. } => "jwt",
            Identity::Certificate { .. } => "certificate",
        }
    }

    /// Whether a credential established it (a token, a JWT or a certificate).
    pub fn is_authenticated(&self) -> bool {
        matches!(
            self,
            Identity::Token { .. } | Identity::Jwt { .. } | Identity::Certificate { .. }
        )
    }

    /// The JWT's claims, for an identity from a JWT.
    pub fn claims(&self) -> Option<&serde_json::Map<String, Value>> {
        match self {
            Identity::Jwt { claims, .. } => Some(claims),
            _ => None,
        }
    }

    /// Who the identity is, independent of the credential's details: what a session is bound
    /// to, and what audit records and per-caller rules name. A refreshed JWT of the same issuer
    /// and subject is the same principal; a certificate is its issuer's and its subject's whole
    /// distinguished names, so two certificates with the same CN are two principals.
    ///
    /// # Syntax
    ///
    /// The kind, then each part of the identity, each part percent-encoded and joined with `:`:
    ///
    /// | identity | principal |
    /// |---|---|
    /// | [`LocalUser`](Identity::LocalUser) | `local:NAME` |
    /// | [`Anonymous`](Identity::Anonymous) | `anonymous` |
    /// | [`Token`](Identity::Token) | `token:SUBJECT` |
    /// | [`Jwt`](Identity::Jwt) with `iss` | `jwt:ISSUER:SUBJECT` |
    /// | [`Jwt`](Identity::Jwt) without `iss` | `jwt:SUBJECT` |
    /// | [`Certificate`](Identity::Certificate) | `certificate:ISSUER-DN:SUBJECT-DN` |
    ///
    /// Percent-encoding leaves only the RFC 3986 unreserved characters (`A-Z a-z 0-9 - . _ ~`)
    /// as they are and writes every other byte of the part's UTF-8 as `%XX` (upper-case hex),
    /// `:` and `%` included. So a part never contains `:`, the number of parts is fixed by the
    /// kind (a JWT without `iss` has one part fewer than one with an empty `iss`), and decoding
    /// each part gives back exactly the original strings: two different identities never have
    /// the same principal.
    ///
    /// ```
    /// use mcp_middleware::auth::Identity;
    ///
    /// let jwt = |iss: &str, sub: &str| Identity::Jwt {
    ///     subject: sub.to_owned(),
    ///     issuer: Some(iss.to_owned()),
    ///     claims: Default::default(),
    /// };
    /// assert_eq!(jwt("https://idp:8443", "x").principal(), "jwt:https%3A%2F%2Fidp%3A8443:x");
    /// assert_eq!(jwt("https://idp", "8443:x").principal(), "jwt:https%3A%2F%2Fidp:8443%3Ax");
    /// assert_eq!(Identity::Anonymous.principal(), "anonymous");
    /// assert_eq!(
    ///     Identity::Token { subject: "ci bot".to_owned() }.principal(),
    ///     "token:ci%20bot"
    /// );
    /// ```
    pub fn principal(&self) -> String {
        let parts: Vec<&str> = match self {
            Identity::LocalUser { name } => vec![name],
            Identity::Anonymous => vec![],
            Identity::Token { subject } => vec![subject],
            Identity::Jwt {
                subject,
                issuer: Some(issuer),
                ..
            } => vec![issuer, subject],
            Identity::Jwt {
                subject,
                issuer: None,
                ..
            } => vec![subject],
            Identity::Certificate {
                distinguished_name,
                issuer,
                ..
            } => vec![issuer, distinguished_name],
        };
        let mut out = self.kind().to_owned();
        for part in parts {
            out.push(':');
            out.extend(percent_encoding::utf8_percent_encode(part, PRINCIPAL_PART));
        }
        out
    }
}

impl Identity {
    /// Why `text` can be no identity's [`principal`](Identity::principal), or `None` when it is
    /// well formed: a known kind with its number of parts, each part percent-encoded as
    /// `principal` writes it. For configurations, so that `jwt:https://idp:alice` (unencoded)
    /// is refused where it is written instead of never matching anyone.
    ///
    /// ```
    /// use mcp_middleware::Identity;
    ///
    /// assert!(Identity::principal_syntax_error("token:alice").is_none());
    /// assert!(Identity::principal_syntax_error("jwt:https%3A%2F%2Fidp:alice").is_none());
    /// assert!(Identity::principal_syntax_error("jwt:https://idp:alice").is_some());
    /// assert!(Identity::principal_syntax_error("user:alice").is_some());
    /// ```
    pub fn principal_syntax_error(text: &str) -> Option<String> {
        let mut parts = text.split(':');
        let kind = parts.next().unwrap_or_default();
        let parts: Vec<&str> = parts.collect();
        let counts: &[usize] = match kind {
            "anonymous" => &[0],
            "local" | "token" => &[1],
            "jwt" => &[1, 2],
            "certificate" => &[2],
            _ => {
                return Some(format!(
                    "`{text}` is not a principal: it must start with `local:`, `token:`, `jwt:`, \
                     `certificate:` or be `anonymous`"
                ));
            }
        };
        if !counts.contains(&parts.len()) {
            return Some(format!(
                "`{text}` is not a `{kind}` principal: it has {} part(s) after the kind, and \
                 each part's `:` must be written `%3A`",
                parts.len()
            ));
        }
        for part in parts {
            let decoded = percent_encoding::percent_decode_str(part).decode_utf8_lossy();
            let canonical: String =
                percent_encoding::utf8_percent_encode(&decoded, PRINCIPAL_PART).collect();
            if canonical != part {
                return Some(format!(
                    "`{text}` is not a principal as the proxy writes it: part `{part}` must be \
                     written `{canonical}` (every character but `A-Z a-z 0-9 - . _ ~` \
                     percent-encoded, upper-case hex)"
                ));
            }
        }
        None
    }
}

/// What a principal's parts encode: everything but RFC 3986's unreserved characters.
const PRINCIPAL_PART: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

#[cfg(test)]
mod tests {
    use super::Identity;

    fn jwt(issuer: Option<&str>, subject: &str) -> Identity {
        Identity::Jwt {
            subject: subject.to_owned(),
            issuer: issuer.map(str::to_owned),
            claims: Default::default(),
        }
    }

    fn certificate(issuer: &str, subject_dn: &str) -> Identity {
        Identity::Certificate {
            subject: "alice".to_owned(),
            distinguished_name: subject_dn.to_owned(),
            issuer: issuer.to_owned(),
        }
    }

    /// Decodes a principal back into its kind and parts: the syntax is injective.
    fn parts(principal: &str) -> Vec<String> {
        principal
            .split(':')
            .map(|part| {
                percent_encoding::percent_decode_str(part)
                    .decode_utf8()
                    .unwrap()
                    .into_owned()
            })
            .collect()
    }

    #[test]
    fn issuers_with_ports_and_subjects_with_colons_do_not_collide() {
        let a = jwt(Some("https://idp:8443"), "x");
        let b = jwt(Some("https://idp"), "8443:x");
        assert_ne!(a.principal(), b.principal());
        assert_eq!(parts(&a.principal()), ["jwt", "https://idp:8443", "x"]);
        assert_eq!(parts(&b.principal()), ["jwt", "https://idp", "8443:x"]);
        // No issuer, an empty issuer, and a subject that looks like an issuer and a subject.
        let none = jwt(None, "x");
        let empty = jwt(Some(""), "x");
        let spelled = jwt(None, ":x");
        assert_eq!(none.principal(), "jwt:x");
        assert_eq!(empty.principal(), "jwt::x");
        assert_eq!(spelled.principal(), "jwt:%3Ax");
        // `%` itself is encoded, so an encoded-looking subject stays itself.
        assert_eq!(jwt(None, "%3Ax").principal(), "jwt:%253Ax");
    }

    #[test]
    fn kinds_never_collide() {
        let all = [
            Identity::LocalUser {
                name: "alice".to_owned(),
            },
            Identity::Anonymous,
            Identity::Token {
                subject: "alice".to_owned(),
            },
            Identity::Token {
                subject: "anonymous".to_owned(),
            },
            jwt(None, "alice"),
            jwt(Some("token"), "alice"),
            certificate("CN=CA", "CN=alice"),
        ];
        let principals: std::collections::HashSet<String> =
            all.iter().map(Identity::principal).collect();
        assert_eq!(principals.len(), all.len(), "{principals:?}");
        assert_eq!(Identity::Anonymous.principal(), "anonymous");
        assert_eq!(all[0].principal(), "local:alice");
        assert_eq!(all[2].principal(), "token:alice");
    }

    #[test]
    fn certificates_are_their_issuer_and_whole_subject() {
        let org = certificate("CN=CA", "CN=alice,O=Example Org");
        let other_org = certificate("CN=CA", "CN=alice,O=Other Org");
        let other_ca = certificate("CN=Other CA", "CN=alice,O=Example Org");
        assert_eq!(org.subject(), other_org.subject(), "the same CN");
        assert_ne!(org.principal(), other_org.principal());
        assert_ne!(org.principal(), other_ca.principal());
        assert_eq!(
            org.principal(),
            "certificate:CN%3DCA:CN%3Dalice%2CO%3DExample%20Org"
        );
        // A DN whose value holds `:` cannot shift the split between issuer and subject.
        let shifted_a = certificate("CN=a", "CN=b:c");
        let shifted_b = certificate("CN=a:CN=b", "c");
        assert_ne!(shifted_a.principal(), shifted_b.principal());
        assert_eq!(
            parts(&shifted_a.principal()),
            ["certificate", "CN=a", "CN=b:c"]
        );
    }

    #[test]
    fn non_ascii_is_encoded_as_utf8() {
        let token = Identity::Token {
            subject: "zoë~_.-".to_owned(),
        };
        assert_eq!(token.principal(), "token:zo%C3%AB~_.-");
        assert_eq!(parts(&token.principal()), ["token", "zoë~_.-"]);
    }
}
