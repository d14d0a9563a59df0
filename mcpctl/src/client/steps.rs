//! The steps a `mcpctl client` session runs, read from command-line words or script lines.
//!
//! ```text
//! info                         the server's initialize result
//! tools list                   tools/list (every page)
//! tools call NAME [JSON]       tools/call; JSON is the arguments object
//! resources list               resources/list (every page)
//! resources templates          resources/templates/list (every page)
//! resources read URI           resources/read
//! prompts list                 prompts/list (every page)
//! prompts get NAME [JSON]      prompts/get; JSON is the arguments object
//! ping                         ping
//! sleep MS                     wait, showing notifications that arrive
//! METHOD [JSON]                any request (a method with a `/`), JSON its params;
//!                              notifications/... is sent as a notification
//! ```
//!
//! On the command line each step is a few words and the JSON one word (quote it); the next
//! step starts right after, so steps need no separator. In a script (`--script FILE`) each
//! line is a step, the JSON running from the first `{` to the end of the line; blank lines
//! and lines starting with `#` are skipped.

use std::fmt;

use serde_json::{Map, Value};

/// One thing to do in the session.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    /// Show the initialize result.
    Info,
    /// A request whose result is shown; lists follow `nextCursor` to the end.
    Request {
        /// How the step was written, for headers and errors.
        label: String,
        /// The method.
        method: String,
        /// Its params.
        params: Value,
        /// For list methods: the member that holds the items, gathered over every page.
        pages: Option<&'static str>,
    },
    /// A notification to send.
    Notify {
        /// The method.
        method: String,
        /// Its params.
        params: Value,
    },
    /// Wait this many milliseconds.
    Sleep(u64),
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Info => f.write_str("info"),
            Step::Request { label, .. } => f.write_str(label),
            Step::Notify { method, .. } => f.write_str(method),
            Step::Sleep(ms) => write!(f, "sleep {ms}"),
        }
    }
}

/// Reads steps from command-line words.
pub(crate) fn from_words(words: &[String]) -> Result<Vec<Step>, String> {
    let mut words = words.iter().map(String::as_str).peekable();
    let mut steps = Vec::new();
    while let Some(first) = words.next() {
        let mut take = |what: &str| {
            words
                .next()
                .ok_or_else(|| format!("`{first}` needs {what}"))
        };
        let step = match first {
            "tools" | "resources" | "prompts" => {
                let verb = take("a verb (list, call, read, get, ...)")?;
                let target = match (first, verb) {
                    ("tools", "call") | ("prompts", "get") => Some(take("a name")?),
                    ("resources", "read") => Some(take("a URI")?),
                    _ => None,
                };
                let json = match (first, verb) {
                    ("tools", "call") | ("prompts", "get") => {
                        words.next_if(|w| w.trim_start().starts_with('{'))
                    }
                    _ => None,
                };
                build(first, verb, target, json)?
            }
            "sleep" => {
                let ms = take("milliseconds (`sleep 500`)")?;
                Step::Sleep(
                    ms.parse()
                        .map_err(|_| format!("`sleep {ms}`: expected milliseconds"))?,
                )
            }
            _ => {
                let json = words.next_if(|w| {
                    let w = w.trim_start();
                    w.starts_with('{') || w.starts_with('[')
                });
                single(first, json)?
            }
        };
        steps.push(step);
    }
    Ok(steps)
}

/// Reads steps from a script, one per line.
pub(crate) fn from_script(text: &str) -> Result<Vec<Step>, String> {
    let mut steps = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (words, json) = match line.find(['{', '[']) {
            Some(at) => (&line[..at], Some(line[at..].trim())),
            None => (line, None),
        };
        let mut words: Vec<String> = words.split_whitespace().map(str::to_owned).collect();
        words.extend(json.map(str::to_owned));
        let parsed = from_words(&words).map_err(|e| format!("line {}: {e}", number + 1))?;
        if parsed.len() != 1 {
            return Err(format!(
                "line {}: expected one step, found {}",
                number + 1,
                parsed.len()
            ));
        }
        steps.extend(parsed);
    }
    Ok(steps)
}

fn build(noun: &str, verb: &str, target: Option<&str>, json: Option<&str>) -> Result<Step, String> {
    let label = [Some(noun), Some(verb), target]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ");
    let list = |method: &str, member: &'static str| Step::Request {
        label: label.clone(),
        method: method.to_owned(),
        params: Value::Object(Map::new()),
        pages: Some(member),
    };
    let named = |method: &str, key: &str, value: &str, arguments: Option<Value>| {
        let mut params = Map::new();
        params.insert(key.to_owned(), Value::String(value.to_owned()));
        if let Some(arguments) = arguments {
            params.insert("arguments".to_owned(), arguments);
        }
        Step::Request {
            label: label.clone(),
            method: method.to_owned(),
            params: Value::Object(params),
            pages: None,
        }
    };
    let arguments = json
        .map(|text| object(text, &format!("the arguments of `{label}`")))
        .transpose()?;
    Ok(match (noun, verb, target) {
        ("tools", "list", _) => list("tools/list", "tools"),
        ("tools", "call", Some(name)) => named("tools/call", "name", name, arguments),
        ("resources", "list", _) => list("resources/list", "resources"),
        ("resources", "templates", _) => list("resources/templates/list", "resourceTemplates"),
        ("resources", "read", Some(uri)) => named("resources/read", "uri", uri, None),
        ("prompts", "list", _) => list("prompts/list", "prompts"),
        ("prompts", "get", Some(name)) => named("prompts/get", "name", name, arguments),
        _ => {
            return Err(format!(
                "unknown step `{noun} {verb}`: expected `{noun} {}`",
                match noun {
                    "tools" => "list` or `tools call NAME [JSON]",
                    "resources" => "list`, `resources templates` or `resources read URI",
                    _ => "list` or `prompts get NAME [JSON]",
                }
            ));
        }
    })
}

fn single(word: &str, json: Option<&str>) -> Result<Step, String> {
    match word {
        "info" => Ok(Step::Info),
        "ping" => Ok(Step::Request {
            label: "ping".to_owned(),
            method: "ping".to_owned(),
            params: Value::Object(Map::new()),
            pages: None,
        }),
        method if method.contains('/') => {
            let params = match json {
                Some(text) => serde_json::from_str(text)
                    .map_err(|e| format!("the params of `{method}` are not JSON: {e}"))?,
                None => Value::Object(Map::new()),
            };
            if method.starts_with("notifications/") {
                Ok(Step::Notify {
                    method: method.to_owned(),
                    params,
                })
            } else {
                Ok(Step::Request {
                    label: method.to_owned(),
                    method: method.to_owned(),
                    params,
                    pages: None,
                })
            }
        }
        other => Err(format!(
            "unknown step `{other}`: expected info, tools, resources, prompts, ping, sleep MS, or a method such as tools/list"
        )),
    }
}

fn object(text: &str, what: &str) -> Result<Value, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err(format!("{what} must be a JSON object")),
        Err(e) => Err(format!("{what} are not JSON: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn words(text: &[&str]) -> Vec<Step> {
        from_words(&text.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn steps_follow_each_other_without_separators() {
        let steps = words(&[
            "tools",
            "list",
            "tools",
            "call",
            "begin_session",
            r#"{"intent":"x"}"#,
            "tools",
            "call",
            "t",
            "custom/echo",
            "[1]",
            "notifications/custom",
            "info",
        ]);
        assert_eq!(steps.len(), 6);
        let Step::Request { method, params, .. } = &steps[1] else {
            panic!()
        };
        assert_eq!(method, "tools/call");
        assert_eq!(
            params,
            &json!({"name": "begin_session", "arguments": {"intent": "x"}})
        );
        let Step::Request { params, .. } = &steps[2] else {
            panic!()
        };
        assert_eq!(params, &json!({"name": "t"}));
        let Step::Request { params, .. } = &steps[3] else {
            panic!()
        };
        assert_eq!(params, &json!([1]));
        assert!(matches!(steps[4], Step::Notify { .. }));
        assert_eq!(steps[5], Step::Info);
    }

    #[test]
    fn scripts_take_json_with_spaces() {
        let steps = from_script(
            "# a gated flow\n\ntools list\ntools call begin_session {\"intent\": \"add two numbers\"}\nsleep 10\n",
        )
        .unwrap();
        assert_eq!(steps.len(), 3);
        assert_eq!(steps[2], Step::Sleep(10));
        let err = from_script("tools\n").unwrap_err();
        assert!(err.starts_with("line 1:"), "{err}");
    }

    #[test]
    fn bad_steps_say_what_was_expected() {
        let err = from_words(&["tools".to_owned(), "lst".to_owned()]).unwrap_err();
        assert!(err.contains("tools list"), "{err}");
        let err = from_words(&[
            "tools".to_owned(),
            "call".to_owned(),
            "x".to_owned(),
            "{".to_owned(),
        ])
        .unwrap_err();
        assert!(err.contains("not JSON"), "{err}");
        let err = from_words(&["frobnicate".to_owned()]).unwrap_err();
        assert!(err.contains("unknown step"), "{err}");
    }
}
