//! JSON-RPC 2.0 messages as the proxy sees them: an envelope read without parsing its payload.
//!
//! The forwarding path never materialises `params` or `result`: [`Message::parse`] reads only
//! `id`, `method` and the *positions* of the payload members inside the original line, and
//! [`splice`] writes a message back out by replacing just the bytes that must change (the id, or
//! a rewritten `params`). Everything else, including members this crate has never heard of,
//! reaches the other side byte for byte. That is what keeps the proxy both lossless and
//! cheap: a 1 MB `tools/list` result is scanned once and copied once.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::ops::Range;

use serde::Deserialize;
use serde_json::value::RawValue;

/// JSON-RPC "Parse error": the line was not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC "Invalid Request": JSON, but not a JSON-RPC 2.0 message.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC "Method not found".
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC "Invalid params".
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC "Internal error".
pub const INTERNAL_ERROR: i64 = -32603;
/// The upstream server is not available: it exited, could not be started, or closed its output
/// before answering. The request may be retried; the proxy starts the upstream again.
pub const UPSTREAM_UNAVAILABLE: i64 = -32001;
/// The upstream server did not answer within the proxy's request timeout. The proxy has sent the
/// upstream `notifications/cancelled` for the request.
pub const UPSTREAM_TIMEOUT: i64 = -32002;
/// The upstream server is not reading what the proxy sends it: more than the proxy's limit
/// already waits for it ([`SessionOptions::upstream_queue_bytes`](crate::SessionOptions)). The
/// request was not sent; it may be retried once the upstream catches up.
pub const UPSTREAM_BACKLOG: i64 = -32003;

mod scan;

/// The members of a JSON-RPC message, borrowed from the line they were read from; the
/// validating fallback of [`Message::parse`].
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    jsonrpc: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

/// One JSON-RPC message, borrowed from its line.
///
/// Payloads are raw JSON text pointing into the line, so their byte ranges are known
/// ([`range_in`]) and the message can be re-emitted with [`splice`].
#[derive(Debug)]
pub enum Message<'a> {
    /// A request: it has a method and an id, and expects a response.
    Request {
        /// The id exactly as written (a JSON number or string).
        id: &'a str,
        /// The method name.
        method: Cow<'a, str>,
        /// The params, raw JSON, if present.
        params: Option<&'a str>,
    },
    /// A notification: a method without an id.
    Notification {
        /// The method name.
        method: Cow<'a, str>,
        /// The params, raw JSON, if present.
        params: Option<&'a str>,
    },
    /// A response carrying a result.
    Result {
        /// The id of the request it answers, raw JSON.
        id: &'a str,
        /// The result, raw JSON.
        result: &'a str,
    },
    /// A response carrying an error. The id is `None` when the peer could not tell which request
    /// failed (for example after a parse error).
    Error {
        /// The id of the request it answers, raw JSON, if known.
        id: Option<&'a str>,
        /// The error object, raw JSON.
        error: &'a str,
    },
}

/// Why a line is not a JSON-RPC message, with the JSON-RPC error code that says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    /// [`PARSE_ERROR`] or [`INVALID_REQUEST`].
    pub code: i64,
    /// What was wrong, and where in the line.
    pub message: String,
    /// The id, when the message was JSON and had one, so the error can be addressed to it.
    pub id: Option<String>,
}

impl<'a> Message<'a> {
    /// Reads the envelope of one JSON-RPC message from `line` without parsing its payload.
    ///
    /// ```
    /// use mcp_middleware::jsonrpc::Message;
    /// let line = r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}"#;
    /// match Message::parse(line).unwrap() {
    ///     Message::Request { id, method, .. } => {
    ///         assert_eq!(id, "7");
    ///         assert_eq!(method, "tools/list");
    ///     }
    ///     other => panic!("not a request: {other:?}"),
    /// }
    /// ```
    pub fn parse(line: &'a str) -> Result<Self, Malformed> {
        let trimmed = line.trim_start();
        if trimmed.starts_with('[') {
            return Err(Malformed {
                code: INVALID_REQUEST,
                message: "JSON-RPC batches are not supported: MCP removed them in 2025-06-18; \
                          send one message per line"
                    .to_owned(),
                id: None,
            });
        }
        let members = match scan::members(line) {
            Some(found) => Members {
                jsonrpc: found.jsonrpc.map(decode_string).transpose()?,
                id: found.id,
                // A method that is not a string is refused under the request's id.
                method: found
                    .method
                    .map(decode_string)
                    .transpose()
                    .map_err(|mut err| {
                        err.id = found
                            .id
                            .filter(|id| *id != "null" && is_valid_id(id))
                            .map(str::to_owned);
                        err
                    })?,
                params: found.params,
                result: found.result,
                error: found.error,
            },
            None => Self::parse_strictly(line)?,
        };
        members.classify()
    }

    /// Like [`Message::parse`], and the whole line must be valid JSON, payload included. For
    /// what a client sends: the proxy answers an invalid payload with `-32700` as a server would,
    /// rather than passing it on. (Messages from the upstream, which can be megabytes, are only
    /// read to their envelope: a broken payload reaches the client as it would directly.)
    ///
    /// ```
    /// use mcp_middleware::jsonrpc::{Message, PARSE_ERROR};
    /// let broken = r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a" 1}}"#;
    /// assert!(Message::parse(broken).is_ok());
    /// assert_eq!(Message::parse_validated(broken).unwrap_err().code, PARSE_ERROR);
    /// ```
    pub fn parse_validated(line: &'a str) -> Result<Self, Malformed> {
        let message = Self::parse(line)?;
        if let Err(err) = serde_json::from_str::<serde::de::IgnoredAny>(line) {
            return Err(Malformed {
                code: PARSE_ERROR,
                message: format!("Parse error: {err}"),
                id: None,
            });
        }
        Ok(message)
    }

    /// The validating path: serde_json reads the whole line and says what is wrong and where.
    fn parse_strictly(line: &'a str) -> Result<Members<'a>, Malformed> {
        let envelope: Envelope<'a> = serde_json::from_str(line).map_err(|err| Malformed {
            code: if err.is_data() {
                INVALID_REQUEST
            } else {
                PARSE_ERROR
            },
            message: format!(
                "{}: {err}",
                if err.is_data() {
                    "Invalid Request"
                } else {
                    "Parse error"
                }
            ),
            id: None,
        })?;
        Ok(Members {
            jsonrpc: envelope.jsonrpc,
            id: envelope.id.map(RawValue::get),
            method: envelope.method,
            params: envelope.params.map(RawValue::get),
            result: envelope.result.map(RawValue::get),
            error: envelope.error.map(RawValue::get),
        })
    }
}

/// The envelope's members, decoded where the proxy reads them.
struct Members<'a> {
    jsonrpc: Option<Cow<'a, str>>,
    id: Option<&'a str>,
    method: Option<Cow<'a, str>>,
    params: Option<&'a str>,
    result: Option<&'a str>,
    error: Option<&'a str>,
}

impl<'a> Members<'a> {
    fn classify(self) -> Result<Message<'a>, Malformed> {
        let id = self.id.filter(|id| *id != "null");
        let invalid = |message: String| Malformed {
            code: INVALID_REQUEST,
            message,
            id: id.filter(|id| is_valid_id(id)).map(str::to_owned),
        };
        if self.jsonrpc.as_deref() != Some("2.0") {
            return Err(invalid(
                "Invalid Request: member \"jsonrpc\" must be \"2.0\"".to_owned(),
            ));
        }
        if let Some(id) = id
            && !is_valid_id(id)
        {
            return Err(invalid(format!(
                "Invalid Request: member \"id\" must be a string or a number, not {id}"
            )));
        }
        match (self.method, id, self.result, self.error) {
            (Some(method), Some(id), None, None) => Ok(Message::Request {
                id,
                method,
                params: self.params,
            }),
            (Some(method), None, None, None) => Ok(Message::Notification {
                method,
                params: self.params,
            }),
            (None, Some(id), Some(result), None) => Ok(Message::Result { id, result }),
            (None, id, None, Some(error)) => Ok(Message::Error { id, error }),
            _ => Err(invalid(
                "Invalid Request: a message needs \"method\" (request or notification) or \
                 exactly one of \"result\" and \"error\" (response)"
                    .to_owned(),
            )),
        }
    }
}

/// What the first bytes of a message too long to read show: its id (raw JSON, when a valid one
/// comes before the cut) and whether it has a `method` (a request or notification rather than
/// a response). Only the top level counts: an `id` inside `params` is not the message's.
///
/// ```
/// use mcp_middleware::jsonrpc::head_of;
/// assert_eq!(head_of(br#"{"jsonrpc":"2.0","id":7,"result":{"text":"xxxx"#), (Some("7".to_owned()), false));
/// assert_eq!(head_of(br#"{"method":"x","params":{"id":3,"#), (None, true));
/// ```
pub fn head_of(prefix: &[u8]) -> (Option<String>, bool) {
    let text = match std::str::from_utf8(prefix) {
        Ok(text) => text,
        // Cut inside a character: what comes before it is text.
        Err(err) => std::str::from_utf8(&prefix[..err.valid_up_to()]).unwrap_or_default(),
    };
    let (id, method) = scan::head(text);
    (id.filter(|id| is_valid_id(id)).map(str::to_owned), method)
}

/// Where the id is in the first bytes of a result still arriving (a line whose end is not
/// read yet), when those bytes show a JSON-RPC 2.0 result with a valid id and no `method`:
/// what the proxy needs to forward such an answer while it arrives (cut-through), with its
/// id replaced. `None` for anything else, which is then read whole.
pub(crate) fn result_head(prefix: &str) -> Option<Range<usize>> {
    scan::result_head(prefix).filter(|range| is_valid_id(&prefix[range.clone()]))
}

/// The id and the result of a result line whose `result` is a text `known` vouches for, read
/// from the members before `result` only: the answer is what [`Message::parse`] would make of
/// it (`Message::Result`), without crossing the result's megabytes to find its end. `known`
/// must vouch only for text it has read whole as one JSON value (the proxy's kept
/// `tools/list` results). `None`: the line is for [`Message::parse`].
pub(crate) fn known_result(line: &str, known: impl FnOnce(&str) -> bool) -> Option<(&str, &str)> {
    const WS: &[char] = &[' ', '\t', '\n', '\r'];
    let (id, start) = scan::result_start(line)?;
    let id = &line[id];
    if id == "null" || !is_valid_id(id) {
        return None;
    }
    // The result is the last member: after it, only the object's end.
    let end = line
        .trim_end_matches(WS)
        .strip_suffix('}')?
        .trim_end_matches(WS)
        .len();
    let result = line.get(start..end)?;
    known(result).then_some((id, result))
}

/// The id of a response (a result, or an error with an id), as raw JSON. A result whose `id`
/// comes before its `result` (as every SDK writes one) is read from the members before it,
/// without crossing what may be megabytes of payload; anything else is read by
/// [`Message::parse`]. `None` for a request, a notification or what is not JSON-RPC.
pub(crate) fn response_id(line: &str) -> Option<&str> {
    if let Some((id, _)) = scan::result_start(line) {
        let id = &line[id];
        return (id != "null" && is_valid_id(id)).then_some(id);
    }
    match Message::parse(line) {
        Ok(Message::Result { id, .. } | Message::Error { id: Some(id), .. }) => Some(id),
        _ => None,
    }
}

/// Whether raw JSON is a valid JSON-RPC id: a well-formed string or number.
fn is_valid_id(id: &str) -> bool {
    match id.as_bytes().first() {
        Some(b'"') => !id.contains('\\') || serde_json::from_str::<String>(id).is_ok(),
        Some(b'-' | b'0'..=b'9') => serde_json::from_str::<serde_json::Number>(id).is_ok(),
        _ => false,
    }
}

/// A member that must be a JSON string (`jsonrpc`, `method`), decoded.
fn decode_string(raw: &str) -> Result<Cow<'_, str>, Malformed> {
    let invalid = || Malformed {
        code: INVALID_REQUEST,
        message: format!("Invalid Request: expected a string, found {raw}"),
        id: None,
    };
    let inner = raw
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .ok_or_else(invalid)?;
    if inner.contains('\\') || inner.bytes().any(|b| b < 0x20) {
        serde_json::from_str::<String>(raw)
            .map(Cow::Owned)
            .map_err(|_| invalid())
    } else {
        Ok(Cow::Borrowed(inner))
    }
}

/// The byte range of `part` inside `line`. `part` must be a sub-slice of `line`, as every
/// raw member of a [`Message`] parsed from `line` is.
pub fn range_in(line: &str, part: &str) -> Range<usize> {
    let start = (part.as_ptr() as usize).wrapping_sub(line.as_ptr() as usize);
    debug_assert!(start <= line.len(), "range_in: part is not inside line");
    start..start + part.len()
}

/// Copies `line` with each range replaced by its text. The ranges must not overlap; they may
/// come in any order (peers write members in any order: `result` before `id` is common).
///
/// ```
/// use mcp_middleware::jsonrpc::splice;
/// assert_eq!(splice(r#"{"id":1,"x":2}"#, &[(6..7, "42")]), r#"{"id":42,"x":2}"#);
/// assert_eq!(splice("abcdef", &[(4..5, "E"), (0..1, "A")]), "AbcdEf");
/// ```
pub fn splice(line: &str, replacements: &[(Range<usize>, &str)]) -> String {
    if replacements.is_sorted_by_key(|(range, _)| range.start) {
        splice_sorted(line, replacements.iter())
    } else {
        let mut sorted: Vec<&(Range<usize>, &str)> = replacements.iter().collect();
        sorted.sort_unstable_by_key(|(range, _)| range.start);
        splice_sorted(line, sorted.into_iter())
    }
}

fn splice_sorted<'a>(
    line: &str,
    replacements: impl Iterator<Item = &'a (Range<usize>, &'a str)> + Clone,
) -> String {
    let extra: usize = replacements.clone().map(|(_, text)| text.len()).sum();
    let mut out = String::with_capacity(line.len() + extra);
    let mut at = 0;
    for (range, text) in replacements {
        // Overlapping or out-of-line ranges cannot come from one parsed message; skip them
        // rather than panic on the forwarding path.
        if range.start < at || range.end > line.len() {
            continue;
        }
        out.push_str(&line[at..range.start]);
        out.push_str(text);
        at = range.end;
    }
    out.push_str(&line[at..]);
    out
}

/// A request line: `{"jsonrpc":"2.0","id":<id>,"method":<method>,"params":<params>}`.
/// `id` and `params` are raw JSON.
pub fn request(id: &str, method: &str, params: Option<&str>) -> String {
    call(Some(id), method, params)
}

/// A notification line. `params` is raw JSON.
pub fn notification(method: &str, params: Option<&str>) -> String {
    call(None, method, params)
}

fn call(id: Option<&str>, method: &str, params: Option<&str>) -> String {
    let mut out = String::with_capacity(64 + params.map_or(0, str::len));
    out.push_str(r#"{"jsonrpc":"2.0","#);
    if let Some(id) = id {
        out.push_str(r#""id":"#);
        out.push_str(id);
        out.push(',');
    }
    out.push_str(r#""method":"#);
    push_json_string(&mut out, method);
    if let Some(params) = params {
        out.push_str(r#","params":"#);
        out.push_str(params);
    }
    out.push('}');
    out
}

/// A success response line. `id` and `result` are raw JSON.
pub fn result(id: &str, result: &str) -> String {
    response(id, "result", result)
}

/// From this many bytes, [`result_around`] writes the line in the result's own buffer.
const AROUND_FROM: usize = 16 * 1024;
/// At most this much unused room in a result's buffer for [`result_around`] to use it.
const AROUND_SPARE: usize = 64 * 1024;

/// The same line as [`result`], written in `result`'s own buffer when it has room for the
/// envelope: a large result (a listing, a page) is moved up once within its buffer rather than
/// copied onto the fresh pages of a new line.
pub(crate) fn result_around(id: &str, mut result: String) -> String {
    const HEAD: &str = r#"{"jsonrpc":"2.0","id":"#;
    const MEMBER: &str = r#","result":"#;
    let room = HEAD.len() + id.len() + MEMBER.len() + 1;
    // A buffer much larger than its text (a page cut from a larger result) is not carried on:
    // the line would hold its memory until it is written.
    let spare = result.capacity() - result.len();
    if result.len() < AROUND_FROM || spare < room || spare > AROUND_SPARE {
        return self::result(id, &result);
    }
    let mut head = String::with_capacity(room);
    head.push_str(HEAD);
    head.push_str(id);
    head.push_str(MEMBER);
    result.insert_str(0, &head);
    result.push('}');
    result
}

/// An error response line with a raw error object. `id` and `error` are raw JSON.
pub fn error_response(id: &str, error: &str) -> String {
    response(id, "error", error)
}

fn response(id: &str, member: &str, value: &str) -> String {
    let mut out = String::with_capacity(40 + value.len());
    out.push_str(r#"{"jsonrpc":"2.0","id":"#);
    out.push_str(id);
    out.push_str(",\"");
    out.push_str(member);
    out.push_str("\":");
    out.push_str(value);
    out.push('}');
    out
}

/// An error response line. `id` is raw JSON (`None` writes `null`).
///
/// ```
/// use mcp_middleware::jsonrpc::{error, METHOD_NOT_FOUND};
/// assert_eq!(
///     error(Some("3"), METHOD_NOT_FOUND, "Method not found: x"),
///     r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"Method not found: x"}}"#
/// );
/// ```
pub fn error(id: Option<&str>, code: i64, message: &str) -> String {
    let mut out = String::with_capacity(64 + message.len());
    out.push_str(r#"{"jsonrpc":"2.0","id":"#);
    out.push_str(id.unwrap_or("null"));
    let _ = write!(out, r#","error":{{"code":{code},"message":"#);
    push_json_string(&mut out, message);
    out.push_str("}}");
    out
}

/// Appends `text` as a JSON string literal.
fn push_json_string(out: &mut String, text: &str) {
    // Method names and messages are short; serde_json's escaper is correct for every input.
    match serde_json::to_string(text) {
        Ok(quoted) => out.push_str(&quoted),
        Err(_) => out.push_str("\"\""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_responses_id_is_read_before_its_result_or_else_by_parsing() {
        let big = format!(
            r#"{{"jsonrpc":"2.0","id":7,"result":{{"t":"{}"}}}}"#,
            "x".repeat(1000)
        );
        assert_eq!(response_id(&big), Some("7"));
        // The id after the result, an error, and what is no response.
        assert_eq!(
            response_id(r#"{"jsonrpc":"2.0","result":{},"id":"a"}"#),
            Some(r#""a""#)
        );
        assert_eq!(
            response_id(r#"{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"m"}}"#),
            Some("3")
        );
        for none in [
            r#"{"jsonrpc":"2.0","id":3,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":null,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":[1],"result":{}}"#,
            r#"{"jsonrpc":"1.0","id":1,"result":{}}"#,
            "not json",
        ] {
            assert_eq!(response_id(none), None, "{none}");
        }
    }

    #[test]
    fn classifies_every_kind() {
        let request = r#"{"jsonrpc":"2.0","id":"a","method":"m","params":{"x":1}}"#;
        assert!(matches!(
            Message::parse(request),
            Ok(Message::Request { .. })
        ));
        let note = r#"{"jsonrpc":"2.0","method":"notifications/x"}"#;
        assert!(matches!(
            Message::parse(note),
            Ok(Message::Notification { params: None, .. })
        ));
        let ok = r#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
        assert!(matches!(Message::parse(ok), Ok(Message::Result { .. })));
        let err = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#;
        assert!(matches!(
            Message::parse(err),
            Ok(Message::Error { id: None, .. })
        ));
    }

    #[test]
    fn a_known_result_is_read_as_parse_reads_it_and_anything_else_is_left_to_parse() {
        let known = r#"{"tools":[{"name":"a","inputSchema":{"type":"object"}}]}"#;
        let is_known = |text: &str| text == known;
        for line in [
            format!(r#"{{"jsonrpc":"2.0","id":7,"result":{known}}}"#),
            format!(
                r#" {{ "id" : "x\"y" , "jsonrpc" : "2.0", "z": [1, {{}}], "result" : {known} }} "#
            ),
            format!("{{\"jsonrpc\":\"2.0\",\"id\":-3,\"result\":{known}\r\n}}\n"),
        ] {
            let Ok(Message::Result { id, result }) = Message::parse(&line) else {
                panic!("not a result: {line}");
            };
            assert_eq!(known_result(&line, is_known), Some((id, result)), "{line}");
        }
        for line in [
            // Not vouched for.
            r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[]}}"#.to_owned(),
            // A member after the result, or anything but the object's end.
            format!(r#"{{"jsonrpc":"2.0","id":7,"result":{known},"error":{{}}}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":7,"result":{known}}}}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":7,"result":{known}}} x"#),
            format!(r#"{{"jsonrpc":"2.0","id":7,"result":{known}"#),
            // The result nested in something else.
            format!(r#"{{"jsonrpc":"2.0","id":7,"result":{{"x":{known}}}"#),
            // What a result must not have, or must have, before it.
            format!(r#"{{"jsonrpc":"2.0","id":7,"method":"m","result":{known}}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":null,"result":{known}}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":true,"result":{known}}}"#),
            format!(r#"{{"jsonrpc":"2.0","result":{known}}}"#),
            format!(r#"{{"id":7,"result":{known}}}"#),
            format!(r#"{{"jsonrpc":"1.0","id":7,"result":{known}}}"#),
        ] {
            assert_eq!(known_result(&line, is_known), None, "{line}");
        }
    }

    #[test]
    fn a_result_written_around_in_place_is_the_line_result_writes() {
        let large = format!(r#"{{"text":"{}"}}"#, "\\u00e9x".repeat(AROUND_FROM));
        for id in ["7", "\"a\\\"b\"", "-12345678901234567890"] {
            for (text, spare) in [
                ("{}", 64),
                (large.as_str(), 0),
                (large.as_str(), 64),
                (large.as_str(), AROUND_SPARE + 1),
            ] {
                let mut owned = String::with_capacity(text.len() + spare);
                owned.push_str(text);
                assert_eq!(result_around(id, owned), result(id, text), "{id} {spare}");
            }
        }
        // With room, the result's own buffer carries the line.
        let mut owned = String::with_capacity(large.len() + 64);
        owned.push_str(&large);
        let at = owned.as_ptr();
        let line = result_around("1", owned);
        assert_eq!(line.as_ptr(), at);
    }

    #[test]
    fn rejects_what_is_not_json_rpc() {
        let parse = Message::parse("{not json").unwrap_err();
        assert_eq!(parse.code, PARSE_ERROR);
        assert!(
            parse.message.contains("line 1 column 2"),
            "{}",
            parse.message
        );
        let version = Message::parse(r#"{"jsonrpc":"1.0","id":4,"method":"m"}"#).unwrap_err();
        assert_eq!(
            (version.code, version.id.as_deref()),
            (INVALID_REQUEST, Some("4"))
        );
        let kind = Message::parse(r#"{"jsonrpc":"2.0","id":4}"#).unwrap_err();
        assert_eq!(kind.code, INVALID_REQUEST);
        let id = Message::parse(r#"{"jsonrpc":"2.0","id":{},"method":"m"}"#).unwrap_err();
        assert_eq!(id.code, INVALID_REQUEST);
        let wrong_type = Message::parse(r#"{"jsonrpc":"2.0","id":1,"method":5}"#).unwrap_err();
        assert_eq!(wrong_type.code, INVALID_REQUEST);
        let batch = Message::parse(r#"[{"jsonrpc":"2.0","id":1,"method":"m"}]"#).unwrap_err();
        assert_eq!(batch.code, INVALID_REQUEST);
    }

    #[test]
    fn splices_the_id_and_keeps_every_other_byte() {
        let line = r#"{"jsonrpc":"2.0", "id" : "abc","result":{"unknown":[1, 2]},"extra":true}"#;
        let Ok(Message::Result { id, .. }) = Message::parse(line) else {
            panic!("not a result")
        };
        let out = splice(line, &[(range_in(line, id), "9")]);
        assert_eq!(
            out,
            r#"{"jsonrpc":"2.0", "id" : 9,"result":{"unknown":[1, 2]},"extra":true}"#
        );
    }

    #[test]
    fn builds_messages_with_escaped_text() {
        assert_eq!(
            error(None, PARSE_ERROR, "bad \"quote\""),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad \"quote\""}}"#
        );
        assert_eq!(
            request("1", "ping", None),
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#
        );
        assert_eq!(
            notification("notifications/initialized", Some("{}")),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}"#
        );
        assert_eq!(
            result("\"x\"", "{}"),
            r#"{"jsonrpc":"2.0","id":"x","result":{}}"#
        );
    }
}
