//! `paginate`: large text results come back one page at a time.

use std::sync::Arc;

use mcp_middleware::proxy_model;

use crate::paging::{self, Limits, Store};

/// Cuts large text content into pages: the client gets page 1 and reads the rest with `read_page`.
///
/// Every text part of a tool result, resource read or prompt message that is larger than
/// `pageBytes` is cut at line boundaries (a line longer than a page at a character boundary,
/// never inside a UTF-8 character). The client gets page 1 followed by a footer such as
/// `[page 1 of 12 (380.5 KiB in all); for page 2 call the tool read_page with {"cursor":
/// "3fa9c2d1-2846519-2"}]`; `read_page` returns each later page with its own footer, and the last
/// one's footer says it is the last. The pages without their footers concatenate to the
/// original text exactly. Images, audio, resource links and blobs pass untouched, and so does
/// text that fits one page.
///
/// A session keeps its last `maxDocuments` paged texts (at most `maxStoredBytes` together);
/// storing another drops the oldest. A cursor of a dropped text, of another session or of an
/// earlier run of the proxy gets a tool error that says so.
///
/// The model implements only `transform_content`, the `read_page` tool and `State`, so it
/// composes with models that hook `tools/list` or `tools/call` (such as `gate`) without a
/// conflict. With other content models, the innermost model's transform runs first.
#[proxy_model]
pub mod paginate {
    use mcp_middleware::prelude::*;

    use super::{Document, Limits, PageStore, paging};

    /// How large a page is and how much a session keeps.
    #[derive(Debug, Clone, Deserialize, JsonSchema)]
    #[serde(default, rename_all = "camelCase", deny_unknown_fields)]
    pub struct Config {
        /// The largest page, in bytes of UTF-8 text (the footer comes on top of it). Text no
        /// larger than this passes unchanged. At least 256; default 32768 (32 KiB, roughly 8,000
        /// tokens).
        #[serde(deserialize_with = "paging::at_least::<256, _>")]
        #[schemars(range(min = 256))]
        pub page_bytes: usize,
        /// How many paged texts a session keeps for `read_page`; storing one more drops the
        /// oldest. At least 1; default 16.
        #[serde(deserialize_with = "paging::at_least::<1, _>")]
        #[schemars(range(min = 1))]
        pub max_documents: usize,
        /// How many bytes of paged text a session keeps at most, all texts together (the newest
        /// is kept even if it alone is larger). At least 1; default 33554432 (32 MiB).
        #[serde(deserialize_with = "paging::at_least::<1, _>")]
        #[schemars(range(min = 1))]
        pub max_stored_bytes: usize,
    }

    impl Default for Config {
        fn default() -> Self {
            Self {
                page_bytes: 32 * 1024,
                max_documents: 16,
                max_stored_bytes: 32 * 1024 * 1024,
            }
        }
    }

    impl Config {
        pub(crate) fn limits(&self) -> Limits {
            Limits {
                documents: self.max_documents,
                bytes: self.max_stored_bytes,
            }
        }
    }

    /// The texts this session paged, for `read_page` (serde: a shared store carries them
    /// between replicas, so a cursor reads on any of them).
    #[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
    pub struct State {
        pub(crate) store: PageStore,
    }

    /// Cuts text larger than a page, stores it, and returns page 1 with its footer.
    pub async fn transform_content(ctx: &Context, content: Content) -> HookResult<String> {
        let config = ctx.config::<Config>()?;
        if content.text.len() <= config.page_bytes {
            return Ok(content.text);
        }
        let document = Document::new(content.text, config.page_bytes);
        let limits = config.limits();
        let first = ctx.state(|state: &mut State| state.store.add(document, limits))?;
        Ok(first)
    }

    /// What `read_page` takes.
    #[derive(Debug, Deserialize, JsonSchema)]
    pub struct ReadPage {
        /// The cursor from a page's footer, exactly as given.
        pub cursor: String,
    }

    /// Returns the next page of a large result that was cut into pages. Pass the cursor from
    /// the footer of the page before; each page ends with a footer that names the cursor of the
    /// page after it, up to the last.
    #[tool]
    pub async fn read_page(ctx: &Context, args: ReadPage) -> HookResult<CallToolResult> {
        let limits = ctx.config::<Config>()?.limits();
        let answer = ctx.state(|state: &mut State| state.store.read(&args.cursor, limits))?;
        Ok(match answer {
            Ok(page) => CallToolResult::success(vec![ContentBlock::text(page)]),
            Err(message) => CallToolResult::error(vec![ContentBlock::text(message)]),
        })
    }
}

/// One paged text: the text and where its pages end.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Document {
    text: Arc<str>,
    ends: Vec<usize>,
}

impl Document {
    fn new(text: String, page_bytes: usize) -> Self {
        let ends = paging::page_ends(&text, page_bytes);
        Self {
            text: text.into(),
            ends,
        }
    }
}

/// A session's paged texts, each under a random number, under a random tag that
/// tells this session's cursors from any other's.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct PageStore {
    tag: u32,
    stored: u64,
    /// Every tag this session's cursors were handed out under (hex). One, unless replicas
    /// sharing the session each stored a first document at once: a merge keeps one `tag`
    /// and both entries here, so both replicas' cursors still read.
    #[serde(default)]
    tags: std::collections::BTreeMap<String, bool>,
    documents: Store<u64, Document>,
}

impl Default for PageStore {
    fn default() -> Self {
        Self {
            tag: paging::session_tag(),
            stored: 0,
            tags: std::collections::BTreeMap::new(),
            documents: Store::default(),
        }
    }
}

/// Where a cursor points.
struct Cursor {
    tag: u32,
    document: u64,
    page: usize,
}

impl Cursor {
    fn parse(text: &str) -> Option<Cursor> {
        let mut parts = text.trim().split('-');
        let tag = parts.next()?;
        if tag.len() != 8 {
            return None;
        }
        let cursor = Cursor {
            tag: u32::from_str_radix(tag, 16).ok()?,
            document: parts.next()?.parse().ok()?,
            page: parts.next()?.parse().ok()?,
        };
        parts.next().is_none().then_some(cursor)
    }
}

impl PageStore {
    /// A number for the next document: random, not one kept. Not a count: two replicas that
    /// each store a document of one session at once (a shared store) must not give both the
    /// same number, or the merge of their states would keep only one.
    fn next_number(&mut self) -> u64 {
        self.stored += 1;
        self.tags.insert(format!("{:08x}", self.tag), true);
        loop {
            let number = u64::from(paging::session_tag());
            if number != 0 && !self.documents.contains(&number) {
                return number;
            }
        }
    }

    /// Stores a text of several pages; returns page 1 with its footer.
    fn add(&mut self, document: Document, limits: Limits) -> String {
        let number = self.next_number();
        let first = self.render(number, &document, 1);
        let size = document.text.len();
        self.documents.insert(number, document, size, limits);
        first
    }

    /// Stores a text for reading from its first page (what `summarize` keeps of the original);
    /// returns the cursor of page 1 and the number of pages.
    pub(crate) fn keep(
        &mut self,
        text: String,
        page_bytes: usize,
        limits: Limits,
    ) -> (String, usize) {
        let document = Document::new(text, page_bytes);
        let number = self.next_number();
        let pages = document.ends.len();
        let size = document.text.len();
        self.documents.insert(number, document, size, limits);
        (format!("{:08x}-{number}-1", self.tag), pages)
    }

    /// The page a cursor points to, with its footer, or why there is none.
    fn read(&mut self, cursor: &str, limits: Limits) -> Result<String, String> {
        let Some(parsed) = Cursor::parse(cursor) else {
            return Err(format!(
                "`{cursor}` is not a read_page cursor: pass the cursor from a page footer exactly \
                 as it is given (such as \"{:08x}-1-2\")",
                self.tag
            ));
        };
        let ours = parsed.tag == self.tag || self.tags.contains_key(&format!("{:08x}", parsed.tag));
        if !ours || parsed.document == 0 || self.stored == 0 {
            return Err(format!(
                "cursor `{cursor}` does not belong to this session (it comes from another session \
                 or an earlier run of the proxy): call the original tool again for fresh pages"
            ));
        }
        let Some(document) = self.documents.get(&parsed.document) else {
            return Err(format!(
                "cursor `{cursor}` has expired: its result was dropped to make room (a session \
                 keeps its last {} paged results, {} at most): call the original tool again",
                limits.documents,
                paging::size(limits.bytes)
            ));
        };
        if parsed.page == 0 || parsed.page > document.ends.len() {
            return Err(format!(
                "cursor `{cursor}` points past the end: that result has {} pages",
                document.ends.len()
            ));
        }
        let page = self.render(parsed.document, document, parsed.page);
        self.documents.touch(&parsed.document);
        Ok(page)
    }

    /// Page `page` of a stored text, with its footer.
    fn render(&self, number: u64, document: &Document, page: usize) -> String {
        let text = paging::page(&document.text, &document.ends, page).unwrap_or_default();
        let count = document.ends.len();
        let footer = if page < count {
            format!(
                "[page {page} of {count} ({} in all); for page {} call the tool read_page with \
                 {{\"cursor\": \"{:08x}-{number}-{}\"}}]",
                paging::size(document.text.len()),
                page + 1,
                self.tag,
                page + 1
            )
        } else {
            format!("[page {page} of {count}, the last]")
        };
        let mut out = String::with_capacity(text.len() + footer.len() + 2);
        out.push_str(text);
        out.push_str(FOOTER_SEPARATOR);
        out.push_str(&footer);
        out
    }
}

/// What comes between a page's text and its footer.
pub(crate) const FOOTER_SEPARATOR: &str = "\n\n";

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        documents: 2,
        bytes: 1 << 20,
    };

    fn strip(page: &str) -> &str {
        let at = page.rfind("\n\n[page ").expect("a footer");
        &page[..at]
    }

    fn next_cursor(page: &str) -> Option<String> {
        let at = page.rfind("{\"cursor\": \"")?;
        let rest = &page[at + 12..];
        Some(rest[..rest.find('"')?].to_owned())
    }

    #[test]
    fn pages_read_back_to_the_original() {
        let text: String = (0..200).map(|i| format!("line {i} żółw\n")).collect();
        let mut store = PageStore::default();
        let mut page = store.add(Document::new(text.clone(), 300), LIMITS);
        let mut joined = strip(&page).to_owned();
        while let Some(cursor) = next_cursor(&page) {
            page = store.read(&cursor, LIMITS).expect("a page");
            joined.push_str(strip(&page));
        }
        assert!(page.ends_with("the last]"), "{page}");
        assert_eq!(joined, text);
    }

    /// Text made of pieces that stress the cutting: multi-byte characters of every width,
    /// `\r\n`, empty lines and very long lines.
    fn text_strategy() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let piece = prop_oneof![
            "[a-z ]{0,20}",
            Just("\n".to_owned()),
            Just("\r\n".to_owned()),
            Just("é€𝄞ż".to_owned()),
            "[à-ÿ]{1,10}",
            "[一-龥]{1,10}",
            "[😀-🙏]{1,5}",
            (1usize..3000).prop_map(|n| "x".repeat(n)),
            (1usize..800).prop_map(|n| "€".repeat(n)),
        ];
        proptest::collection::vec(piece, 0..80).prop_map(|pieces| pieces.concat())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

        #[test]
        fn pages_concatenate_to_the_original(text in text_strategy(), page_bytes in 4usize..600) {
            let ends = paging::page_ends(&text, page_bytes);
            let pages: Vec<&str> = (1..=ends.len())
                .map(|n| paging::page(&text, &ends, n).expect("every page exists"))
                .collect();
            proptest::prop_assert_eq!(pages.concat(), text.as_str());
            for (at, page) in pages.iter().enumerate() {
                proptest::prop_assert!(page.len() <= page_bytes, "page {} has {} bytes", at, page.len());
                let last = at + 1 == pages.len();
                // A page ends at a line break unless its line alone was longer than a page.
                proptest::prop_assert!(last || page.ends_with('\n') || !page.contains('\n'));
                proptest::prop_assert!(last || !page.is_empty());
            }
        }

        #[test]
        fn pages_read_through_the_store_give_the_original(text in text_strategy(), page_bytes in 256usize..2000) {
            let mut store = PageStore::default();
            let limits = Limits { documents: 4, bytes: 1 << 24 };
            let mut page = store.add(Document::new(text.clone(), page_bytes), limits);
            let mut joined = strip(&page).to_owned();
            while let Some(cursor) = next_cursor(&page) {
                page = store.read(&cursor, limits).expect("a page");
                joined.push_str(strip(&page));
            }
            proptest::prop_assert_eq!(joined, text);
        }
    }

    #[test]
    fn bad_cursors_say_why() {
        let mut store = PageStore::default();
        let text = "x\n".repeat(1000);
        let first = store.add(Document::new(text.clone(), 256), LIMITS);
        let cursor = next_cursor(&first).expect("cursor");
        store.add(Document::new(text.clone(), 256), LIMITS);
        let last = store.add(Document::new(text, 256), LIMITS);
        let last = next_cursor(&last).expect("cursor");
        let number = last.split('-').nth(1).expect("a document number");
        let expired = store.read(&cursor, LIMITS).unwrap_err();
        assert!(expired.contains("expired"), "{expired}");
        let garbled = store.read("nonsense", LIMITS).unwrap_err();
        assert!(garbled.contains("not a read_page cursor"), "{garbled}");
        let foreign = store.read("00000000-3-2", LIMITS).unwrap_err();
        assert!(foreign.contains("another session"), "{foreign}");
        let tag = format!("{:08x}", store.tag);
        let past = store
            .read(&format!("{tag}-{number}-999"), LIMITS)
            .unwrap_err();
        assert!(past.contains("has 8 pages"), "{past}");
        let unissued = store.read(&format!("{tag}-0-2"), LIMITS).unwrap_err();
        assert!(unissued.contains("another session"), "{unissued}");
        let unissued = store.read(&format!("{tag}-9-2"), LIMITS).unwrap_err();
        assert!(unissued.contains("expired"), "{unissued}");
        let fresh = PageStore::default().read(&format!("{tag}-9-2"), LIMITS);
        assert!(fresh.unwrap_err().contains("another session"));
    }
}
