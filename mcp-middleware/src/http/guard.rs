//! DNS-rebinding protection: the `Host` and `Origin` checks every request passes first.
//!
//! A web page can make a browser send requests to `127.0.0.1` under a name its attacker controls
//! (DNS rebinding). Such a request carries that name in `Host` and the page's origin in `Origin`,
//! so the proxy accepts only loopback names (`localhost`, `127.0.0.1` and the rest of
//! `127.0.0.0/8`, `[::1]`, with any port) and the hosts and origins configured in
//! [`HttpOptions`]; anything else gets `403 Forbidden`. A request without `Origin` (curl, SDK
//! clients) is checked by its `Host` alone. A request with two `Host` or two `Origin` headers,
//! or one that is not visible ASCII, gets `400 Bad Request`: which one a check reads and which
//! one the next hop reads must not differ.

use hyper::header::{self, HeaderMap, HeaderName};

use super::options::HttpOptions;
use super::reject::Reject;

/// The `Host`/`Origin` check, with the allow lists of an [`HttpOptions`] normalised once.
///
/// The HTTP front runs it on every request; another listener of the same process (`mcpctl
/// serve`'s admin listener) builds one from the front's options and runs the same check, so
/// both accept exactly the same hosts and origins.
///
/// ```
/// use mcp_middleware::http::{Guard, HttpOptions};
/// use hyper::header::{HeaderMap, HeaderValue, HOST};
///
/// let guard = Guard::new(&HttpOptions::default());
/// let mut headers = HeaderMap::new();
/// headers.insert(HOST, HeaderValue::from_static("localhost:9000"));
/// assert!(guard.check_request(&headers).is_ok());
/// headers.insert(HOST, HeaderValue::from_static("rebound.example.com"));
/// assert_eq!(guard.check_request(&headers).unwrap_err().status, 403);
/// ```
#[derive(Debug)]
pub struct Guard {
    any_host: bool,
    hosts: Vec<(String, Option<u16>)>,
    any_origin: bool,
    origins: Vec<String>,
}

impl Guard {
    /// The check for `options`' [`allowed_hosts`](HttpOptions::allowed_hosts) and
    /// [`allowed_origins`](HttpOptions::allowed_origins) (loopback always passes).
    pub fn new(options: &HttpOptions) -> Self {
        let any_host = options.allowed_hosts.iter().any(|h| h == "*");
        let hosts = options
            .allowed_hosts
            .iter()
            .filter(|h| *h != "*")
            .filter_map(|h| split_host(h))
            .map(|(name, port)| (name.to_ascii_lowercase(), port))
            .collect();
        let any_origin = options.allowed_origins.iter().any(|o| o == "*");
        let origins = options
            .allowed_origins
            .iter()
            .filter(|o| *o != "*")
            .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
            .collect();
        Self {
            any_host,
            hosts,
            any_origin,
            origins,
        }
    }

    /// Checks the `Host` and `Origin` headers of a request: each at most once, and allowed.
    pub(crate) fn check_headers(&self, headers: &HeaderMap) -> Result<(), Reject> {
        let host = single(headers, &header::HOST, "Host")?;
        let origin = single(headers, &header::ORIGIN, "Origin")?;
        self.check(host, origin)
    }

    /// Checks the `Host` and `Origin` headers of a request as the HTTP front does: `Ok` when
    /// it may go on; else the status to answer (`403` for a host or origin not allowed, `400`
    /// for a repeated or unreadable header) and why.
    pub fn check_request(&self, headers: &HeaderMap) -> Result<(), GuardRefusal> {
        self.check_headers(headers).map_err(|reject| GuardRefusal {
            status: reject.status,
            message: reject.message,
        })
    }

    /// Checks `Host` and `Origin` (either may be missing).
    pub(crate) fn check(&self, host: Option<&str>, origin: Option<&str>) -> Result<(), Reject> {
        // The refusal does not repeat the header (it is the sender's); the log does.
        if let Some(host) = host
            && !self.host_allowed(host)
        {
            tracing::info!(host, "refused a request: its Host is not allowed");
            return Err(Reject::forbidden(
                "Forbidden: the request's Host is not allowed (DNS-rebinding protection); \
                 the proxy accepts loopback hosts and those it is told to allow: \
                 `mcpctl serve --allow-host HOST`, or `HttpOptions::allow_host` in code",
            ));
        }
        if let Some(origin) = origin
            && !self.origin_allowed(origin)
        {
            tracing::info!(origin, "refused a request: its Origin is not allowed");
            return Err(Reject::forbidden(
                "Forbidden: the request's Origin is not allowed (DNS-rebinding protection); \
                 the proxy accepts loopback origins and those it is told to allow: \
                 `mcpctl serve --allow-origin ORIGIN`, or `HttpOptions::allow_origin` in code",
            ));
        }
        Ok(())
    }

    fn host_allowed(&self, host: &str) -> bool {
        if self.any_host {
            return true;
        }
        let Some((name, port)) = split_host(host) else {
            return false;
        };
        if is_loopback(name) {
            return true;
        }
        let name = name.to_ascii_lowercase();
        self.hosts.iter().any(|(allowed, allowed_port)| {
            *allowed == name && allowed_port.is_none_or(|p| Some(p) == port)
        })
    }

    fn origin_allowed(&self, origin: &str) -> bool {
        if self.any_origin {
            return true;
        }
        let normalised = origin.trim_end_matches('/').to_ascii_lowercase();
        if self.origins.contains(&normalised) {
            return true;
        }
        let Some(authority) = normalised
            .strip_prefix("http://")
            .or_else(|| normalised.strip_prefix("https://"))
        else {
            // `null` (a sandboxed page, a file) and other schemes.
            return false;
        };
        split_host(authority).is_some_and(|(name, _)| is_loopback(name))
    }
}

/// Why [`Guard::check_request`] refused a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status}: {message}")]
#[non_exhaustive]
pub struct GuardRefusal {
    /// The status to answer with: `403 Forbidden` or `400 Bad Request`.
    pub status: hyper::StatusCode,
    /// What was wrong and which setting allows it, one sentence (it does not repeat the
    /// header's value, which is the sender's).
    pub message: String,
}

/// The one value of header `name`, if it is there; an error when it is there twice or is not
/// visible ASCII (a value the checks cannot read must not pass as missing).
fn single<'a>(
    headers: &'a HeaderMap,
    name: &HeaderName,
    label: &str,
) -> Result<Option<&'a str>, Reject> {
    let mut values = headers.get_all(name).iter();
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(Reject::bad_request(format!(
            "Bad Request: the request has more than one `{label}` header; send exactly one"
        )));
    }
    first.to_str().map(Some).map_err(|_| {
        Reject::bad_request(format!(
            "Bad Request: the `{label}` header is not visible ASCII"
        ))
    })
}

/// Splits `name[:port]` or `[v6]:port` into the name (brackets kept) and the port.
fn split_host(host: &str) -> Option<(&str, Option<u16>)> {
    let host = host.trim();
    if host.is_empty() || host.contains(['/', '@', ' ']) {
        return None;
    }
    if host.starts_with('[') {
        let end = host.find(']')?;
        let (name, rest) = host.split_at(end + 1);
        return match rest.strip_prefix(':') {
            Some(port) => Some((name, Some(port.parse().ok()?))),
            None if rest.is_empty() => Some((name, None)),
            None => None,
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') => Some((name, Some(port.parse().ok()?))),
        Some(_) => None,
        None => Some((host, None)),
    }
}

fn is_loopback(name: &str) -> bool {
    if name.eq_ignore_ascii_case("localhost") || name == "[::1]" {
        return true;
    }
    name.parse::<std::net::Ipv4Addr>()
        .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(hosts: &[&str], origins: &[&str]) -> Guard {
        let options = HttpOptions {
            allowed_hosts: hosts.iter().map(|h| h.to_string()).collect(),
            allowed_origins: origins.iter().map(|o| o.to_string()).collect(),
            ..HttpOptions::default()
        };
        Guard::new(&options)
    }

    #[test]
    fn loopback_hosts_and_origins_pass_by_default() {
        let g = guard(&[], &[]);
        for host in [
            "localhost",
            "localhost:3000",
            "127.0.0.1:8080",
            "127.1.2.3",
            "[::1]:9",
            "LOCALHOST",
        ] {
            assert!(g.check(Some(host), None).is_ok(), "{host}");
        }
        for origin in [
            "http://localhost:3000",
            "https://127.0.0.1",
            "http://[::1]:80/",
        ] {
            assert!(g.check(Some("localhost"), Some(origin)).is_ok(), "{origin}");
        }
        assert!(g.check(None, None).is_ok());
    }

    #[test]
    fn other_hosts_and_origins_are_forbidden() {
        let g = guard(&[], &[]);
        for host in [
            "evil.example.com",
            "evil.example.com:80",
            "127.0.0.1.evil.com",
            "[::2]:1",
            "a:b:c",
            "",
        ] {
            assert!(g.check(Some(host), None).is_err(), "{host}");
        }
        for origin in [
            "http://evil.example.com",
            "null",
            "file://",
            "http://localhost.evil.com",
        ] {
            assert!(
                g.check(Some("localhost"), Some(origin)).is_err(),
                "{origin}"
            );
        }
    }

    #[test]
    fn repeated_or_unreadable_hosts_and_origins_are_bad_requests() {
        use hyper::header::HeaderValue;
        let g = guard(&[], &[]);
        let mut headers = HeaderMap::new();
        headers.append(header::HOST, HeaderValue::from_static("localhost"));
        assert!(g.check_headers(&headers).is_ok());
        headers.append(header::HOST, HeaderValue::from_static("evil.example.com"));
        let twice = g.check_headers(&headers).unwrap_err();
        assert_eq!(twice.status, hyper::StatusCode::BAD_REQUEST);
        assert!(twice.message.contains("more than one `Host`"), "{twice}");

        let mut headers = HeaderMap::new();
        headers.append(header::HOST, HeaderValue::from_static("localhost"));
        headers.append(header::ORIGIN, HeaderValue::from_static("http://localhost"));
        assert!(g.check_headers(&headers).is_ok());
        headers.append(header::ORIGIN, HeaderValue::from_static("http://localhost"));
        let twice = g.check_headers(&headers).unwrap_err();
        assert!(twice.message.contains("more than one `Origin`"), "{twice}");

        let mut headers = HeaderMap::new();
        headers.append(
            header::HOST,
            HeaderValue::from_bytes(b"evil\xff.com").unwrap(),
        );
        let unreadable = g.check_headers(&headers).unwrap_err();
        assert_eq!(unreadable.status, hyper::StatusCode::BAD_REQUEST);
    }

    #[test]
    fn configured_hosts_and_origins_pass() {
        let g = guard(
            &["mcp.example.com", "api.example.com:8443"],
            &["https://app.example.com"],
        );
        assert!(g.check(Some("MCP.example.com:1234"), None).is_ok());
        assert!(g.check(Some("api.example.com:8443"), None).is_ok());
        assert!(g.check(Some("api.example.com:8444"), None).is_err());
        assert!(
            g.check(Some("localhost"), Some("https://app.example.com/"))
                .is_ok()
        );
        assert!(
            g.check(Some("localhost"), Some("http://app.example.com"))
                .is_err()
        );
        let open = guard(&["*"], &["*"]);
        assert!(
            open.check(Some("anything.example"), Some("http://x.example"))
                .is_ok()
        );
    }
}
