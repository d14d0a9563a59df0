//! Typed `tools/list` results that cost what their names cost: the schemas cross the hooks
//! without being parsed or written again.
//!
//! A listing of 1,000 tools is about 1.25 MB, nearly all of it input and output schemas, which
//! a hook that filters by name (gate) never reads. Reading them into rmcp's `Tool`s and
//! writing them back cost tens of milliseconds per list. So:
//!
//! - **Read once.** The typed result of a listing is kept ([`Listing`]), keyed by the exact text
//!   the upstream sent; an identical listing later (the usual case: clients list often, servers
//!   change their tools rarely) is a clone of it, and a clone shares the schemas, which are
//!   `Arc`s. Only the names, descriptions and annotations are copied.
//! - **Written as received.** When the hooks' result is written, every schema that is still the
//!   very `Arc` read from the upstream is written as the upstream's own text, spliced in by a
//!   [`Formatter`] instead of being serialised again. A hook that changes a schema
//!   (`Arc::make_mut` copies, since the kept listing holds it too) or builds one (synthetic
//!   tools) makes a new allocation, which is serialised as usual.
//!
//! Hooks see exactly the `ListToolsResult` they saw before; only the cost changed.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use rmcp::model::{JsonObject, ListToolsResult};
use serde::Deserialize;
use serde_json::ser::{CharEscape, Formatter};
use serde_json::value::RawValue;

use crate::context::from_result;
use crate::model::HookResult;
use crate::unknown_fields::UnknownFields;

/// Listings smaller than this are not kept: reading them again costs little.
pub(crate) const KEEP_FROM_BYTES: usize = 16 * 1024;
/// How many distinct listings are kept, most recently used first. Two, so that two upstreams
/// (or two kinds of sessions) listing in turn do not evict each other.
const KEPT: usize = 2;

/// The listings kept, shared by every session of the process: an entry is keyed by the
/// upstream's exact text, so it is the same value whichever session reads it.
static KEPT_LISTINGS: Mutex<VecDeque<Arc<Listing>>> = Mutex::new(VecDeque::new());

/// An upstream's `tools/list` result, read once.
#[derive(Debug)]
pub(crate) struct Listing {
    /// The result's text, as the upstream sent it.
    raw: String,
    /// The same, typed.
    list: ListToolsResult,
    /// What reading it into rmcp's type lost.
    lost: Option<UnknownFields>,
    /// Where each schema of `list` is in `raw`, by the address of its `Arc`.
    spans: HashMap<usize, Range<usize>>,
    /// Where each tool of `list` is in `raw`, whole, by name; empty when the text has line
    /// breaks or two tools share a name (then every listing is written by [`Splice`]).
    tools: HashMap<String, (usize, Range<usize>)>,
    /// The same spans by the tool's index in `list` (empty when `tools` is).
    tool_spans: Vec<Range<usize>>,
}

impl Listing {
    /// Reads an upstream's `tools/list` result, or takes the one kept for this very text.
    pub(crate) fn read(raw: String) -> HookResult<Arc<Listing>> {
        if let Some(kept) = kept(&raw) {
            return Ok(kept);
        }
        let listing = Arc::new(Listing::parse(raw)?);
        if listing.raw.len() >= KEEP_FROM_BYTES {
            let mut kept = KEPT_LISTINGS
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            kept.push_front(Arc::clone(&listing));
            kept.truncate(KEPT);
        }
        Ok(listing)
    }

    fn parse(raw: String) -> HookResult<Listing> {
        let list: ListToolsResult = from_result("tools/list", &raw)?;
        let lost = super::lost_in(&raw, &without_schemas(&list));
        let (spans, tools) = schema_spans(&raw, &list).unwrap_or_default();
        let mut tool_spans = Vec::new();
        if !tools.is_empty() {
            tool_spans.resize(list.tools.len(), 0..0);
        }
        for (at, span) in tools.values() {
            if let Some(slot) = tool_spans.get_mut(*at) {
                *slot = span.clone();
            }
        }
        Ok(Listing {
            raw,
            list,
            lost,
            spans,
            tools,
            tool_spans,
        })
    }

    /// The typed result, for the hooks: a clone that shares the schemas.
    pub(crate) fn typed(&self) -> ListToolsResult {
        self.list.clone()
    }

    /// What reading the result into rmcp's type lost.
    pub(crate) fn lost(&self) -> Option<&UnknownFields> {
        self.lost.as_ref()
    }

    /// Writes what the hooks made of this listing, splicing in the upstream's text for every
    /// schema they left as it was, and putting back the members rmcp's types lost (where the
    /// hooks' result has none of its own, as [`UnknownFields::restore`] does).
    pub(crate) fn write(&self, list: &mut ListToolsResult) -> Result<String, serde_json::Error> {
        if let Some(written) = self.write_whole(list)? {
            return Ok(written);
        }
        let lost_items = self
            .lost
            .as_ref()
            .map(|lost| lost.items_by_name("tools"))
            .unwrap_or_default();
        let lost_per_tool = list
            .tools
            .iter()
            .map(|tool| lost_items.get(tool.name.as_ref()).copied())
            .collect();
        let placeholder = Arc::new(JsonObject::new());
        let mut splices = Vec::with_capacity(list.tools.len() * 2);
        for tool in &mut list.tools {
            splices.push(self.take(&mut tool.input_schema, &placeholder));
            if let Some(output) = &mut tool.output_schema {
                splices.push(self.take(output, &placeholder));
            }
        }
        let mut out = Text::new(&self.raw);
        let mut writer = serde_json::Serializer::with_formatter(
            &mut out,
            Splice {
                raw: &self.raw,
                splices: splices.into_iter(),
                lost_top: self.lost.as_ref().map(UnknownFields::top),
                lost_per_tool,
                ..Splice::default()
            },
        );
        serde::Serialize::serialize(&*list, &mut writer)?;
        Ok(out.text)
    }

    /// Writes `list` with the upstream's own text for every tool the hooks left as they got
    /// it, if every other tool is one the upstream did not list (synthetic tools, which have
    /// nothing lost to put back); `None` if the hooks changed an upstream tool, which leaves
    /// the listing to [`Splice`]. The common case (gate hiding and adding tools, paginate
    /// adding `read_page`) writes the 1.25 MB of a large listing as one copy per tool, without
    /// walking any of it.
    fn write_whole(&self, list: &mut ListToolsResult) -> Result<Option<String>, serde_json::Error> {
        if self.tools.is_empty() {
            return Ok(None);
        }
        // Each tool: its span in the upstream's text (`Ok`), or its index in `list` when the
        // upstream did not list it (`Err`).
        let mut whole: Vec<Result<Range<usize>, usize>> = Vec::with_capacity(list.tools.len());
        // The upstream's index of the tool before, when it was one of the upstream's.
        let mut before: Option<usize> = None;
        for (index, tool) in list.tools.iter().enumerate() {
            // Hooks mostly keep the upstream's order: the tool after the one before is tried
            // first, by name, before the lookup.
            let next = before.map_or(0, |at| at + 1);
            // (Names are unique here: `tools` is empty otherwise.)
            let found = match (self.list.tools.get(next), self.tool_spans.get(next)) {
                (Some(kept), Some(span)) if kept.name == tool.name => Some((next, span)),
                _ => self
                    .tools
                    .get(tool.name.as_ref())
                    .map(|(at, span)| (*at, span)),
            };
            match found {
                // `Tool`'s equality compares the schemas' `Arc`s by address first: the
                // unchanged ones cost a pointer comparison.
                Some((at, span)) if self.list.tools.get(at) == Some(tool) => {
                    whole.push(Ok(span.clone()));
                    before = Some(at);
                }
                Some(_) => return Ok(None),
                None => {
                    whole.push(Err(index));
                    before = None;
                }
            }
        }
        // The rest of the result is written as usual, the tools written into its empty `tools`
        // array: the kept ones as the upstream's text, straight into the answer.
        let taken = std::mem::take(&mut list.tools);
        let tools: Vec<Whole<'_>> = whole
            .into_iter()
            .filter_map(|piece| match piece {
                Ok(span) => Some(Whole::Upstream(span)),
                Err(at) => taken.get(at).map(Whole::Tool),
            })
            .collect();
        let mut out = Text::new(&self.raw);
        let mut writer = serde_json::Serializer::with_formatter(
            &mut out,
            Splice {
                raw: &self.raw,
                lost_top: self.lost.as_ref().map(UnknownFields::top),
                tools_text: Some(&tools),
                ..Splice::default()
            },
        );
        let written = serde::Serialize::serialize(&*list, &mut writer);
        drop(tools);
        list.tools = taken;
        written?;
        Ok(Some(out.text))
    }

    /// The span of `schema` in `raw` if it is one of this listing's own, and then the
    /// placeholder in its stead (what the serialiser writes there is replaced by the span).
    fn take(
        &self,
        schema: &mut Arc<JsonObject>,
        placeholder: &Arc<JsonObject>,
    ) -> Option<Range<usize>> {
        let span = self.spans.get(&address(schema))?.clone();
        *schema = Arc::clone(placeholder);
        Some(span)
    }
}

/// `list` with every schema replaced by one empty object, to find what reading it lost: that
/// looks only at which members the listing and its tools write, never into a schema, and
/// writing 1,000 schemas into `Value`s only to compare their keys cost more than the read.
fn without_schemas(list: &ListToolsResult) -> ListToolsResult {
    let empty = Arc::new(JsonObject::new());
    let mut list = list.clone();
    for tool in &mut list.tools {
        tool.input_schema = Arc::clone(&empty);
        if let Some(output) = &mut tool.output_schema {
            *output = Arc::clone(&empty);
        }
    }
    list
}

fn address(schema: &Arc<JsonObject>) -> usize {
    Arc::as_ptr(schema) as usize
}

/// Whether a listing is kept for exactly `raw`.
pub(crate) fn is_kept(raw: &str) -> bool {
    raw.len() >= KEEP_FROM_BYTES
        && KEPT_LISTINGS
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .iter()
            .any(|listing| listing.raw == raw)
}

/// The kept listing read from exactly `raw`, moved to the front.
fn kept(raw: &str) -> Option<Arc<Listing>> {
    if raw.len() < KEEP_FROM_BYTES {
        return None;
    }
    let mut kept = KEPT_LISTINGS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let at = kept.iter().position(|listing| listing.raw == raw)?;
    let listing = kept.remove(at)?;
    kept.push_front(Arc::clone(&listing));
    Some(listing)
}

/// The tools' places in the text, read without parsing them.
#[derive(Deserialize)]
struct RawTools<'a> {
    #[serde(borrow)]
    tools: Vec<&'a RawValue>,
}

/// A tool's name and its schemas' places.
#[derive(Deserialize)]
struct RawTool<'a> {
    #[serde(borrow)]
    name: std::borrow::Cow<'a, str>,
    #[serde(rename = "inputSchema", borrow)]
    input: &'a RawValue,
    #[serde(rename = "outputSchema", borrow, default)]
    output: Option<&'a RawValue>,
}

/// Where each schema of a listing is (by the address of its `Arc`), and each whole tool (by
/// name: its index and span).
type Spans = (
    HashMap<usize, Range<usize>>,
    HashMap<String, (usize, Range<usize>)>,
);

/// Where each schema of `list` (read from `raw`) is in `raw`, by the address of its `Arc`, and
/// each whole tool, by name (none if two share a name). `None` if the two do not line up or the
/// text has line breaks, which leaves every schema to be serialised.
fn schema_spans(raw: &str, list: &ListToolsResult) -> Option<Spans> {
    // Line breaks are whitespace between tokens here (inside strings they are escaped): an HTTP
    // upstream may send them, but a stdio client's line must not get them, so such a text is
    // written by the serialiser.
    if raw.contains(['\n', '\r']) {
        return None;
    }
    let read: RawTools<'_> = serde_json::from_str(raw).ok()?;
    if read.tools.len() != list.tools.len() {
        return None;
    }
    let base = raw.as_ptr() as usize;
    let span = |value: &RawValue| {
        let start = value.get().as_ptr() as usize - base;
        start..start + value.get().len()
    };
    let mut spans = HashMap::with_capacity(list.tools.len() * 2);
    let mut tools = HashMap::with_capacity(list.tools.len());
    let mut unique = true;
    for (at, (typed, whole)) in list.tools.iter().zip(&read.tools).enumerate() {
        let read: RawTool<'_> = serde_json::from_str(whole.get()).ok()?;
        if read.name != typed.name {
            return None;
        }
        unique &= tools
            .insert(typed.name.to_string(), (at, span(whole)))
            .is_none();
        spans.insert(address(&typed.input_schema), span(read.input));
        match (&typed.output_schema, read.output) {
            (Some(typed), Some(read)) => {
                spans.insert(address(typed), span(read));
            }
            (None, None) => {}
            _ => return None,
        }
    }
    if !unique {
        tools.clear();
    }
    Some((spans, tools))
}

/// One tool of the hooks' result, as [`Listing::write_whole`] writes it.
enum Whole<'a> {
    /// An upstream tool the hooks left as it was: its text in the listing.
    Upstream(Range<usize>),
    /// A tool the upstream did not list: serialised.
    Tool(&'a rmcp::model::Tool),
}

/// The text a listing is written into. What the serialiser writes is checked to be UTF-8 as
/// it comes, except text copied from the listing's own `raw` (known by its address), which is
/// a `str` already: the 1.25 MB of a large listing is copied once and not checked again.
struct Text<'a> {
    raw: &'a str,
    text: String,
}

impl<'a> Text<'a> {
    fn new(raw: &'a str) -> Self {
        Self {
            raw,
            // Room for what hooks add, and for the answer's envelope around it
            // (`jsonrpc::result_around`).
            text: String::with_capacity(raw.len() + 4096),
        }
    }
}

impl io::Write for Text<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let at = (buf.as_ptr() as usize).wrapping_sub(self.raw.as_ptr() as usize);
        // Within `raw`'s bytes, `buf` is a slice of them; `get` still checks it starts and
        // ends on a character's boundary.
        let text = match at
            .checked_add(buf.len())
            .and_then(|end| self.raw.get(at..end))
        {
            Some(text) => text,
            None => std::str::from_utf8(buf).map_err(io::Error::other)?,
        };
        self.text.push_str(text);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A compact [`Formatter`] that writes `raw[span]` in place of each tool's schema it is given a
/// span for, and adds the lost members. It follows the nesting to find the schemas: `{"tools":
/// [{"inputSchema": ..., "outputSchema": ...}]}` (a `Tool` has no flattened members, so these
/// keys at that depth are its schema fields). `splices` has one entry per schema member
/// written, in order; `lost_per_tool` one per tool.
#[derive(Default)]
struct Splice<'a> {
    raw: &'a str,
    splices: std::vec::IntoIter<Option<Range<usize>>>,
    /// The members lost at the top level, written at the end of the result.
    lost_top: Option<&'a serde_json::Map<String, serde_json::Value>>,
    /// The members each tool lost, written at the end of the tool.
    lost_per_tool: Vec<Option<&'a serde_json::Map<String, serde_json::Value>>>,
    /// How many tools have begun.
    tools_begun: usize,
    /// The keys written so far in the result (depth 1) and in the current tool (depth 3).
    written: [Vec<String>; 2],
    /// How many objects and arrays are open.
    depth: usize,
    /// The key being written, at the depths that matter (1: the result, 3: a tool).
    key: Option<String>,
    /// Whether the result's member being written is `tools`.
    in_tools: bool,
    /// The span to write for the object about to begin.
    pending: Option<Range<usize>>,
    /// The depth of the placeholder object whose end is not written.
    skip_end: Option<usize>,
    /// The tools, written into the result's (empty) `tools` array.
    tools_text: Option<&'a [Whole<'a>]>,
}

impl Formatter for Splice<'_> {
    fn begin_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.depth += 1;
        writer.write_all(b"[")?;
        if self.depth == 2
            && self.in_tools
            && let Some(tools) = self.tools_text.take()
        {
            for (at, tool) in tools.iter().enumerate() {
                if at > 0 {
                    writer.write_all(b",")?;
                }
                match tool {
                    Whole::Upstream(span) => match self.raw.get(span.clone()) {
                        Some(text) => writer.write_all(text.as_bytes())?,
                        None => {
                            return Err(io::Error::other("a tool's span is not in the listing"));
                        }
                    },
                    Whole::Tool(tool) => {
                        serde_json::to_writer(&mut *writer, tool).map_err(io::Error::other)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn end_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.depth -= 1;
        writer.write_all(b"]")
    }

    fn begin_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.depth += 1;
        if self.depth == 3 && self.in_tools {
            self.tools_begun += 1;
            self.written[1].clear();
        }
        match self.pending.take().and_then(|span| self.raw.get(span)) {
            Some(text) => {
                self.skip_end = Some(self.depth);
                writer.write_all(text.as_bytes())
            }
            None => writer.write_all(b"{"),
        }
    }

    fn end_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        let depth = self.depth;
        self.depth -= 1;
        if self.skip_end == Some(depth) {
            self.skip_end = None;
            return Ok(());
        }
        let lost = match depth {
            1 => self.lost_top.map(|lost| (lost, &self.written[0])),
            3 if self.in_tools => self
                .lost_per_tool
                .get(self.tools_begun.wrapping_sub(1))
                .copied()
                .flatten()
                .map(|lost| (lost, &self.written[1])),
            _ => None,
        };
        if let Some((lost, written)) = lost {
            for (key, value) in lost {
                if written.iter().any(|w| w == key) {
                    continue;
                }
                // The result and a tool always have a member before these (`tools`, `name`).
                writer.write_all(b",")?;
                serde_json::to_writer(&mut *writer, key).map_err(io::Error::other)?;
                writer.write_all(b":")?;
                serde_json::to_writer(&mut *writer, value).map_err(io::Error::other)?;
            }
        }
        writer.write_all(b"}")
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if self.depth == 1 || (self.depth == 3 && self.in_tools) {
            self.key = Some(String::new());
        }
        if first {
            Ok(())
        } else {
            writer.write_all(b",")
        }
    }

    fn end_object_key<W: ?Sized + io::Write>(&mut self, _writer: &mut W) -> io::Result<()> {
        let Some(key) = self.key.take() else {
            return Ok(());
        };
        if self.depth == 1 {
            self.in_tools = key == "tools";
            self.written[0].push(key);
        } else {
            if key == "inputSchema" || key == "outputSchema" {
                self.pending = self.splices.next().flatten();
            }
            self.written[1].push(key);
        }
        Ok(())
    }

    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        if let Some(key) = &mut self.key {
            key.push_str(fragment);
        }
        writer.write_all(fragment.as_bytes())
    }

    fn write_char_escape<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        char_escape: CharEscape,
    ) -> io::Result<()> {
        // No key that matters has an escape: such a key matches none of them.
        if let Some(key) = &mut self.key {
            key.push('\\');
        }
        serde_json::ser::CompactFormatter.write_char_escape(writer, char_escape)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn listing(tools: usize) -> String {
        let tools: Vec<Value> = (0..tools)
            .map(|i| {
                let mut tool = json!({
                    "name": format!("tool_{i}"),
                    "description": format!("Tool {i} \"quoted\" \u{e9}"),
                    "inputSchema": {"type": "object", "properties": {"x": {"type": "string", "description": "x\ny"}}},
                    "annotations": {"readOnlyHint": true},
                });
                if i % 2 == 0 {
                    tool["outputSchema"] = json!({"type": "object", "required": ["y"]});
                    tool["_meta"] = json!({"inputSchema": {"not": "a schema"}});
                }
                tool
            })
            .collect();
        serde_json::to_string(&json!({"tools": tools, "nextCursor": "c"})).expect("json")
    }

    #[test]
    fn members_rmcp_does_not_know_are_put_back_as_restore_does() {
        let mut raw: Value = serde_json::from_str(&listing(603)).expect("json");
        raw["x-extra"] = json!({"kept": true});
        for (i, tool) in raw["tools"]
            .as_array_mut()
            .expect("tools")
            .iter_mut()
            .enumerate()
        {
            if i % 3 == 0 {
                tool["execution"] = json!({"taskSupport": "optional"});
                tool["title"] = Value::Null;
            }
        }
        let raw = serde_json::to_string(&raw).expect("json");
        let read = Listing::read(raw).expect("read");
        assert!(read.lost().is_some());
        let mut typed = read.typed();
        typed.tools.retain(|tool| tool.name != "tool_3");
        typed.tools[0].title = Some("set by a hook".into());
        let mut expected = serde_json::to_value(&typed).expect("value");
        read.lost().expect("lost").restore(&mut expected);
        let written = read.write(&mut typed).expect("write");
        let written: Value = serde_json::from_str(&written).expect("valid JSON");
        assert_eq!(written, expected);
        assert_eq!(written["tools"][0]["title"], "set by a hook");
        assert_eq!(written["tools"][0]["execution"]["taskSupport"], "optional");
        assert_eq!(written["x-extra"]["kept"], true);
    }

    #[test]
    fn what_the_listing_lost_is_what_a_second_parse_of_the_text_finds() {
        let mut raw: Value = serde_json::from_str(&listing(40)).expect("json");
        raw["x-extra"] = json!({"kept": [1, 2]});
        for (i, tool) in raw["tools"]
            .as_array_mut()
            .expect("tools")
            .iter_mut()
            .enumerate()
        {
            if i % 3 == 0 {
                tool["execution"] = json!({"taskSupport": "optional"});
                tool["inputSchema"]["x-schema-only"] = json!(true);
            }
            if i % 4 == 0 {
                tool["title"] = Value::Null;
            }
        }
        let raw = serde_json::to_string(&raw).expect("json");
        let read = Listing::parse(raw.clone()).expect("read");
        let typed: ListToolsResult = serde_json::from_str(&raw).expect("typed");
        let parsed: Value = serde_json::from_str(&raw).expect("json");
        let typed = serde_json::to_value(&typed).expect("value");
        let twice = UnknownFields::lost(&parsed, &typed).expect("lost");
        assert_eq!(read.lost(), Some(&twice));
        // Members inside a schema are the schema's own: never lost, never put back.
        let items = twice.items_by_name("tools");
        assert_eq!(items.len(), 20);
        assert!(
            items
                .values()
                .all(|lost| !lost.contains_key("x-schema-only"))
        );
        assert_eq!(items["tool_0"]["title"], Value::Null);
        assert_eq!(twice.top()["x-extra"], json!({"kept": [1, 2]}));
    }

    #[test]
    fn tools_the_hooks_kept_are_written_as_the_upstream_sent_them() {
        let mut raw: Value = serde_json::from_str(&listing(604)).expect("json");
        raw["tools"][5]["execution"] = json!({"taskSupport": "optional"});
        raw["x-extra"] = json!(1);
        let raw = serde_json::to_string(&raw)
            .expect("json")
            // A spelling the serialiser would not choose, kept only if the tool is copied.
            .replace("Tool 5 ", "Tool\\u00205 ");
        let read = Listing::read(raw.clone()).expect("read");
        let mut typed = read.typed();
        typed.tools.retain(|tool| tool.name != "tool_3");
        let mut added = rmcp::model::Tool::default();
        added.name = "synthetic".into();
        added.input_schema =
            Arc::new(serde_json::from_value(json!({"type": "object"})).expect("schema"));
        typed.tools.push(added);
        let mut expected = serde_json::to_value(&typed).expect("value");
        read.lost().expect("lost").restore(&mut expected);
        let written = read.write(&mut typed).expect("write");
        assert!(written.contains("Tool\\u00205 "), "{written}");
        let written: Value = serde_json::from_str(&written).expect("valid JSON");
        assert_eq!(written, expected);
        assert_eq!(written["tools"][4]["execution"]["taskSupport"], "optional");
        assert_eq!(written["tools"][603]["name"], "synthetic");
        assert_eq!(written["x-extra"], 1);
        // The hooks' result is whole again after the write.
        assert_eq!(typed.tools.len(), 604);
    }

    #[test]
    fn tools_the_hooks_reordered_removed_or_added_are_written_whole_in_the_hooks_order() {
        let mut raw: Value = serde_json::from_str(&listing(606)).expect("json");
        raw["tools"][7]["execution"] = json!({"taskSupport": "optional"});
        raw["x-extra"] = json!([1]);
        let raw = serde_json::to_string(&raw)
            .expect("json")
            .replace("Tool 9 ", "Tool\\u00209 ");
        let read = Listing::read(raw).expect("read");
        let mut typed = read.typed();
        typed.tools.retain(|tool| tool.name != "tool_4");
        typed.tools.reverse();
        let mut added = rmcp::model::Tool::default();
        added.name = "synthetic \"quoted\"".into();
        added.input_schema =
            Arc::new(serde_json::from_value(json!({"type": "object"})).expect("schema"));
        typed.tools.insert(300, added);
        let mut expected = serde_json::to_value(&typed).expect("value");
        read.lost().expect("lost").restore(&mut expected);
        let written = read.write(&mut typed).expect("write");
        // Copied, not written from the fields: the upstream's spelling.
        assert!(written.contains("Tool\\u00209 "), "{written}");
        let written: Value = serde_json::from_str(&written).expect("valid JSON");
        assert_eq!(written, expected);
        assert_eq!(written["tools"][0]["name"], "tool_605");
        assert_eq!(written["tools"][300]["name"], "synthetic \"quoted\"");
        assert_eq!(
            written["tools"][599]["execution"]["taskSupport"],
            "optional"
        );
        assert_eq!(written["x-extra"], json!([1]));
        assert_eq!(written["tools"].as_array().map(Vec::len), Some(606));
        assert_eq!(typed.tools.len(), 606);
    }

    #[test]
    fn a_kept_listing_is_known_by_its_exact_text_in_an_answer() {
        let raw = listing(607);
        assert!(!is_kept(&raw));
        let read = Listing::read(raw.clone()).expect("read");
        assert!(is_kept(&raw));
        let line = format!(r#"{{"jsonrpc":"2.0","id":3,"result":{raw}}}"#);
        assert_eq!(
            crate::jsonrpc::known_result(&line, is_kept),
            Some(("3", read.raw.as_str()))
        );
        // One byte different is not the kept text.
        let other = raw.replacen("tool_0", "tool_X", 1);
        let line = format!(r#"{{"jsonrpc":"2.0","id":3,"result":{other}}}"#);
        assert_eq!(crate::jsonrpc::known_result(&line, is_kept), None);
        // A small listing is not kept, so never known.
        let small = listing(2);
        Listing::read(small.clone()).expect("read");
        assert!(!is_kept(&small));
    }

    #[test]
    fn a_listing_answers_the_client_with_the_line_it_was_answered_with_before() {
        let raw = listing(608);
        let read = Listing::read(raw.clone()).expect("read");
        for added in [0, 3] {
            let mut typed = read.typed();
            for i in 0..added {
                let mut tool = rmcp::model::Tool::default();
                tool.name = format!("synthetic_{i}").into();
                tool.input_schema =
                    Arc::new(serde_json::from_value(json!({"type": "object"})).expect("schema"));
                typed.tools.push(tool);
            }
            let written = read.write(&mut typed).expect("write");
            let before = crate::jsonrpc::result("\"call-9\"", &written.clone());
            let at = written.as_ptr();
            let line = crate::jsonrpc::result_around("\"call-9\"", written);
            assert_eq!(line, before);
            // Written in the listing's own buffer: it has room for the envelope.
            assert_eq!(line.as_ptr(), at);
        }
    }

    #[test]
    fn tools_in_the_upstreams_order_are_found_by_place_and_copied_as_the_upstream_wrote_them() {
        let raw = listing(609);
        let read = Listing::read(raw.clone()).expect("read");
        let mut typed = read.typed();
        typed.tools.remove(5);
        let mut added = rmcp::model::Tool::default();
        added.name = "synthetic".into();
        added.input_schema =
            Arc::new(serde_json::from_value(json!({"type": "object"})).expect("schema"));
        typed.tools.insert(100, added);
        let expected = serde_json::to_value(&typed).expect("value");
        let written = read.write(&mut typed).expect("write");
        assert_eq!(
            serde_json::from_str::<Value>(&written).expect("valid JSON"),
            expected
        );
        // Every upstream tool is the upstream's text, in the hooks' order.
        let spans: Vec<&str> = (0..609)
            .filter(|at| *at != 5)
            .map(|at| &raw[read.tool_spans[at].clone()])
            .collect();
        assert!(written.contains(&spans[..100].join(",")));
        assert!(written.contains(&spans[100..].join(",")));
        assert!(written.contains(&format!("{},{{", spans[99])));
    }

    #[test]
    fn a_tool_the_hooks_changed_is_written_from_its_fields() {
        let raw = listing(605).replace("Tool 7 ", "Tool\\u00207 ");
        let read = Listing::read(raw).expect("read");
        let mut typed = read.typed();
        typed.tools[8].description = Some("changed".into());
        let expected = serde_json::to_value(&typed).expect("value");
        let written = read.write(&mut typed).expect("write");
        // Not copied: the serialiser's own spelling.
        assert!(written.contains("Tool 7 "), "{written}");
        let written: Value = serde_json::from_str(&written).expect("valid JSON");
        assert_eq!(written, expected);
    }

    #[test]
    fn a_listing_with_line_breaks_is_written_on_one_line() {
        let raw = listing(10).replace(",\"", ",\n \"");
        let read = Listing::read(raw.clone()).expect("read");
        let written = read.write(&mut read.typed()).expect("write");
        assert!(!written.contains('\n'), "{written}");
        let written: Value = serde_json::from_str(&written).expect("valid JSON");
        assert_eq!(written, serde_json::from_str::<Value>(&raw).expect("json"));
    }

    #[test]
    fn spliced_schemas_keep_the_upstreams_spelling() {
        let raw = listing(3).replace("\"type\":\"object\"", "\"type\" : \"obj\\u0065ct\"");
        let read = Listing::read(raw.clone()).expect("read");
        let written = read.write(&mut read.typed()).expect("write");
        assert!(written.contains("\"type\" : \"obj\\u0065ct\""), "{written}");
        assert_eq!(
            serde_json::from_str::<Value>(&written).expect("valid JSON"),
            serde_json::from_str::<Value>(&raw).expect("json")
        );
    }

    #[test]
    fn an_untouched_listing_writes_the_same_json() {
        let raw = listing(600);
        let read = Listing::read(raw.clone()).expect("read");
        let mut typed = read.typed();
        let written = read.write(&mut typed).expect("write");
        let written: Value = serde_json::from_str(&written).expect("valid JSON");
        assert_eq!(written, serde_json::from_str::<Value>(&raw).expect("json"));
    }

    #[test]
    fn a_second_read_of_the_same_text_shares_the_schemas() {
        let raw = listing(601);
        let first = Listing::read(raw.clone()).expect("read");
        let second = Listing::read(raw).expect("read");
        assert!(Arc::ptr_eq(&first, &second));
        let (a, b) = (first.typed(), second.typed());
        assert!(Arc::ptr_eq(
            &a.tools[0].input_schema,
            &b.tools[0].input_schema
        ));
    }

    #[test]
    fn what_the_hooks_change_is_written_as_changed() {
        let raw = listing(602);
        let read = Listing::read(raw.clone()).expect("read");
        let mut typed = read.typed();
        typed.tools.retain(|tool| tool.name != "tool_1");
        typed.tools.swap(0, 1);
        Arc::make_mut(&mut typed.tools[2].input_schema).insert("title".into(), json!("changed"));
        typed.tools[3].output_schema = Some(Arc::new(JsonObject::new()));
        let mut added = rmcp::model::Tool::default();
        added.name = "synthetic".into();
        added.input_schema =
            Arc::new(serde_json::from_value(json!({"type": "object"})).expect("schema"));
        typed.tools.push(added);
        let expected = serde_json::to_value(&typed).expect("value");
        let written = read.write(&mut typed).expect("write");
        let written: Value = serde_json::from_str(&written).expect("valid JSON");
        assert_eq!(written, expected);
        // The kept listing is untouched by the hooks' changes.
        let again = read.typed();
        assert!(again.tools[3].input_schema.get("title").is_none());
    }
}
