//! Protocol eras: what differs between a 2025-11-25 peer and a 2026-07-28 peer, as pure functions
//! on JSON text. The session decides *when* to translate; this module knows *how*.
//!
//! - **Handshake era** (2025-11-25 and older): `initialize`, `notifications/initialized`, then a
//!   stateful session; results are plain objects.
//! - **Stateless era** (2026-07-28): every request carries an envelope in `params._meta`
//!   (`io.modelcontextprotocol/protocolVersion`, `clientCapabilities`, `clientInfo`, optional
//!   `logLevel`); `server/discover` replaces `initialize`; every result carries `resultType`, and
//!   list and read results carry the cache hints `ttlMs` and `cacheScope`.
//!
//! When both sides speak the same era the proxy translates nothing. When a 2026-07-28 client
//! meets an upstream that only has the handshake, the session initializes the upstream itself with
//! the client's envelope and uses these functions to strip the envelope from requests and to
//! complete results the way a 2026-07-28 server would.

use serde_json::{Map, Value};

/// The stateless protocol version.
pub const STATELESS_VERSION: &str = "2026-07-28";
/// The handshake version the proxy asks for when it initializes an upstream for a stateless client.
pub const HANDSHAKE_VERSION: &str = "2025-11-25";
/// The prefix of the reserved `_meta` keys of the 2026-07-28 envelope.
pub const RESERVED_PREFIX: &str = "io.modelcontextprotocol/";
const PROTOCOL_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
const CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
const CLIENT_INFO_KEY: &str = "io.modelcontextprotocol/clientInfo";
const LOG_LEVEL_KEY: &str = "io.modelcontextprotocol/logLevel";
const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";

/// The 2026-07-28 error "Unsupported protocol version".
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// Whether request params carry the 2026-07-28 envelope. A substring test first, so a request
/// without one costs no parse.
///
/// ```
/// use mcp_middleware::era::has_envelope;
/// assert!(has_envelope(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#));
/// assert!(!has_envelope(r#"{"name":"echo"}"#));
/// ```
pub fn has_envelope(params: &str) -> bool {
    params.contains(PROTOCOL_VERSION_KEY)
        && serde_json::from_str::<Map<String, Value>>(params)
            .ok()
            .and_then(|p| p.get("_meta")?.get(PROTOCOL_VERSION_KEY).cloned())
            .is_some_and(|v| v.is_string())
}

/// The params of `server/discover` that probe an upstream with the client's envelope.
pub fn discover_params(request_params: &str) -> String {
    let meta = serde_json::from_str::<Map<String, Value>>(request_params)
        .ok()
        .and_then(|mut p| p.remove("_meta"))
        .and_then(|meta| match meta {
            Value::Object(meta) => Some(
                meta.into_iter()
                    .filter(|(k, _)| k.starts_with(RESERVED_PREFIX) && k != LOG_LEVEL_KEY)
                    .collect::<Map<String, Value>>(),
            ),
            _ => None,
        })
        .unwrap_or_default();
    serde_json::json!({ "_meta": meta }).to_string()
}

/// Whether a `server/discover` result says the server speaks 2026-07-28.
pub fn discover_offers_stateless(result: &str) -> bool {
    serde_json::from_str::<Map<String, Value>>(result)
        .ok()
        .and_then(|r| r.get("supportedVersions").cloned())
        .and_then(|v| v.as_array().cloned())
        .is_some_and(|versions| versions.iter().any(|v| v == STATELESS_VERSION))
}

/// The params of the `initialize` the proxy sends an upstream on behalf of a stateless client:
/// the client's capabilities and identity from its envelope.
pub fn initialize_params_for(request_params: &str) -> String {
    let meta = serde_json::from_str::<Map<String, Value>>(request_params)
        .ok()
        .and_then(|mut p| p.remove("_meta"))
        .unwrap_or(Value::Null);
    let capabilities = meta
        .get(CAPABILITIES_KEY)
        .cloned()
        .unwrap_or_else(|| Value::Object(Map::new()));
    let client_info = meta.get(CLIENT_INFO_KEY).cloned().unwrap_or_else(
        || serde_json::json!({ "name": "mcp-middleware", "version": env!("CARGO_PKG_VERSION") }),
    );
    serde_json::json!({
        "protocolVersion": HANDSHAKE_VERSION,
        "capabilities": capabilities,
        "clientInfo": client_info,
    })
    .to_string()
}

/// A `server/discover` result made from an upstream's `initialize` result, as a 2026-07-28 server
/// would answer: its capabilities and instructions, its server info in `_meta`.
pub fn discover_result_from_initialize(initialize_result: &str) -> String {
    let init = serde_json::from_str::<Map<String, Value>>(initialize_result).unwrap_or_default();
    let mut result = Map::new();
    result.insert(
        "supportedVersions".into(),
        serde_json::json!([STATELESS_VERSION]),
    );
    let mut capabilities = match init.get("capabilities") {
        Some(Value::Object(caps)) => caps.clone(),
        _ => Map::new(),
    };
    // `tasks` is a 2025-11-25 capability that 2026-07-28 removed.
    capabilities.remove("tasks");
    result.insert("capabilities".into(), Value::Object(capabilities));
    if let Some(instructions) = init.get("instructions") {
        result.insert("instructions".into(), instructions.clone());
    }
    result.insert("resultType".into(), "complete".into());
    result.insert("ttlMs".into(), 0.into());
    result.insert("cacheScope".into(), "private".into());
    if let Some(info) = init.get("serverInfo") {
        result.insert("_meta".into(), serde_json::json!({ SERVER_INFO_KEY: info }));
    }
    Value::Object(result).to_string()
}

/// Methods whose 2026-07-28 results carry the cache hints `ttlMs` and `cacheScope`.
fn is_cacheable(method: &str) -> bool {
    matches!(
        method,
        "server/discover"
            | "tools/list"
            | "prompts/list"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
    )
}

/// A handshake-era result completed for a 2026-07-28 client: `resultType` and, for list and read
/// results, `ttlMs: 0` and `cacheScope: "private"` (nothing may be cached: the upstream gave no
/// hint). Spliced in at the front of the object, so the rest stays byte for byte. `None` when
/// the result is not an object. Only for results of handshake-era upstreams, which never set
/// these fields themselves.
///
/// ```
/// use mcp_middleware::era::complete_result;
/// assert_eq!(
///     complete_result("tools/call", r#"{"content":[]}"#).unwrap(),
///     r#"{"resultType":"complete","content":[]}"#
/// );
/// assert_eq!(
///     complete_result("tools/list", "{}").unwrap(),
///     r#"{"resultType":"complete","ttlMs":0,"cacheScope":"private"}"#
/// );
/// ```
pub fn complete_result(method: &str, result: &str) -> Option<String> {
    let body = result.trim_start().strip_prefix('{')?;
    let fields = if is_cacheable(method) {
        r#""resultType":"complete","ttlMs":0,"cacheScope":"private""#
    } else {
        r#""resultType":"complete""#
    };
    let empty = body.trim_start().starts_with('}');
    let mut out = String::with_capacity(result.len() + fields.len() + 2);
    out.push('{');
    out.push_str(fields);
    if !empty {
        out.push(',');
    }
    out.push_str(body);
    Some(out)
}

/// Removes the reserved envelope keys from `params._meta` (dropping `_meta` if nothing is left),
/// returning the `logLevel` the client asked for, if any.
pub fn strip_envelope(params: &mut Map<String, Value>) -> Option<String> {
    let Some(Value::Object(meta)) = params.get_mut("_meta") else {
        return None;
    };
    let level = meta
        .get(LOG_LEVEL_KEY)
        .and_then(Value::as_str)
        .map(str::to_owned);
    meta.retain(|key, _| !key.starts_with(RESERVED_PREFIX));
    if meta.is_empty() {
        params.remove("_meta");
    }
    level
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENVELOPE: &str = r#"{"name":"echo","_meta":{"progressToken":"p","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/logLevel":"info"}}"#;

    #[test]
    fn builds_the_upstream_handshake_from_the_envelope() {
        let init: Value = serde_json::from_str(&initialize_params_for(ENVELOPE)).unwrap();
        assert_eq!(init["protocolVersion"], HANDSHAKE_VERSION);
        assert_eq!(init["capabilities"], serde_json::json!({"sampling": {}}));
        assert_eq!(init["clientInfo"]["name"], "c");
        let probe: Value = serde_json::from_str(&discover_params(ENVELOPE)).unwrap();
        assert_eq!(probe["_meta"][PROTOCOL_VERSION_KEY], "2026-07-28");
        assert!(probe["_meta"].get("progressToken").is_none());
        assert!(probe["_meta"].get(LOG_LEVEL_KEY).is_none());
    }

    #[test]
    fn answers_discover_from_an_initialize_result() {
        let init = r#"{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"tasks":{}},"serverInfo":{"name":"s","version":"2"},"instructions":"hi"}"#;
        let discover: Value = serde_json::from_str(&discover_result_from_initialize(init)).unwrap();
        assert_eq!(
            discover["supportedVersions"],
            serde_json::json!(["2026-07-28"])
        );
        assert_eq!(discover["capabilities"], serde_json::json!({"tools": {}}));
        assert_eq!(discover["instructions"], "hi");
        assert_eq!(discover["_meta"][SERVER_INFO_KEY]["name"], "s");
        assert!(discover_offers_stateless(&discover.to_string()));
        assert!(!discover_offers_stateless(
            r#"{"supportedVersions":["2025-11-25"]}"#
        ));
    }

    #[test]
    fn strips_only_the_reserved_keys() {
        let mut params: Map<String, Value> = serde_json::from_str(ENVELOPE).unwrap();
        assert_eq!(strip_envelope(&mut params).as_deref(), Some("info"));
        assert_eq!(params["_meta"], serde_json::json!({"progressToken": "p"}));
        let mut bare: Map<String, Value> =
            serde_json::from_str(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"x"}}"#)
                .unwrap();
        strip_envelope(&mut bare);
        assert!(bare.is_empty());
    }

    #[test]
    fn leaves_results_that_need_nothing() {
        assert_eq!(complete_result("tools/call", "[]"), None);
        assert!(has_envelope(ENVELOPE));
        assert!(!has_envelope(
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":1}}"#
        ));
    }
}
