//! The HTTP headers a 2026-07-28 request carries beside its body: with no session, a server
//! routes and checks each POST by `MCP-Protocol-Version`, `Mcp-Method` and (for `tools/call`,
//! `prompts/get`, `resources/read`) `Mcp-Name`, which must equal the body's.

use base64::Engine as _;
use serde_json::{Map, Value};

use crate::jsonrpc::Message;

/// Whether a message carries the 2026-07-28 envelope (a substring test: it is asked only of
/// messages sent while no handshake version was negotiated).
fn carries_stateless_envelope(line: &str) -> bool {
    line.contains(r#""io.modelcontextprotocol/protocolVersion":"2026-07-28""#)
}

/// The routing headers of `line` if it is a 2026-07-28 message, else none.
pub(crate) fn routing_headers(line: &str) -> Vec<(&'static str, String)> {
    if !carries_stateless_envelope(line) {
        return Vec::new();
    }
    let mut headers = vec![(
        "mcp-protocol-version",
        crate::era::STATELESS_VERSION.to_owned(),
    )];
    let Ok(Message::Request { method, params, .. }) = Message::parse(line) else {
        return headers;
    };
    let name_key = match &*method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    };
    let name = name_key.and_then(|key| {
        let params: Map<String, Value> = serde_json::from_str(params?).ok()?;
        params.get(key)?.as_str().map(encode)
    });
    headers.push(("mcp-method", encode(&method)));
    if let Some(name) = name {
        headers.push(("mcp-name", name));
    }
    headers
}

/// A header value as the 2026-07-28 HTTP transport writes one: printable ASCII without edge
/// whitespace as it is, anything else as `=?base64?...?=`.
fn encode(value: &str) -> String {
    let safe = value.bytes().all(|b| (0x20..0x7f).contains(&b))
        && value.trim() == value
        && !(value.starts_with("=?base64?") && value.ends_with("?="));
    if safe {
        value.to_owned()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(value.as_bytes())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirrors_the_method_and_name_of_a_stateless_request() {
        let line = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"é","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        let headers = routing_headers(line);
        assert_eq!(headers[0], ("mcp-protocol-version", "2026-07-28".into()));
        assert_eq!(headers[1], ("mcp-method", "tools/call".into()));
        assert_eq!(headers[2], ("mcp-name", "=?base64?w6k=?=".into()));
        assert!(routing_headers(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).is_empty());
    }
}
