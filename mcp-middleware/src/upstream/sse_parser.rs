//! The event-stream format (WHATWG HTML, "Server-sent events", 9.2.6), parsed as bytes arrive:
//! `LF`, `CR` and `CRLF` line endings (a `CRLF` may be split between chunks), a leading BOM,
//! comments, `data:` lines joined, `id:` without NUL, `retry:` of digits only, unknown fields
//! ignored, an event dispatched at its blank line only.
//!
//! Why the proxy's own parser and not `sse-stream`'s (which the tests take as the reference
//! reading and compare against): a message that arrives as one `data:` field of a megabyte must
//! be cut through while it arrives (`cut_stream.rs`), and no event-stream crate hands out a
//! field before its event has ended. So this parser can stop once the data of the event being
//! read has passed [`CUT_AT`] ([`Step::PastCutAt`]) and let its reader take the data read so
//! far ([`Parser::take_data`]), again and again, while the rest arrives.
//!
//! One difference from the specification, on purpose: the data lines of one event are joined
//! with a space, not a line feed. An event's data is one JSON-RPC message, where a line break
//! can only be whitespace between tokens, and the session reads line-framed messages.

use hyper::body::{Buf, Bytes};

use crate::transport::cut_through::CUT_AT;

/// The UTF-8 byte order mark, skipped at the start of the stream.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Why the stream cannot be read on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ParseError {
    /// One event is larger than the limit (its lines, data and comments among them).
    #[error("an event over the size limit of {0} bytes")]
    TooLarge(usize),
    /// An event's data or id is not UTF-8.
    #[error("the event stream is malformed: an event's {0} is not UTF-8")]
    NotUtf8(&'static str),
}

/// An event as the stream gave it: the fields the proxy uses, its data not yet checked as
/// UTF-8 (the reader does that, or cuts it through).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct RawEvent {
    /// The data lines, joined with a space; `None` when the event had no `data` field.
    pub(crate) data: Option<Vec<u8>>,
    /// The event's `id` (an empty one is kept: it clears the last event id).
    pub(crate) id: Option<String>,
    /// The event's `retry`, in milliseconds.
    pub(crate) retry: Option<u64>,
}

/// What [`Parser::feed`] stopped at.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// An event ended.
    Event(RawEvent),
    /// The data of the event being read has passed [`CUT_AT`] (once per event, and only while
    /// [`Parser::watch`] is set): its first bytes are [`Parser::data`].
    PastCutAt,
    /// Every byte given was read; more are needed.
    More,
}

/// Which field a line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Data,
    Id,
    Retry,
    Event,
    /// A comment (no name) or a field the format does not define.
    Ignored,
}

/// Where the parser is in a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    LineStart,
    /// In the field's name (no colon yet).
    Name,
    /// In the field's value; `space` while one leading space may still be skipped.
    Value {
        field: Field,
        space: bool,
    },
}

/// An event stream being parsed, chunk by chunk.
#[derive(Debug)]
pub(crate) struct Parser {
    place: Place,
    /// The last line ended with `CR`: an `LF` right after it is part of that line ending.
    after_cr: bool,
    /// Still in the stream's first line, where a BOM is skipped.
    first_line: bool,
    name: Vec<u8>,
    /// An `id` or `retry` value being read.
    value: Vec<u8>,
    data: Vec<u8>,
    /// The event has had a `data` line (the next one is joined with a space).
    has_data: bool,
    /// The event has a field that makes it an event (data, event, a valid id or retry).
    has_fields: bool,
    id: Option<String>,
    retry: Option<u64>,
    /// Bytes of the event being read, held to `max`.
    held: usize,
    max: usize,
    /// Stop at [`Step::PastCutAt`] in the events read from now on (the reader sets it).
    pub(crate) watch: bool,
    /// [`Step::PastCutAt`] was given for the event being read.
    past_cut_at: bool,
}

impl Parser {
    /// A parser refusing events over `max` bytes.
    pub(crate) fn new(max: usize) -> Self {
        Self {
            place: Place::LineStart,
            after_cr: false,
            first_line: true,
            name: Vec::new(),
            value: Vec::new(),
            data: Vec::new(),
            has_data: false,
            has_fields: false,
            id: None,
            retry: None,
            held: 0,
            max,
            watch: false,
            past_cut_at: false,
        }
    }

    /// The data of the event being read, so far.
    pub(crate) fn data(&self) -> &[u8] {
        &self.data
    }

    /// Takes the data of the event being read, so far: what follows is data read from then on.
    pub(crate) fn take_data(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.data)
    }

    /// Reads from `bytes` until an event ends, the event's data passes [`CUT_AT`], or `bytes`
    /// is used up; what was read is advanced past.
    pub(crate) fn feed(&mut self, bytes: &mut Bytes) -> Result<Step, ParseError> {
        let mut read = 0;
        let step = self.parse(bytes, &mut read);
        bytes.advance(read);
        step
    }

    fn parse(&mut self, buf: &[u8], at: &mut usize) -> Result<Step, ParseError> {
        while *at < buf.len() {
            if self.after_cr {
                self.after_cr = false;
                if buf[*at] == b'\n' {
                    self.hold(1)?;
                    *at += 1;
                    continue;
                }
            }
            match self.place {
                Place::LineStart => {
                    let byte = buf[*at];
                    if byte == b'\n' || byte == b'\r' {
                        self.hold(1)?;
                        *at += 1;
                        self.after_cr = byte == b'\r';
                        self.first_line = false;
                        if let Some(event) = self.dispatch() {
                            return Ok(Step::Event(event));
                        }
                    } else {
                        self.place = Place::Name;
                    }
                }
                Place::Name => {
                    let rest = &buf[*at..];
                    let Some(end) = memchr::memchr3(b':', b'\r', b'\n', rest) else {
                        self.hold(rest.len())?;
                        self.name.extend_from_slice(rest);
                        *at = buf.len();
                        continue;
                    };
                    self.hold(end + 1)?;
                    self.name.extend_from_slice(&rest[..end]);
                    *at += end + 1;
                    let field = self.field();
                    if field == Field::Data {
                        self.start_data();
                    }
                    if rest[end] == b':' {
                        self.place = Place::Value { field, space: true };
                    } else {
                        // A name alone is the field with an empty value.
                        self.after_cr = rest[end] == b'\r';
                        self.end_line(field)?;
                    }
                }
                Place::Value { field, space } => {
                    let mut rest = &buf[*at..];
                    if space {
                        self.place = Place::Value {
                            field,
                            space: false,
                        };
                        if rest[0] == b' ' {
                            self.hold(1)?;
                            *at += 1;
                            rest = &rest[1..];
                        }
                    }
                    let end = memchr::memchr2(b'\r', b'\n', rest);
                    let value = &rest[..end.unwrap_or(rest.len())];
                    self.hold(value.len() + usize::from(end.is_some()))?;
                    match field {
                        Field::Data => self.data.extend_from_slice(value),
                        Field::Id | Field::Retry => self.value.extend_from_slice(value),
                        Field::Event | Field::Ignored => {}
                    }
                    *at += value.len();
                    if let Some(end) = end {
                        *at += 1;
                        self.after_cr = rest[end] == b'\r';
                        self.end_line(field)?;
                    }
                    if field == Field::Data
                        && self.watch
                        && !self.past_cut_at
                        && self.data.len() >= CUT_AT
                    {
                        self.past_cut_at = true;
                        return Ok(Step::PastCutAt);
                    }
                }
            }
        }
        Ok(Step::More)
    }

    /// Counts `len` more bytes of the event being read against the limit.
    fn hold(&mut self, len: usize) -> Result<(), ParseError> {
        self.held = self.held.saturating_add(len);
        if self.held > self.max {
            return Err(ParseError::TooLarge(self.max));
        }
        Ok(())
    }

    /// The field the name read names (a BOM before the stream's first name is skipped).
    fn field(&mut self) -> Field {
        let mut name = &self.name[..];
        if self.first_line {
            name = name.strip_prefix(BOM).unwrap_or(name);
        }
        let field = match name {
            b"data" => Field::Data,
            b"id" => Field::Id,
            b"retry" => Field::Retry,
            b"event" => Field::Event,
            _ => Field::Ignored,
        };
        self.name.clear();
        field
    }

    fn start_data(&mut self) {
        if self.has_data {
            self.data.push(b' ');
        }
        self.has_data = true;
        self.has_fields = true;
    }

    /// A line of `field` ended: its value takes effect.
    fn end_line(&mut self, field: Field) -> Result<(), ParseError> {
        self.place = Place::LineStart;
        self.first_line = false;
        let value = std::mem::take(&mut self.value);
        match field {
            Field::Data => {}
            // NUL makes the value invalid, not the field.
            Field::Id if value.contains(&0) => {}
            Field::Id => {
                self.id = Some(String::from_utf8(value).map_err(|_| ParseError::NotUtf8("id"))?);
                self.has_fields = true;
            }
            Field::Retry => {
                if !value.is_empty()
                    && value.iter().all(u8::is_ascii_digit)
                    && let Some(ms) = std::str::from_utf8(&value)
                        .ok()
                        .and_then(|ms| ms.parse().ok())
                {
                    self.retry = Some(ms);
                    self.has_fields = true;
                }
            }
            Field::Event => self.has_fields = true,
            // A comment between events is no part of one: it does not count against the limit.
            Field::Ignored if !self.has_fields => self.held = 0,
            Field::Ignored => {}
        }
        Ok(())
    }

    /// A blank line: the event read so far, if it has any field.
    fn dispatch(&mut self) -> Option<RawEvent> {
        self.held = 0;
        self.past_cut_at = false;
        if !self.has_fields {
            return None;
        }
        self.has_fields = false;
        let data = std::mem::take(&mut self.has_data).then(|| std::mem::take(&mut self.data));
        Some(RawEvent {
            data,
            id: self.id.take(),
            retry: self.retry.take(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;
    use proptest::prelude::*;

    /// Every event of `chunks`, fed one by one, or the error that stopped them.
    fn parse(chunks: &[&[u8]], max: usize) -> (Vec<RawEvent>, Option<ParseError>) {
        let mut parser = Parser::new(max);
        let mut events = Vec::new();
        for chunk in chunks {
            let mut bytes = Bytes::copy_from_slice(chunk);
            loop {
                match parser.feed(&mut bytes) {
                    Ok(Step::Event(event)) => events.push(event),
                    Ok(Step::PastCutAt) => {}
                    Ok(Step::More) => break,
                    Err(err) => return (events, Some(err)),
                }
            }
        }
        (events, None)
    }

    /// The data of each event, as text.
    fn data(events: &[RawEvent]) -> Vec<Option<String>> {
        events
            .iter()
            .map(|e| e.data.clone().map(|d| String::from_utf8(d).unwrap()))
            .collect()
    }

    /// `text` split at every byte, and into two at each place.
    fn splits(text: &[u8]) -> Vec<Vec<&[u8]>> {
        let mut all = vec![text.chunks(1).collect::<Vec<_>>()];
        for at in 0..=text.len() {
            all.push(vec![&text[..at], &text[at..]]);
        }
        all
    }

    #[test]
    fn fields_line_endings_bom_and_comments_wherever_the_chunks_break() {
        let stream =
            b"\xEF\xBB\xBFdata: a\n\n: note\r\nid: 7\r\nretry: 250\revent: x\ndata\ndata:b\r\n\r\n";
        for chunks in splits(stream) {
            let (events, err) = parse(&chunks, 1024);
            assert_eq!(err, None);
            assert_eq!(
                events,
                [
                    RawEvent {
                        data: Some(b"a".to_vec()),
                        ..RawEvent::default()
                    },
                    RawEvent {
                        data: Some(b" b".to_vec()),
                        id: Some("7".into()),
                        retry: Some(250),
                    },
                ],
                "{chunks:?}"
            );
        }
    }

    #[test]
    fn invalid_ids_and_retries_are_ignored_and_an_unfinished_event_is_dropped() {
        let (events, err) = parse(
            &[b"id: a\0b\nretry: 1s\ndata: x\n\nid\n\nretry: 5\n\n: c\n\ndata: y\n"],
            1024,
        );
        assert_eq!(err, None);
        assert_eq!(
            events,
            [
                RawEvent {
                    data: Some(b"x".to_vec()),
                    ..RawEvent::default()
                },
                RawEvent {
                    id: Some(String::new()),
                    ..RawEvent::default()
                },
                RawEvent {
                    retry: Some(5),
                    ..RawEvent::default()
                },
            ]
        );
    }

    #[test]
    fn an_event_over_the_limit_stops_the_stream_and_comments_between_events_do_not_count() {
        // 18 bytes: within 20.
        let (events, err) = parse(&[b"data: 0123456789\n\n", b"data: 0123456789012345"], 20);
        assert_eq!(data(&events), [Some("0123456789".into())]);
        assert_eq!(err, Some(ParseError::TooLarge(20)));
        let keep_alives = b": ping\n\n".repeat(100);
        let (events, err) = parse(&[&keep_alives, b"data: x\n\n"], 20);
        assert_eq!((data(&events), err), (vec![Some("x".into())], None));
    }

    #[test]
    fn the_data_of_a_large_event_can_be_taken_as_it_arrives() {
        let filler = vec![b'x'; CUT_AT];
        let stream = [
            b"id: 1\ndata: {\"a\":\"".as_slice(),
            &filler,
            b"\"}\ndata: 2\nid: 9\n\n",
        ];
        let mut parser = Parser::new(4 * CUT_AT);
        parser.watch = true;
        let mut taken = Vec::new();
        let mut steps = Vec::new();
        for chunk in stream {
            let mut bytes = Bytes::copy_from_slice(chunk);
            loop {
                match parser.feed(&mut bytes).unwrap() {
                    Step::PastCutAt => {
                        steps.push("past");
                        taken.extend(parser.take_data());
                    }
                    Step::Event(event) => {
                        steps.push("event");
                        taken.extend(event.data.unwrap());
                        assert_eq!(event.id.as_deref(), Some("9"));
                    }
                    Step::More => {
                        // The reader takes what came while it cuts through.
                        if !steps.is_empty() {
                            taken.extend(parser.take_data());
                        }
                        break;
                    }
                }
            }
        }
        assert_eq!(steps, ["past", "event"]);
        let expected = [b"{\"a\":\"".as_slice(), &filler, b"\"} 2"].concat();
        assert_eq!(taken, expected);
    }

    /// sse-stream's reading of `stream`: each event's data (its lines joined with a space, as
    /// this parser joins them), id and retry.
    async fn reference(stream: &[u8], chunks: &[usize]) -> Result<Vec<RawEvent>, ()> {
        let mut pieces = Vec::new();
        let mut from = 0;
        for &len in chunks {
            let to = (from + len).min(stream.len());
            pieces.push(Ok::<_, std::convert::Infallible>(Bytes::copy_from_slice(
                &stream[from..to],
            )));
            from = to;
        }
        pieces.push(Ok(Bytes::copy_from_slice(&stream[from..])));
        let mut events = sse_stream::SseByteStream::new(futures_util::stream::iter(pieces));
        let mut out = Vec::new();
        while let Some(event) = events.next().await {
            let event = event.map_err(|_| ())?;
            out.push(RawEvent {
                data: event.data.map(|d| d.replace('\n', " ").into_bytes()),
                id: event.id,
                retry: event.retry,
            });
        }
        Ok(out)
    }

    /// A line of an event stream, from the parts that matter to a parser.
    fn line() -> impl Strategy<Value = Vec<u8>> {
        let name = prop::sample::select(vec![
            "data", "id", "retry", "event", "", "dat", "datas", "x",
        ]);
        let value = prop::sample::select(vec![
            "",
            " ",
            "  a",
            "7",
            "12",
            "1x",
            "{\"k\":[1, 2]}",
            "é",
            "\0",
            "a:b",
        ]);
        let colon = prop::sample::select(vec!["", ":", ": "]);
        let end = prop::sample::select(vec!["\n", "\r", "\r\n"]);
        (name, colon, value, end, any::<bool>()).prop_map(|(name, colon, value, end, blank)| {
            let line = if blank {
                end.to_owned()
            } else if colon.is_empty() {
                format!("{name}{end}")
            } else {
                format!("{name}{colon}{value}{end}")
            };
            line.into_bytes()
        })
    }

    proptest! {
        /// Whatever the lines and wherever the chunks break, the events are sse-stream's.
        #[test]
        fn reads_as_sse_stream_does(
            bom in any::<bool>(),
            lines in prop::collection::vec(line(), 0..24),
            chunks in prop::collection::vec(1usize..9, 0..40),
        ) {
            let mut stream = if bom { BOM.to_vec() } else { Vec::new() };
            stream.extend(lines.concat());
            let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let expected = runtime.block_on(reference(&stream, &chunks)).unwrap();
            let mut pieces = Vec::new();
            let mut from = 0;
            for &len in &chunks {
                let to = (from + len).min(stream.len());
                pieces.push(&stream[from..to]);
                from = to;
            }
            pieces.push(&stream[from..]);
            let (events, err) = parse(&pieces, usize::MAX);
            prop_assert_eq!(err, None);
            prop_assert_eq!(events, expected);
        }
    }
}
