//! A fast scanner for the top level of a JSON-RPC object.
//!
//! It finds where each top-level member's value starts and ends without looking inside payloads
//! more than needed to find their end: string contents are skipped with `memchr`, and only the
//! bytes between strings are looked at one by one. A 1.25 MB `tools/list` result, which is mostly
//! strings, is crossed several times faster than by a validating parser.
//!
//! It does not validate payloads: a syntax error inside `params` or `result` passes through to the
//! other peer as it would without the proxy. The members the proxy reads (`jsonrpc`, `id`,
//! `method`) are validated by [`super::Message::parse`]. Anything unusual (escaped member names,
//! duplicates, a line that does not close) makes the scanner give up, and the caller falls back to
//! serde_json, whose error messages say what is wrong and where.

/// The raw JSON text of each top-level member the proxy cares about.
#[derive(Debug, Default)]
pub(super) struct Members<'a> {
    pub(super) jsonrpc: Option<&'a str>,
    pub(super) id: Option<&'a str>,
    pub(super) method: Option<&'a str>,
    pub(super) params: Option<&'a str>,
    pub(super) result: Option<&'a str>,
    pub(super) error: Option<&'a str>,
}

/// Scans a line holding one JSON object. `None` if anything is unusual.
pub(super) fn members(line: &str) -> Option<Members<'_>> {
    let bytes = line.as_bytes();
    let mut at = skip_ws(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    at = skip_ws(bytes, at + 1);
    let mut found = Members::default();
    if bytes.get(at) == Some(&b'}') {
        return (skip_ws(bytes, at + 1) == bytes.len()).then_some(found);
    }
    loop {
        if bytes.get(at) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(bytes, at)?;
        let key = &line[at + 1..key_end - 1];
        at = skip_ws(bytes, key_end);
        if bytes.get(at) != Some(&b':') {
            return None;
        }
        let start = skip_ws(bytes, at + 1);
        let end = value_end(bytes, start)?;
        let value = &line[start..end];
        let slot = match key {
            "jsonrpc" => &mut found.jsonrpc,
            "id" => &mut found.id,
            "method" => &mut found.method,
            "params" => &mut found.params,
            "result" => &mut found.result,
            "error" => &mut found.error,
            // Escapes in a member name could spell one of the above: let serde decide.
            _ if key.contains('\\') => return None,
            _ => &mut None,
        };
        if slot.replace(value).is_some() {
            return None;
        }
        at = skip_ws(bytes, end);
        match bytes.get(at) {
            Some(b',') => at = skip_ws(bytes, at + 1),
            Some(b'}') => {
                return (skip_ws(bytes, at + 1) == bytes.len()).then_some(found);
            }
            _ => return None,
        }
    }
}

/// What the first bytes of a message too long to read whole show of its top level: the raw
/// `id`, and whether a `method` came before the scan ran off the end (or hit anything
/// unusual). Lets the proxy answer (or fail) the right request for a message it refuses
/// without reading it all.
pub(super) fn head(prefix: &str) -> (Option<&str>, bool) {
    let bytes = prefix.as_bytes();
    let mut at = skip_ws(bytes, 0);
    let (mut id, mut method) = (None, false);
    if bytes.get(at) != Some(&b'{') {
        return (None, false);
    }
    at = skip_ws(bytes, at + 1);
    while bytes.get(at) == Some(&b'"') {
        let Some(key_end) = string_end(bytes, at) else {
            break;
        };
        let key = &prefix[at + 1..key_end - 1];
        at = skip_ws(bytes, key_end);
        if bytes.get(at) != Some(&b':') {
            break;
        }
        let start = skip_ws(bytes, at + 1);
        if key == "method" {
            method = true;
        }
        // A value that runs off the end of the prefix is cut: it is not trusted.
        let Some(end) = value_end(bytes, start).filter(|end| *end < bytes.len()) else {
            break;
        };
        if key == "id" {
            id = Some(&prefix[start..end]);
        }
        at = skip_ws(bytes, end);
        match bytes.get(at) {
            Some(b',') => at = skip_ws(bytes, at + 1),
            _ => break,
        }
    }
    (id, method)
}

/// Where the `id` of a result is in the head of a line still arriving: its byte range, when
/// the top level shows `jsonrpc` (if at all) as `"2.0"`, a complete `id`, no `method`, and
/// then a `result` whose value runs past the end of the prefix. Anything else (a `method`
/// anywhere before, an escaped name, a result that already ended) is `None`: the line is read
/// whole and judged by [`super::Message::parse`].
pub(super) fn result_head(prefix: &str) -> Option<std::ops::Range<usize>> {
    let before = before_result(prefix)?;
    // The result goes on past the prefix: this is the line to cut through.
    match value_end(prefix.as_bytes(), before.result) {
        Some(_) => None,
        None if before.result < prefix.len() => before.id,
        None => None,
    }
}

/// Where the `id` and the `result` of a result line start, read from the members before
/// `result` only: `jsonrpc` once as `"2.0"`, one `id`, no `method`, `params` or `error`, no
/// escaped name. What comes from `result` on is not looked at: the caller vouches for it.
pub(super) fn result_start(line: &str) -> Option<(std::ops::Range<usize>, usize)> {
    let before = before_result(line)?;
    (before.jsonrpc == 1).then_some((before.id?, before.result))
}

/// What the members before a top-level `result` show.
struct BeforeResult {
    /// The `id`'s byte range, if one came before.
    id: Option<std::ops::Range<usize>>,
    /// How many times `jsonrpc` came before, as `"2.0"`.
    jsonrpc: usize,
    /// Where the value of `result` starts.
    result: usize,
}

/// Scans the top level up to the value of `result`. `None` if a member before it is one a
/// result must not have (`method`, `params`, `error`, a second `id`, a `jsonrpc` other than
/// `"2.0"`), has an escaped name, or does not end before the text does.
fn before_result(prefix: &str) -> Option<BeforeResult> {
    let bytes = prefix.as_bytes();
    let mut at = skip_ws(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    at = skip_ws(bytes, at + 1);
    let mut id = None;
    let mut jsonrpc = 0;
    loop {
        if bytes.get(at) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(bytes, at)?;
        let key = &prefix[at + 1..key_end - 1];
        at = skip_ws(bytes, key_end);
        if bytes.get(at) != Some(&b':') {
            return None;
        }
        let start = skip_ws(bytes, at + 1);
        if key == "result" {
            return Some(BeforeResult {
                id,
                jsonrpc,
                result: start,
            });
        }
        let end = value_end(bytes, start).filter(|end| *end < bytes.len())?;
        match key {
            "id" if id.is_none() => id = Some(start..end),
            "jsonrpc" if &prefix[start..end] == "\"2.0\"" => jsonrpc += 1,
            "jsonrpc" | "id" | "method" | "error" | "params" => return None,
            _ if key.contains('\\') => return None,
            _ => {}
        }
        at = skip_ws(bytes, end);
        match bytes.get(at) {
            Some(b',') => at = skip_ws(bytes, at + 1),
            _ => return None,
        }
    }
}

fn skip_ws(bytes: &[u8], mut at: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = bytes.get(at) {
        at += 1;
    }
    at
}

/// The index just past the string starting at `at` (which is a `"`).
fn string_end(bytes: &[u8], at: usize) -> Option<usize> {
    let mut from = at + 1;
    loop {
        let hit = from + memchr::memchr2(b'"', b'\\', bytes.get(from..)?)?;
        if bytes[hit] == b'"' {
            return Some(hit + 1);
        }
        from = hit + 2;
    }
}

/// The index just past the value starting at `at`.
fn value_end(bytes: &[u8], at: usize) -> Option<usize> {
    match bytes.get(at)? {
        b'"' => string_end(bytes, at),
        b'{' | b'[' => container_end(bytes, at),
        _ => {
            let len = bytes[at..]
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .unwrap_or(bytes.len() - at);
            (len > 0).then_some(at + len)
        }
    }
}

/// The index just past the object or array starting at `at`.
fn container_end(bytes: &[u8], at: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut from = at;
    loop {
        // Between strings: structure, numbers and literals, looked at byte by byte.
        let quote = memchr::memchr(b'"', &bytes[from..]).map_or(bytes.len(), |q| from + q);
        for (offset, byte) in bytes[from..quote].iter().enumerate() {
            match byte {
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    depth = depth.checked_sub(1)?;
                    if depth == 0 {
                        return Some(from + offset + 1);
                    }
                }
                _ => {}
            }
        }
        if quote == bytes.len() {
            return None;
        }
        from = string_end(bytes, quote)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_each_member_whatever_the_order_and_spacing() {
        let line = r#" { "result" : {"a":["}", {"b":"\"]"}], "c": [1,2,{}]} , "id":"x\"y", "jsonrpc":"2.0", "z": null } "#;
        let found = members(line).unwrap();
        assert_eq!(
            found.result,
            Some(r#"{"a":["}", {"b":"\"]"}], "c": [1,2,{}]}"#)
        );
        assert_eq!(found.id, Some(r#""x\"y""#));
        assert_eq!(found.jsonrpc, Some(r#""2.0""#));
        assert_eq!(found.method, None);
    }

    #[test]
    fn finds_the_id_of_a_result_still_arriving_and_nothing_else() {
        let head = r#"{"jsonrpc" : "2.0", "id" : 7, "x": [1], "result":{"text":"xxx"#;
        assert_eq!(result_head(head).map(|r| &head[r]), Some("7"));
        let head = r#"{"id":"a\"b","result":"xx"#;
        assert_eq!(result_head(head).map(|r| &head[r]), Some(r#""a\"b""#));
        for head in [
            r#"{"result":{"text":"xxx"#,
            r#"{"id":1,"method":"x","result":{"#,
            r#"{"id":1,"result":{}, "x":"#,
            r#"{"jsonrpc":"1.0","id":1,"result":{"#,
            r#"{"id":1,"id":2,"result":{"#,
            r#"{"id":1,"error":{"#,
            r#"{"id":1,"result":"#,
            r#"{"i\u0064":1,"result":{"#,
            r#"{"id":1"#,
        ] {
            assert_eq!(result_head(head), None, "{head}");
        }
    }

    #[test]
    fn finds_where_the_result_starts_from_the_members_before_it() {
        let line = r#"{ "jsonrpc" : "2.0", "id" : "a\"b", "x": [1], "result" : {"a":1} }"#;
        let (id, start) = result_start(line).unwrap();
        assert_eq!(&line[id], r#""a\"b""#);
        assert_eq!(&line[start..], r#"{"a":1} }"#);
        for line in [
            r#"{"id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","result":{},"id":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{},"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"params":{},"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"r\u0065sult":{}}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
        ] {
            assert_eq!(result_start(line), None, "{line}");
        }
    }

    #[test]
    fn reads_the_id_from_the_head_of_a_cut_message() {
        assert_eq!(
            head(r#"{"jsonrpc":"2.0", "id" : 7, "result":{"text":"xxx"#),
            (Some("7"), false)
        );
        assert_eq!(
            head(r#"{"id":"a\"b","method":"x","params":{"#),
            (Some(r#""a\"b""#), true)
        );
        assert_eq!(
            head(r#"{"method":"x","params":{"id":3,"pad":"#),
            (None, true)
        );
        assert_eq!(head(r#"{"jsonrpc":"2.0","id":12"#), (None, false));
        assert_eq!(head("not json"), (None, false));
    }

    #[test]
    fn gives_up_on_anything_unusual() {
        for line in [
            "",
            "[]",
            r#"{"id":1"#,
            r#"{"id":1,"id":2}"#,
            r#"{"\u0069d":1}"#,
            r#"{"id":1} x"#,
            r#"{"result":{"a":1}"#,
            r#"{"result":"unterminated}"#,
            r#"{"id":}"#,
        ] {
            assert!(members(line).is_none(), "{line}");
        }
        assert!(members("{}").is_some());
    }
}
