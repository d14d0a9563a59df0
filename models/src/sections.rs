//! How `section-split` takes a document apart: what kind of text it is, and its parts.
//!
//! A [`Node`] is a piece of a document (at first the whole of it) with the form that says how
//! to split it further. [`split`] returns a node's parts, in order; fewer than two parts means
//! the node cannot be split and is paged instead. Splitting is deterministic: the same text,
//! form and [`Settings`] always give the same parts, so a part is addressed by its path of
//! indexes from the root, and a section id is the document's content hash and that path.
//!
//! - **Markdown** splits at headings (ATX `#` and setext underlines, outside code fences and
//!   front matter): at the shallowest heading level that gives two or more parts. Text before
//!   the first heading is a part of its own (`(intro)`). A section's own heading is not a
//!   boundary when the section is split again.
//! - **JSON** splits an object into its members and an array into chunks of consecutive
//!   elements; an object with one member or an array with one element is looked through. A
//!   member's part is its value exactly as it is in the text; a chunk is a JSON array of the
//!   elements.
//! - **YAML** splits at the entries of the top level (keys, list items, `---` documents), and an
//!   entry at the entries nested in it. Parts are the lines as they are in the text.
//!
//! More than `max_sections` parts are grouped into runs of consecutive parts.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

/// What kind of text a document is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum Format {
    /// Markdown: split by headings.
    Markdown,
    /// JSON: split by members or array chunks.
    Json,
    /// YAML: split by top-level entries.
    Yaml,
    /// Anything else: paged.
    Plain,
}

impl Format {
    /// The format's name, as the table of contents says it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Format::Markdown => "Markdown",
            Format::Json => "JSON",
            Format::Yaml => "YAML",
            Format::Plain => "text",
        }
    }

    /// A byte that stands for the format in content hashes.
    pub(crate) fn tag(self) -> u8 {
        match self {
            Format::Markdown => b'm',
            Format::Json => b'j',
            Format::Yaml => b'y',
            Format::Plain => b'p',
        }
    }
}

/// The format of `text`: from the MIME type when it names Markdown, JSON or YAML; sniffed when
/// there is none or it is `text/plain`; plain for any other MIME type.
pub(crate) fn detect(mime_type: Option<&str>, text: &str) -> Format {
    let mime = mime_type.map(|m| {
        m.split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase()
    });
    match mime.as_deref() {
        Some("text/markdown" | "text/x-markdown") => Format::Markdown,
        Some("application/json" | "text/json") => Format::Json,
        Some(m) if m.ends_with("+json") => Format::Json,
        Some("application/yaml" | "application/x-yaml" | "text/yaml" | "text/x-yaml") => {
            Format::Yaml
        }
        Some(m) if m.ends_with("+yaml") => Format::Yaml,
        None | Some("text/plain") => sniff(text),
        Some(_) => Format::Plain,
    }
}

/// Guesses the format of text that came without a telling MIME type.
pub(crate) fn sniff(text: &str) -> Format {
    let trimmed = text.trim_start();
    if (trimmed.starts_with('{') || trimmed.starts_with('['))
        && serde_json::from_str::<IgnoredAny>(text).is_ok()
    {
        return Format::Json;
    }
    if looks_like_yaml(text) {
        return Format::Yaml;
    }
    if markdown_headings(text).len() >= 2 {
        return Format::Markdown;
    }
    Format::Plain
}

/// What splitting needs to know.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    /// A part no larger than this is not split further.
    pub(crate) threshold_bytes: usize,
    /// The most parts one table of contents lists; more are grouped.
    pub(crate) max_sections: usize,
}

/// How a node splits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Form {
    /// Not split: paged.
    Plain,
    /// Markdown; `own_heading`: the node starts with its own heading, which is not a boundary.
    Markdown {
        /// Whether the first line is the node's own heading.
        own_heading: bool,
    },
    /// A JSON value (an object's members or an array's elements), or a chunk of an array whose
    /// first element has index `first_index` in the original array.
    Json {
        /// The JSON path of the value (of the array, for a chunk).
        path: String,
        /// The index of the chunk's first element in the original array.
        first_index: usize,
    },
    /// YAML lines.
    Yaml {
        /// Whether the node is one entry (its first line is the key or item; its parts are the
        /// entries nested in it) or a run of entries at `indent`.
        entry: bool,
        /// The indentation of the node's entries.
        indent: usize,
        /// The path of the node (of the mapping or list holding a run of entries).
        path: String,
        /// The index of the run's first list item in its list.
        first_index: usize,
    },
}

/// A piece of a document: its text (a range of a shared string) and how it splits.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    source: Arc<str>,
    range: Range<usize>,
    /// How it splits.
    pub(crate) form: Form,
    /// Its title in its parent's table of contents.
    pub(crate) title: String,
}

impl Node {
    /// A whole document of `format`.
    pub(crate) fn root(source: Arc<str>, format: Format) -> Node {
        let form = match format {
            Format::Markdown => Form::Markdown { own_heading: false },
            Format::Json => Form::Json {
                path: "$".to_owned(),
                first_index: 0,
            },
            Format::Yaml => Form::Yaml {
                entry: false,
                indent: 0,
                path: String::new(),
                first_index: 0,
            },
            Format::Plain => Form::Plain,
        };
        Node {
            range: 0..source.len(),
            source,
            form,
            title: String::new(),
        }
    }

    /// The node's text.
    pub(crate) fn text(&self) -> &str {
        self.source.get(self.range.clone()).unwrap_or_default()
    }

    fn slice(&self, range: Range<usize>, form: Form, title: String) -> Node {
        let start = self.range.start + range.start;
        Node {
            source: self.source.clone(),
            range: start..start + range.len(),
            form,
            title,
        }
    }

    fn owned(text: String, form: Form, title: String) -> Node {
        Node {
            range: 0..text.len(),
            source: text.into(),
            form,
            title,
        }
    }
}

/// The parts of `node`, in order (grouped when there are more than `max_sections`); empty or
/// one part: the node does not split.
pub(crate) fn split(node: &Node, settings: Settings) -> Vec<Node> {
    let parts = match &node.form {
        Form::Plain => Vec::new(),
        Form::Markdown { own_heading } => split_markdown(node, *own_heading),
        Form::Json { path, first_index } => split_json(node, path, *first_index, settings),
        Form::Yaml {
            entry,
            indent,
            path,
            first_index,
        } => split_yaml(node, *entry, *indent, path, *first_index, settings),
    };
    if parts.len() > settings.max_sections.max(2) {
        group(node, parts, settings.max_sections.max(2))
    } else {
        parts
    }
}

/// Runs of consecutive parts, at most `max` of them.
fn group(node: &Node, parts: Vec<Node>, max: usize) -> Vec<Node> {
    let per_group = parts.len().div_ceil(max);
    let mut groups = Vec::with_capacity(max);
    let mut parts = parts.into_iter().peekable();
    while parts.peek().is_some() {
        let run: Vec<Node> = parts.by_ref().take(per_group).collect();
        groups.push(group_of(node, run));
    }
    groups
}

fn group_of(node: &Node, mut run: Vec<Node>) -> Node {
    if run.len() == 1
        && let Some(only) = run.pop()
    {
        return only;
    }
    let (first, last) = match (run.first(), run.last()) {
        (Some(first), Some(last)) => (first.title.clone(), last.title.clone()),
        _ => return Node::owned(String::new(), Form::Plain, String::new()),
    };
    let title = format!("{first} … {last} ({} parts)", run.len());
    match &node.form {
        Form::Json { path, .. } => json_group(path, &run, title),
        form => {
            // Line-based parts are consecutive ranges of the same source.
            let start = run.first().map_or(0, |p| p.range.start);
            let end = run.last().map_or(0, |p| p.range.end);
            let form = match form {
                Form::Yaml { path, .. } => {
                    let (indent, first_index) = match run.first().map(|p| &p.form) {
                        Some(Form::Yaml { indent, .. }) => (*indent, yaml_list_index(&run[0])),
                        _ => (0, 0),
                    };
                    Form::Yaml {
                        entry: false,
                        indent,
                        path: path.clone(),
                        first_index,
                    }
                }
                _ => Form::Markdown { own_heading: false },
            };
            Node {
                source: node.source.clone(),
                range: start..end,
                form,
                title,
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Markdown

/// A heading: where its line starts, its level and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Heading {
    start: usize,
    level: usize,
    title: String,
}

/// Lines with the offset each starts at (line breaks kept).
fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut offset = 0;
    text.split_inclusive('\n').map(move |line| {
        let start = offset;
        offset += line.len();
        (start, line)
    })
}

fn strip_break(line: &str) -> &str {
    line.trim_end_matches(['\n', '\r'])
}

/// The headings of a Markdown text, outside code fences and front matter.
fn markdown_headings(text: &str) -> Vec<Heading> {
    let mut headings = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    let mut front_matter = text.starts_with("---\n") || text.starts_with("---\r\n");
    let mut first = true;
    // The previous line, if it could be a setext heading's text: (start, trimmed text).
    let mut paragraph: Option<(usize, String)> = None;
    let mut paragraph_lines = 0;
    for (start, raw) in lines(text) {
        let line = strip_break(raw);
        if front_matter {
            if !first && (line == "---" || line == "...") {
                front_matter = false;
            }
            first = false;
            continue;
        }
        let trimmed = line.trim_start_matches(' ');
        let indent = line.len() - trimmed.len();
        if indent <= 3
            && let Some((marker, count)) = fence_marker(trimmed)
        {
            match fence {
                None => fence = Some((marker, count)),
                Some((open, open_count))
                    if open == marker
                        && count >= open_count
                        && trimmed[count..].trim().is_empty() =>
                {
                    fence = None;
                }
                Some(_) => {}
            }
            paragraph = None;
            paragraph_lines = 0;
            continue;
        }
        if fence.is_some() {
            continue;
        }
        if indent <= 3
            && let Some((level, title)) = atx_heading(trimmed)
        {
            headings.push(Heading {
                start,
                level,
                title,
            });
            paragraph = None;
            paragraph_lines = 0;
            continue;
        }
        if indent <= 3
            && let Some(level) = setext_underline(trimmed)
            && let Some((text_start, title)) = paragraph.take()
            && paragraph_lines == 1
        {
            headings.push(Heading {
                start: text_start,
                level,
                title,
            });
            paragraph_lines = 0;
            continue;
        }
        if trimmed.trim().is_empty() {
            paragraph = None;
            paragraph_lines = 0;
        } else {
            paragraph_lines += 1;
            paragraph =
                (indent <= 3 && !starts_block(trimmed)).then(|| (start, trimmed.trim().to_owned()));
        }
    }
    headings
}

fn fence_marker(line: &str) -> Option<(char, usize)> {
    let marker = line.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let count = line.chars().take_while(|c| *c == marker).count();
    (count >= 3).then_some((marker, count))
}

fn atx_heading(line: &str) -> Option<(usize, String)> {
    let level = line.bytes().take_while(|b| *b == b'#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &line[level..];
    if !(rest.is_empty() || rest.starts_with(' ') || rest.starts_with('\t')) {
        return None;
    }
    let mut title = rest.trim();
    // A closing run of `#` preceded by a space is not part of the title.
    let without_closing = title.trim_end_matches('#');
    if without_closing.is_empty() || without_closing.ends_with([' ', '\t']) {
        title = without_closing.trim_end();
    }
    Some((level, title.to_owned()))
}

fn setext_underline(line: &str) -> Option<usize> {
    let line = line.trim_end();
    if !line.is_empty() && line.bytes().all(|b| b == b'=') {
        Some(1)
    } else if line.len() >= 2 && line.bytes().all(|b| b == b'-') {
        Some(2)
    } else {
        None
    }
}

/// Whether a line starts a block that cannot be a setext heading's text.
fn starts_block(line: &str) -> bool {
    line.starts_with(['>', '|', '<'])
        || line.starts_with("- ")
        || line.starts_with("* ")
        || line.starts_with("+ ")
        || line
            .split_once(". ")
            .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn split_markdown(node: &Node, own_heading: bool) -> Vec<Node> {
    let text = node.text();
    let mut headings = markdown_headings(text);
    if own_heading && headings.first().is_some_and(|h| h.start == 0) {
        headings.remove(0);
    }
    for level in 1..=6 {
        let boundaries: Vec<&Heading> = headings.iter().filter(|h| h.level <= level).collect();
        let Some(first) = boundaries.first() else {
            continue;
        };
        let intro = &text[..first.start];
        let intro_counts = if own_heading {
            // The section's own heading line alone is not an intro worth a part.
            let body = intro.split_once('\n').map_or("", |(_, rest)| rest);
            !body.trim().is_empty()
        } else {
            !intro.trim().is_empty()
        };
        if boundaries.len() + usize::from(intro_counts) < 2 {
            continue;
        }
        let mut parts = Vec::with_capacity(boundaries.len() + 1);
        if intro_counts {
            parts.push(node.slice(
                0..first.start,
                Form::Markdown { own_heading },
                "(intro)".to_owned(),
            ));
        }
        for (at, heading) in boundaries.iter().enumerate() {
            let start = if at == 0 && !intro_counts {
                0
            } else {
                heading.start
            };
            let end = boundaries.get(at + 1).map_or(text.len(), |h| h.start);
            let title = format!("{} {}", "#".repeat(heading.level), heading.title);
            // A part that starts with text before its heading (a merged blank intro) has no
            // heading line first.
            let own = start == heading.start;
            parts.push(node.slice(start..end, Form::Markdown { own_heading: own }, title));
        }
        return parts;
    }
    Vec::new()
}

// ---------------------------------------------------------------------------------------------
// JSON

/// A JSON value's top level, with its members or elements as they are in the text.
enum Shape<'a> {
    Object(Vec<(String, &'a RawValue)>),
    Array(Vec<&'a RawValue>),
    Scalar,
}

impl<'de> Deserialize<'de> for Shape<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ShapeVisitor;

        impl<'de> Visitor<'de> for ShapeVisitor {
            type Value = Shape<'de>;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON value")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, &'de RawValue>()? {
                    members.push((key, value));
                }
                Ok(Shape::Object(members))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut elements = Vec::new();
                while let Some(element) = seq.next_element::<&'de RawValue>()? {
                    elements.push(element);
                }
                Ok(Shape::Array(elements))
            }

            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Shape::Scalar)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Shape::Scalar)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Shape::Scalar)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Shape::Scalar)
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Shape::Scalar)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Shape::Scalar)
            }
        }

        deserializer.deserialize_any(ShapeVisitor)
    }
}

/// Where `inner` (a slice of `outer`) starts in `outer`.
fn offset_in(outer: &str, inner: &str) -> Option<Range<usize>> {
    let start = (inner.as_ptr() as usize).checked_sub(outer.as_ptr() as usize)?;
    let end = start.checked_add(inner.len())?;
    (end <= outer.len() && outer.get(start..end) == Some(inner)).then_some(start..end)
}

/// `path.key`, or `path["key"]` when the key is not a plain name.
fn member_path(path: &str, key: &str) -> String {
    let plain = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        format!("{path}.{key}")
    } else {
        format!(
            "{path}[{}]",
            serde_json::to_string(key).unwrap_or_else(|_| format!("\"{key}\""))
        )
    }
}

fn split_json(node: &Node, path: &str, first_index: usize, settings: Settings) -> Vec<Node> {
    let text = node.text();
    let Ok(shape) = serde_json::from_str::<Shape<'_>>(text) else {
        return Vec::new();
    };
    match shape {
        Shape::Scalar => Vec::new(),
        Shape::Object(members) => {
            if members.len() == 1
                && let Some((key, value)) = members.first()
            {
                // Look through an object with one member.
                let child = json_child(node, text, value, member_path(path, key));
                return split(&child, settings);
            }
            members
                .iter()
                .map(|(key, value)| json_child(node, text, value, member_path(path, key)))
                .collect()
        }
        Shape::Array(elements) => {
            if elements.len() == 1
                && let Some(element) = elements.first()
            {
                let child = json_child(node, text, element, format!("{path}[{first_index}]"));
                return split(&child, settings);
            }
            json_chunks(node, text, path, first_index, &elements, settings)
        }
    }
}

/// A member or element as a part: its text as it is in the document.
fn json_child(node: &Node, text: &str, value: &RawValue, path: String) -> Node {
    let form = Form::Json {
        path: path.clone(),
        first_index: 0,
    };
    match offset_in(text, value.get()) {
        Some(range) => node.slice(range, form, path),
        None => Node::owned(value.get().to_owned(), form, path),
    }
}

/// Consecutive elements, at least `threshold_bytes` (and a `max_sections`th of the array) each,
/// as parts; a chunk of one element is that element.
fn json_chunks(
    node: &Node,
    text: &str,
    path: &str,
    first_index: usize,
    elements: &[&RawValue],
    settings: Settings,
) -> Vec<Node> {
    if elements.is_empty() {
        return Vec::new();
    }
    let total: usize = elements.iter().map(|e| e.get().len() + 2).sum();
    // Every chunk but the last holds more than `total / max_sections`, so there are at most
    // `max_sections` of them.
    let largest = elements
        .iter()
        .map(|e| e.get().len() + 2)
        .max()
        .unwrap_or(0);
    let target = settings
        .threshold_bytes
        .max(total.div_ceil(settings.max_sections.max(2)) + largest);
    // A chunk's text is `[\n`, the elements joined by `,\n`, then `\n]`.
    const BRACKETS: usize = 4;
    let mut runs: Vec<Range<usize>> = Vec::new();
    let mut start = 0;
    let mut size = BRACKETS;
    for (at, element) in elements.iter().enumerate() {
        let len = element.get().len() + usize::from(at > start) * 2;
        if at > start && size + len > target {
            runs.push(start..at);
            start = at;
            size = BRACKETS;
        }
        size += element.get().len() + usize::from(at > start) * 2;
    }
    runs.push(start..elements.len());
    // Greedy chunks can still be too many: merge runs of them.
    let max = settings.max_sections.max(2);
    if runs.len() > max {
        let per = runs.len().div_ceil(max);
        runs = runs
            .chunks(per)
            .filter_map(|c| Some(c.first()?.start..c.last()?.end))
            .collect();
    }
    runs.into_iter()
        .map(|run| {
            let (a, b) = (first_index + run.start, first_index + run.end - 1);
            if run.len() == 1 {
                return json_child(node, text, elements[run.start], format!("{path}[{a}]"));
            }
            let mut chunk = String::from("[\n");
            for (at, element) in elements[run.clone()].iter().enumerate() {
                if at > 0 {
                    chunk.push_str(",\n");
                }
                chunk.push_str(element.get());
            }
            chunk.push_str("\n]");
            Node::owned(
                chunk,
                Form::Json {
                    path: path.to_owned(),
                    first_index: a,
                },
                format!("{path}[{a}..{b}]"),
            )
        })
        .collect()
}

/// A run of an object's members as one object.
fn json_group(path: &str, run: &[Node], title: String) -> Node {
    let mut text = String::from("{\n");
    let mut any = false;
    for part in run {
        let key = part
            .title
            .strip_prefix(path)
            .map(|k| {
                k.strip_prefix('.')
                    .map(str::to_owned)
                    .or_else(|| {
                        k.strip_prefix('[')
                            .and_then(|k| k.strip_suffix(']'))
                            .and_then(|k| serde_json::from_str::<String>(k).ok())
                    })
                    .unwrap_or_else(|| k.to_owned())
            })
            .unwrap_or_else(|| part.title.clone());
        if any {
            text.push_str(",\n");
        }
        any = true;
        text.push_str(&serde_json::to_string(&key).unwrap_or_else(|_| format!("\"{key}\"")));
        text.push_str(": ");
        text.push_str(part.text());
    }
    text.push_str("\n}");
    Node::owned(
        text,
        Form::Json {
            path: path.to_owned(),
            first_index: 0,
        },
        title,
    )
}

// ---------------------------------------------------------------------------------------------
// YAML

/// One YAML line's role.
#[derive(Debug, Clone, PartialEq, Eq)]
enum YamlLine {
    /// `key:` or `key: value`, with the key.
    Key(String),
    /// `- ...`.
    Item,
    /// `---`.
    Document,
    /// `...` (end of a document).
    End,
    /// A comment or blank line.
    Blank,
    /// Anything else (a scalar continuation, a flow collection).
    Other,
}

fn yaml_indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// What a line (without its indentation and line break) is.
fn yaml_line(content: &str) -> YamlLine {
    let content = content.trim_end();
    if content.is_empty() || content.starts_with('#') {
        return YamlLine::Blank;
    }
    if content == "---" || content.starts_with("--- ") {
        return YamlLine::Document;
    }
    if content == "..." {
        return YamlLine::End;
    }
    if content == "-" || content.starts_with("- ") {
        return YamlLine::Item;
    }
    match yaml_key(content) {
        Some(key) => YamlLine::Key(key),
        None => YamlLine::Other,
    }
}

/// The key of a `key:` line.
fn yaml_key(content: &str) -> Option<String> {
    if let Some(quote) = content.chars().next().filter(|c| *c == '"' || *c == '\'') {
        let close = content[1..].find(quote)? + 1;
        let rest = &content[close + 1..];
        return (rest == ":" || rest.starts_with(": ")).then(|| content[1..close].to_owned());
    }
    if content.starts_with(['[', '{', '!', '&', '*', '|', '>', '%', '@', '`', '?', ',']) {
        return None;
    }
    let colon = content
        .match_indices(':')
        .map(|(at, _)| at)
        .find(|at| matches!(content.as_bytes().get(at + 1), None | Some(b' ' | b'\t')))?;
    let key = &content[..colon];
    (!key.is_empty() && !key.contains(" #")).then(|| key.trim_end().to_owned())
}

/// Whether a text's top level is YAML entries: every line at indentation 0 that is not blank or
/// a comment is a key, a list item or a document marker, the first is one, and there are two
/// or more entries with at least one key.
fn looks_like_yaml(text: &str) -> bool {
    let mut entries = 0;
    let mut keys = 0;
    let mut seen_content = false;
    for (_, raw) in lines(text) {
        let line = strip_break(raw);
        if yaml_indent(line) > 0 {
            if !seen_content && !line.trim().is_empty() {
                return false;
            }
            continue;
        }
        match yaml_line(line) {
            YamlLine::Blank => {}
            YamlLine::Key(_) => {
                keys += 1;
                entries += 1;
                seen_content = true;
            }
            YamlLine::Item => {
                entries += 1;
                seen_content = true;
            }
            YamlLine::Document | YamlLine::End => seen_content = true,
            YamlLine::Other => return false,
        }
    }
    entries >= 2 && keys >= 1
}

/// Whether an entry line's value is a block scalar (`key: |`, `- >-`), whose lines are text.
fn opens_block_scalar(content: &str) -> bool {
    let value = match yaml_line(content) {
        YamlLine::Key(_) => content.split_once(':').map_or("", |(_, v)| v),
        YamlLine::Item => content.get(1..).unwrap_or_default(),
        _ => return false,
    };
    let value = value.split(" #").next().unwrap_or_default().trim();
    value.starts_with('|') || value.starts_with('>')
}

fn yaml_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// The index of a YAML part's first list item, from its title (`path[3]`).
fn yaml_list_index(part: &Node) -> usize {
    part.title
        .rsplit_once('[')
        .and_then(|(_, rest)| rest.strip_suffix(']'))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn split_yaml(
    node: &Node,
    entry: bool,
    indent: usize,
    path: &str,
    first_index: usize,
    settings: Settings,
) -> Vec<Node> {
    let text = node.text();
    let mut all = lines(text);
    let (child_indent, body_start, first_line_entry) = if entry {
        let Some((_, first)) = all.next() else {
            return Vec::new();
        };
        let first = strip_break(first);
        let own = yaml_indent(first);
        let content = &first[own..];
        if opens_block_scalar(content) {
            return Vec::new();
        }
        match yaml_line(content) {
            YamlLine::Item => {
                // `- key: value` starts a mapping whose keys are indented past the dash.
                let after = content[1..].trim_start_matches(' ');
                let child = own + (content.len() - after.len());
                let first_entry = matches!(yaml_line(after), YamlLine::Key(_));
                (child, 0, first_entry.then_some(after))
            }
            YamlLine::Document => {
                let body = lines(text)
                    .skip(1)
                    .find(|(_, l)| yaml_line(strip_break(l).trim_start()) != YamlLine::Blank);
                match body {
                    Some((_, l)) => (yaml_indent(strip_break(l)), first.len(), None),
                    None => return Vec::new(),
                }
            }
            _ => {
                let body = lines(text)
                    .skip(1)
                    .find(|(_, l)| yaml_line(strip_break(l).trim_start()) != YamlLine::Blank);
                let Some((_, l)) = body else {
                    return Vec::new();
                };
                let l = strip_break(l);
                let child = yaml_indent(l);
                let is_item = yaml_line(&l[child..]) == YamlLine::Item;
                if child <= own && !(child == own && is_item) {
                    return Vec::new();
                }
                (child, first.len(), None)
            }
        }
    } else {
        (indent, 0, None)
    };

    // Boundaries: (offset, title, form of the part).
    let mut boundaries: Vec<(usize, String, Form)> = Vec::new();
    let entry_form = |title: &str| Form::Yaml {
        entry: true,
        indent: child_indent,
        path: title.to_owned(),
        first_index: 0,
    };
    if let Some(content) = first_line_entry
        && let YamlLine::Key(key) = yaml_line(content)
    {
        let title = yaml_path(path, &key);
        boundaries.push((0, title.clone(), entry_form(&title)));
    }
    let body: Vec<(usize, &str)> = lines(text)
        .filter(|(start, _)| *start >= body_start && !(entry && *start == 0))
        .map(|(start, raw)| (start, strip_break(raw)))
        .filter(|(_, line)| yaml_indent(line) == child_indent)
        .collect();
    // Several `---` documents at the top level: the documents are the parts.
    let markers: Vec<usize> = body
        .iter()
        .filter(|(_, line)| child_indent == 0 && yaml_line(line) == YamlLine::Document)
        .map(|(start, _)| *start)
        .collect();
    let content_before_first_marker = markers.first().is_some_and(|first| {
        lines(&text[..*first]).any(|(_, l)| yaml_line(strip_break(l)) != YamlLine::Blank)
    });
    if !entry && (markers.len() >= 2 || (markers.len() == 1 && content_before_first_marker)) {
        let starts = std::iter::once(0)
            .filter(|_| content_before_first_marker)
            .chain(markers);
        for (n, start) in starts.enumerate() {
            let form = Form::Yaml {
                entry: false,
                indent: 0,
                path: String::new(),
                first_index: 0,
            };
            boundaries.push((start, format!("document {}", n + 1), form));
        }
    } else {
        // `key:` followed by list items at the key's own indentation: the items belong to
        // the key, so with keys at this level, items are not boundaries.
        let has_keys = body
            .iter()
            .any(|(_, line)| matches!(yaml_line(&line[child_indent..]), YamlLine::Key(_)));
        let mut items = first_index;
        for (start, line) in body {
            match yaml_line(&line[child_indent..]) {
                YamlLine::Key(key) => {
                    let title = yaml_path(path, &key);
                    boundaries.push((start, title.clone(), entry_form(&title)));
                }
                YamlLine::Item if !has_keys => {
                    let title = format!("{path}[{items}]");
                    items += 1;
                    boundaries.push((start, title.clone(), entry_form(&title)));
                }
                _ => {}
            }
        }
    }
    match boundaries.len() {
        0 => Vec::new(),
        1 => {
            // Look through a single entry: its own parts, if it has them.
            let (start, title, form) = boundaries.remove(0);
            if entry && start == 0 {
                return Vec::new();
            }
            let only = node.slice(start..text.len(), form, title);
            split(&only, settings)
        }
        _ => {
            let mut parts = Vec::with_capacity(boundaries.len());
            for (at, (start, title, form)) in boundaries.iter().enumerate() {
                // What comes before the first boundary (comments, the entry's own key line)
                // goes with the first part, so the parts cover the node's text exactly.
                let start = if at == 0 { 0 } else { *start };
                let end = boundaries.get(at + 1).map_or(text.len(), |b| b.0);
                parts.push(node.slice(start..end, form.clone(), title.clone()));
            }
            parts
        }
    }
}

/// The text of a part with the title its table of contents shows (for messages).
pub(crate) fn describe(node: &Node) -> Cow<'_, str> {
    if node.title.is_empty() {
        Cow::Borrowed("the document")
    } else {
        Cow::Owned(format!("`{}`", node.title))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SETTINGS: Settings = Settings {
        threshold_bytes: 16,
        max_sections: 50,
    };

    fn parts(text: &str, format: Format) -> Vec<(String, String)> {
        let root = Node::root(text.into(), format);
        split(&root, SETTINGS)
            .iter()
            .map(|p| (p.title.clone(), p.text().to_owned()))
            .collect()
    }

    fn titles(text: &str, format: Format) -> Vec<String> {
        parts(text, format).into_iter().map(|(t, _)| t).collect()
    }

    #[test]
    fn formats_come_from_the_mime_type_or_are_sniffed() {
        assert_eq!(
            detect(Some("text/markdown; charset=utf-8"), "x"),
            Format::Markdown
        );
        assert_eq!(detect(Some("application/vnd.api+json"), "x"), Format::Json);
        assert_eq!(detect(Some("application/yaml"), "x"), Format::Yaml);
        assert_eq!(detect(Some("text/html"), "# a\n# b\n"), Format::Plain);
        assert_eq!(detect(None, " {\"a\": 1}"), Format::Json);
        assert_eq!(
            detect(Some("text/plain"), "# a\ntext\n## b\n"),
            Format::Markdown
        );
        assert_eq!(detect(None, "a: 1\nb:\n  c: 2\n"), Format::Yaml);
        assert_eq!(detect(None, "# comment\na: 1\nb: 2\n"), Format::Yaml);
        assert_eq!(detect(None, "Note: this\nis prose\n"), Format::Plain);
        assert_eq!(detect(None, "{not json"), Format::Plain);
    }

    #[test]
    fn markdown_splits_at_the_shallowest_level_that_gives_parts() {
        let text = "# Title\nintro\n## A\na\n### A1\nx\n## B\nb\n```\n## not a heading\n```\n";
        assert_eq!(titles(text, Format::Markdown), ["# Title", "## A", "## B"]);
        let parts = parts(text, Format::Markdown);
        assert_eq!(
            parts.iter().map(|(_, t)| t.as_str()).collect::<String>(),
            text
        );
        let root = Node::root(text.into(), Format::Markdown);
        let a = &split(&root, SETTINGS)[1];
        assert_eq!(
            split(a, SETTINGS)
                .iter()
                .map(|p| p.title.as_str())
                .collect::<Vec<_>>(),
            ["(intro)", "### A1"]
        );
    }

    #[test]
    fn markdown_intro_and_setext_headings() {
        let text = "Some intro.\n\nFirst\n=====\none\n\nSecond\n------\ntwo\n";
        assert_eq!(titles(text, Format::Markdown), ["(intro)", "# First"]);
        let levels: Vec<usize> = markdown_headings(text).iter().map(|h| h.level).collect();
        assert_eq!(levels, [1, 2]);
        let front = "---\ntitle: x\n---\n# A\n# B\n";
        assert_eq!(titles(front, Format::Markdown), ["(intro)", "# A", "# B"]);
    }

    #[test]
    fn json_objects_split_into_members_and_arrays_into_chunks() {
        let text = r#"{"name": "x", "items": [1, 2, 3], "we ird": {"a": 1}}"#;
        assert_eq!(
            parts(text, Format::Json),
            [
                ("$.name".to_owned(), "\"x\"".to_owned()),
                ("$.items".to_owned(), "[1, 2, 3]".to_owned()),
                ("$[\"we ird\"]".to_owned(), "{\"a\": 1}".to_owned()),
            ]
        );
        let wrapped =
            r#"{"data": [{"id": 1, "v": "aaaaaaaaaa"}, {"id": 2, "v": "bbbbbbbbbb"}, {"id": 3}]}"#;
        assert_eq!(
            titles(wrapped, Format::Json),
            ["$.data[0]", "$.data[1]", "$.data[2]"]
        );
        let numbers = format!(
            "[{}]",
            (0..100)
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(",")
        );
        let chunks = parts(&numbers, Format::Json);
        assert!(chunks.len() > 1, "{chunks:?}");
        assert!(chunks[0].0.starts_with("$[0.."), "{chunks:?}");
        let all: Vec<u32> = chunks
            .iter()
            .flat_map(|(_, t)| {
                // A chunk is an array of elements; a chunk of one is that element.
                match serde_json::from_str::<serde_json::Value>(t).expect("a chunk is JSON") {
                    serde_json::Value::Array(items) => items,
                    one => vec![one],
                }
            })
            .map(|v| v.as_u64().expect("a number") as u32)
            .collect();
        assert_eq!(all, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn many_members_are_grouped() {
        let text = format!(
            "{{{}}}",
            (0..120)
                .map(|n| format!("\"k{n}\": {n}"))
                .collect::<Vec<_>>()
                .join(",")
        );
        let root = Node::root(text.into(), Format::Json);
        let groups = split(&root, SETTINGS);
        assert_eq!(groups.len(), 40, "120 members, 3 per group");
        assert_eq!(groups[0].title, "$.k0 … $.k2 (3 parts)");
        let inner = split(&groups[1], SETTINGS);
        assert_eq!(
            inner.iter().map(|p| p.title.as_str()).collect::<Vec<_>>(),
            ["$.k3", "$.k4", "$.k5"]
        );
    }

    #[test]
    fn yaml_splits_at_top_level_entries_then_nested_ones() {
        let text = "# config\nname: demo\nspec:\n  replicas: 3\n  template:\n    image: x\nlist:\n- a\n- b: 1\n  c: 2\n";
        let top = parts(text, Format::Yaml);
        assert_eq!(
            top.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>(),
            ["name", "spec", "list"]
        );
        assert_eq!(
            top.iter().map(|(_, t)| t.as_str()).collect::<String>(),
            text
        );
        let root = Node::root(text.into(), Format::Yaml);
        let spec = &split(&root, SETTINGS)[1];
        assert_eq!(
            split(spec, SETTINGS)
                .iter()
                .map(|p| p.title.as_str())
                .collect::<Vec<_>>(),
            ["spec.replicas", "spec.template"]
        );
        let list = &split(&root, SETTINGS)[2];
        let items = split(list, SETTINGS);
        assert_eq!(
            items.iter().map(|p| p.title.as_str()).collect::<Vec<_>>(),
            ["list[0]", "list[1]"]
        );
        assert_eq!(
            split(&items[1], SETTINGS)
                .iter()
                .map(|p| p.title.as_str())
                .collect::<Vec<_>>(),
            ["list[1].b", "list[1].c"]
        );
    }

    #[test]
    fn yaml_block_scalars_and_documents() {
        let text = "text: |\n  a: not a key\n  b: nor this\nother: 1\n";
        let root = Node::root(text.into(), Format::Yaml);
        let first = &split(&root, SETTINGS)[0];
        assert!(split(first, SETTINGS).is_empty(), "a block scalar is text");
        let docs = "---\na: 1\n---\nb: 2\n";
        assert_eq!(titles(docs, Format::Yaml), ["document 1", "document 2"]);
    }

    /// Every part, to `depth` levels down (splitting must never panic).
    fn walk(node: &Node, depth: usize, seen: &mut usize) {
        *seen += 1;
        if depth == 0 {
            return;
        }
        for part in split(node, SETTINGS) {
            walk(&part, depth - 1, seen);
        }
    }

    fn line_strategy() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            "#{1,7} [a-zé€ ]{0,12}",
            "[ ]{0,6}[a-zé€-]{1,8}:( [a-z0-9|>]{0,6})?",
            "[ ]{0,4}- [a-z:é ]{0,8}",
            Just("```".to_owned()),
            Just("~~~~".to_owned()),
            Just("---".to_owned()),
            Just("===".to_owned()),
            Just(String::new()),
            "[ ]{0,3}[^\n]{0,30}",
        ]
    }

    use proptest::prelude::Strategy as _;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

        #[test]
        fn line_formats_split_into_parts_that_cover_the_text(
            lines in proptest::collection::vec(line_strategy(), 0..60),
            crlf in proptest::bool::ANY,
        ) {
            let text = lines.join(if crlf { "\r\n" } else { "\n" });
            for format in [Format::Markdown, Format::Yaml, Format::Plain] {
                let root = Node::root(text.as_str().into(), format);
                let parts = split(&root, SETTINGS);
                if parts.len() >= 2 {
                    let joined: String = parts.iter().map(Node::text).collect();
                    if format == Format::Markdown {
                        proptest::prop_assert_eq!(&joined, &text);
                    } else {
                        // Looking through a single YAML entry leaves out the lines before it.
                        proptest::prop_assert!(text.ends_with(&joined), "{:?}", joined);
                    }
                }
                let mut seen = 0;
                walk(&root, 4, &mut seen);
            }
        }

        #[test]
        fn json_splits_into_valid_json(values in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::prelude::Just(serde_json::json!({"a": [1, 2, {"b": "é€"}], "c": null})),
                proptest::prelude::Just(serde_json::json!([[1], [2, 3], "x"])),
                "[a-z€]{0,40}".prop_map(serde_json::Value::from),
                proptest::prelude::any::<i64>().prop_map(serde_json::Value::from),
            ],
            0..200,
        ), object in proptest::bool::ANY, pretty in proptest::bool::ANY) {
            let value = if object {
                serde_json::Value::Object(
                    values.into_iter().enumerate().map(|(i, v)| (format!("k{i}"), v)).collect(),
                )
            } else {
                serde_json::Value::Array(values)
            };
            let text = if pretty {
                serde_json::to_string_pretty(&value)
            } else {
                serde_json::to_string(&value)
            }
            .expect("JSON");
            let root = Node::root(text.as_str().into(), Format::Json);
            for part in split(&root, SETTINGS) {
                proptest::prop_assert!(
                    serde_json::from_str::<serde_json::Value>(part.text()).is_ok(),
                    "{} is not JSON: {}", part.title, part.text()
                );
            }
            let mut seen = 0;
            walk(&root, 4, &mut seen);
        }
    }

    #[test]
    fn plain_text_does_not_split() {
        assert!(titles("just\nsome\ntext\n", Format::Plain).is_empty());
    }
}
