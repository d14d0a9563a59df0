//! JSON with comments (JSONC), as VS Code writes its settings: `//` and `/* */` comments and
//! trailing commas. No JSONC crate is in the dependency tree, so this turns JSONC into plain
//! JSON for `serde_json` with one pass over the bytes, outside strings only.

/// JSONC turned into JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stripped {
    /// The JSON text: comments and trailing commas replaced by spaces, newlines kept, so
    /// `serde_json`'s line and column numbers still point into the original file.
    pub(crate) text: String,
    /// Whether there was at least one comment (rewriting the file would lose it).
    pub(crate) had_comments: bool,
}

/// Why a text is not JSONC.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum JsoncError {
    /// A `/*` with no `*/` after it.
    #[error("a `/*` comment at line {line} is not closed")]
    UnclosedComment {
        /// Its line, from 1.
        line: usize,
    },
}

#[derive(Clone, Copy)]
enum State {
    Code,
    Text { escaped: bool },
    LineComment,
    BlockComment { star: bool },
}

/// Strips comments and trailing commas from `text` (and a leading byte-order mark).
pub(crate) fn strip(text: &str) -> Result<Stripped, JsoncError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut out = text.as_bytes().to_vec();
    let mut state = State::Code;
    let mut had_comments = false;
    // A comma seen in code, blanked if the next thing that is not space or comment closes.
    let mut pending_comma: Option<usize> = None;
    let mut line = 1;
    let mut comment_line = 0;
    let mut i = 0;
    while i < out.len() {
        let byte = out[i];
        if byte == b'\n' {
            line += 1;
        }
        match state {
            State::Code => match byte {
                b'"' => {
                    pending_comma = None;
                    state = State::Text { escaped: false };
                }
                b'/' if out.get(i + 1) == Some(&b'/') => {
                    had_comments = true;
                    state = State::LineComment;
                    out[i] = b' ';
                }
                b'/' if out.get(i + 1) == Some(&b'*') => {
                    had_comments = true;
                    comment_line = line;
                    state = State::BlockComment { star: false };
                    out[i] = b' ';
                    out[i + 1] = b' ';
                    i += 1;
                }
                b',' => pending_comma = Some(i),
                b'}' | b']' => {
                    if let Some(comma) = pending_comma.take() {
                        out[comma] = b' ';
                    }
                }
                b' ' | b'\t' | b'\r' | b'\n' => {}
                _ => pending_comma = None,
            },
            State::Text { escaped } => {
                state = match (escaped, byte) {
                    (false, b'\\') => State::Text { escaped: true },
                    (false, b'"') => State::Code,
                    _ => State::Text { escaped: false },
                };
            }
            State::LineComment => {
                if byte == b'\n' {
                    state = State::Code;
                } else {
                    out[i] = b' ';
                }
            }
            State::BlockComment { star } => {
                if star && byte == b'/' {
                    state = State::Code;
                } else {
                    state = State::BlockComment { star: byte == b'*' };
                }
                if byte != b'\n' {
                    out[i] = b' ';
                }
            }
        }
        i += 1;
    }
    if let State::BlockComment { .. } = state {
        return Err(JsoncError::UnclosedComment { line: comment_line });
    }
    // Only ASCII bytes outside strings were replaced, by ASCII spaces; a multi-byte character
    // in a comment becomes several spaces. The result is UTF-8 either way.
    let text = String::from_utf8(out)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    Ok(Stripped { text, had_comments })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(text: &str) -> serde_json::Value {
        let stripped = strip(text).unwrap_or_else(|e| panic!("{e}"));
        serde_json::from_str(&stripped.text).unwrap_or_else(|e| panic!("{e}: {}", stripped.text))
    }

    #[test]
    fn comments_go_and_strings_stay() {
        let text = r#"{
  // a line comment with "quotes" and /* inside
  "a": "no // comment /* here */", /* block
  over lines, with ü */ "b": "\"quoted\" \\", // end
  "c": [1, 2,], "d": {"e": 1,},
}"#;
        let stripped = strip(text).unwrap_or_else(|e| panic!("{e}"));
        assert!(stripped.had_comments);
        assert_eq!(stripped.text.lines().count(), text.lines().count());
        assert_eq!(
            json(text),
            serde_json::json!({"a": "no // comment /* here */", "b": "\"quoted\" \\", "c": [1, 2], "d": {"e": 1}})
        );
    }

    #[test]
    fn plain_json_is_unchanged() {
        let text = "{\"a\": [1, \"x,]\"], \"b\": \"/*\"}";
        let stripped = strip(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(stripped.text, text);
        assert!(!stripped.had_comments);
    }

    #[test]
    fn a_comma_before_a_comment_and_a_close_is_trailing() {
        assert_eq!(json("[1, // one\n /* two */ ]"), serde_json::json!([1]));
        // A comma between values stays, whatever comment sits beside it.
        assert_eq!(json("[1, /* x */ 2]"), serde_json::json!([1, 2]));
    }

    #[test]
    fn an_unclosed_comment_names_its_line() {
        assert_eq!(
            strip("{\n\"a\": 1 /* open\n}"),
            Err(JsoncError::UnclosedComment { line: 2 })
        );
        assert_eq!(strip("\u{feff}{}").map(|s| s.text), Ok("{}".to_owned()));
    }

    #[test]
    fn an_escaped_backslash_ends_before_the_quote() {
        assert_eq!(
            json(
                r#"{"a": "x\\", "b": 1 // c
}"#
            ),
            serde_json::json!({"a": "x\\", "b": 1})
        );
    }
}
