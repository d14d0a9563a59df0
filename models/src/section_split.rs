//! `section-split`: large Markdown, JSON and YAML come back as a table of contents.

use std::sync::Arc;

use mcp_middleware::proxy_model;

use crate::paging::{self, Limits, Store};
use crate::sections::{self, Format, Node, Settings};

/// Replaces large Markdown, JSON and YAML content with a table of contents; `read_section`
/// returns one section. Other large text is paged.
///
/// Content larger than `thresholdBytes` (every text part of a tool result, resource read or
/// prompt message) is taken apart by its format: the MIME type says it when it names Markdown,
/// JSON or YAML; without one (or with `text/plain`) the text is sniffed (JSON that parses, YAML
/// whose top level is all `key:` lines and list items, Markdown with two or more headings).
///
/// - Markdown is split at its headings, at the shallowest level that gives two or more parts.
/// - JSON is split into an object's members (`$.name`) or an array's chunks (`$.items[0..99]`);
///   an object with one member or an array with one element is looked through.
/// - YAML is split at its top-level keys, list items or `---` documents.
///
/// The client gets the table of contents instead: each section's id, size and title. The tool
/// `read_section` with `{"id": ...}` returns that section; a section that is itself larger than
/// `thresholdBytes` and splits again comes back as a table of its own parts, and one that does
/// not split but is larger than `pageBytes` comes back as page 1 with a footer naming the id of
/// the next page (`<id>-p2`). Text that is not one of the three formats (or does not split into
/// two or more parts) is paged the same way, from its first page. More than `maxSections`
/// parts are grouped into runs of consecutive parts.
///
/// Section ids are the document's content hash and the section's path of indexes
/// (`3fa9c2d1-2-1`, page `3fa9c2d1-2-1-p2`): the same content always gets the same ids. A
/// session keeps its last `maxDocuments` documents (`maxStoredBytes` together); an id of a
/// document no longer kept gets a tool error that says so.
///
/// Composition: section-split shares its page cutting with `paginate` (a helper module, not
/// `extends`), so both can sit in one chain. `extends = [paginate, section_split]` with
/// `chain = [transform_content]` splits first (the innermost transform runs first) and pages
/// whatever is still too large. Content returned by `read_section` and `read_page` is never
/// split again.
#[proxy_model(name = "section-split")]
pub mod section_split {
    use mcp_middleware::prelude::*;

    use super::{Limits, SectionStore, Settings, paging};

    /// When to split, how large pages are and how much a session keeps.
    #[derive(Debug, Clone, Deserialize, JsonSchema)]
    #[serde(default, rename_all = "camelCase", deny_unknown_fields)]
    pub struct Config {
        /// Content (and a section) larger than this, in bytes, is split into sections. At least
        /// 256; default 32768 (32 KiB).
        #[serde(deserialize_with = "paging::at_least::<256, _>")]
        #[schemars(range(min = 256))]
        pub threshold_bytes: usize,
        /// The largest page of text that does not split, in bytes (the footer comes on top). At
        /// least 256; default 32768.
        #[serde(deserialize_with = "paging::at_least::<256, _>")]
        #[schemars(range(min = 256))]
        pub page_bytes: usize,
        /// The most entries one table of contents lists; more parts are grouped into runs. At
        /// least 2; default 50.
        #[serde(deserialize_with = "paging::at_least::<2, _>")]
        #[schemars(range(min = 2))]
        pub max_sections: usize,
        /// How many split documents a session keeps for `read_section`; storing one more drops
        /// the oldest. At least 1; default 16.
        #[serde(deserialize_with = "paging::at_least::<1, _>")]
        #[schemars(range(min = 1))]
        pub max_documents: usize,
        /// How many bytes of documents a session keeps at most, all together (the newest is kept
        /// even if it alone is larger). At least 1; default 33554432 (32 MiB).
        #[serde(deserialize_with = "paging::at_least::<1, _>")]
        #[schemars(range(min = 1))]
        pub max_stored_bytes: usize,
    }

    impl Default for Config {
        fn default() -> Self {
            Self {
                threshold_bytes: 32 * 1024,
                page_bytes: 32 * 1024,
                max_sections: 50,
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

        pub(crate) fn settings(&self) -> Settings {
            Settings {
                threshold_bytes: self.threshold_bytes,
                max_sections: self.max_sections,
            }
        }
    }

    /// The documents this session split, for `read_section` (serde: a shared store carries
    /// them between replicas).
    #[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
    pub struct State {
        pub(crate) store: SectionStore,
    }

    /// The tools whose results are never split again: pages and sections already are.
    const OWN_OUTPUT: [&str; 2] = ["read_section", "read_page"];

    /// Replaces content larger than the threshold with its table of contents (or page 1).
    pub async fn transform_content(ctx: &Context, content: Content) -> HookResult<String> {
        let config = ctx.config::<Config>()?;
        if content.text.len() <= config.threshold_bytes {
            return Ok(content.text);
        }
        if let ContentKind::ToolResult { tool } = &content.kind
            && OWN_OUTPUT.contains(&tool.as_str())
        {
            return Ok(content.text);
        }
        let format = super::sections::detect(content.mime_type.as_deref(), &content.text);
        let (text, stored) = super::first_view(content.text, format, config);
        if let Some(document) = stored {
            let limits = config.limits();
            ctx.state(|state: &mut State| state.store.add(document, limits))?;
        }
        Ok(text)
    }

    /// What `read_section` takes.
    #[derive(Debug, Deserialize, JsonSchema)]
    pub struct ReadSection {
        /// A section id from a table of contents, or a page id from a page footer, exactly as
        /// given (such as `3fa9c2d1-2` or `3fa9c2d1-2-p2`).
        pub id: String,
    }

    /// Returns one section of a large document that was replaced by its table of contents (or
    /// the next page of a large text). A section that is itself large comes back as a table of
    /// its own parts; a large section that does not split comes back page by page, each page's
    /// footer naming the id of the next.
    #[tool]
    pub async fn read_section(ctx: &Context, args: ReadSection) -> HookResult<CallToolResult> {
        let config = ctx.config::<Config>()?;
        let found = ctx.state(|state: &mut State| state.store.find(&args.id))?;
        let answer = match found {
            Ok((id, document)) => super::read(&document, &id, config),
            Err(message) => Err(message),
        };
        Ok(match answer {
            Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
            Err(message) => CallToolResult::error(vec![ContentBlock::text(message)]),
        })
    }
}

/// A document kept for `read_section`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Document {
    hash: u32,
    text: Arc<str>,
    format: Format,
}

/// A session's split documents, by content hash.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct SectionStore {
    documents: Store<u32, Document>,
    limits: Option<Limits>,
}

/// A parsed section or page id: the document's hash, the path of part indexes (1-based) and
/// the page, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SectionId {
    hash: u32,
    path: Vec<usize>,
    page: Option<usize>,
}

impl SectionId {
    fn parse(text: &str) -> Option<SectionId> {
        let mut parts = text.trim().split('-');
        let hash = parts.next().filter(|h| h.len() == 8)?;
        let hash = u32::from_str_radix(hash, 16).ok()?;
        let mut path = Vec::new();
        let mut page = None;
        for part in parts {
            if page.is_some() {
                return None;
            }
            match part.strip_prefix('p') {
                Some(n) => page = Some(n.parse().ok().filter(|n| *n >= 1)?),
                None => path.push(part.parse().ok().filter(|n| *n >= 1)?),
            }
        }
        Some(SectionId { hash, path, page })
    }

    fn base(hash: u32, path: &[usize]) -> String {
        let mut id = format!("{hash:08x}");
        for index in path {
            id.push_str(&format!("-{index}"));
        }
        id
    }
}

impl SectionStore {
    fn add(&mut self, document: Document, limits: Limits) {
        let size = document.text.len();
        self.limits = Some(limits);
        self.documents.insert(document.hash, document, size, limits);
    }

    /// The document an id points into (made the newest), or why there is none.
    fn find(&mut self, id: &str) -> Result<(String, Document), String> {
        let Some(parsed) = SectionId::parse(id) else {
            return Err(format!(
                "`{id}` is not a section id: pass an id from a table of contents or a page \
                 footer exactly as it is given (such as \"3fa9c2d1-2\")"
            ));
        };
        let Some(document) = self.documents.get(&parsed.hash).cloned() else {
            let kept = match self.limits {
                Some(limits) => format!(
                    " (a session keeps its last {} documents, {} at most)",
                    limits.documents,
                    paging::size(limits.bytes)
                ),
                None => String::new(),
            };
            return Err(format!(
                "section `{id}` is not stored in this session: its document was dropped to make \
                 room{kept}, or the id comes from another session: read the original content \
                 again for a fresh table of contents"
            ));
        };
        self.documents.touch(&parsed.hash);
        Ok((id.trim().to_owned(), document))
    }
}

/// What the client gets instead of a large text: its table of contents, or page 1 (with the
/// document to keep); or the text itself when it neither splits nor needs paging.
fn first_view(
    text: String,
    format: Format,
    config: &section_split::Config,
) -> (String, Option<Document>) {
    let hash = paging::content_hash(&[&[format.tag()], text.as_bytes()]);
    let source: Arc<str> = text.into();
    let root = Node::root(source.clone(), format);
    let parts = sections::split(&root, config.settings());
    let id = SectionId::base(hash, &[]);
    let view = if parts.len() >= 2 {
        toc(&root, &parts, &id, format)
    } else if source.len() > config.page_bytes {
        page_view(&root, &id, 1, config.page_bytes).unwrap_or_default()
    } else {
        return (source.to_string(), None);
    };
    let document = Document {
        hash,
        text: source,
        format,
    };
    (view, Some(document))
}

/// Answers `read_section` for an id in `document`.
fn read(document: &Document, id: &str, config: &section_split::Config) -> Result<String, String> {
    let parsed = SectionId::parse(id).ok_or_else(|| format!("`{id}` is not a section id"))?;
    let settings = config.settings();
    let mut node = Node::root(document.text.clone(), document.format);
    for (depth, index) in parsed.path.iter().enumerate() {
        let parts = sections::split(&node, settings);
        let here = SectionId::base(parsed.hash, &parsed.path[..depth]);
        if parts.len() < 2 {
            return Err(format!(
                "`{here}` ({}) is not split into parts, so `{id}` does not exist",
                sections::describe(&node)
            ));
        }
        let count = parts.len();
        node = parts.into_iter().nth(index - 1).ok_or_else(|| {
            format!(
                "`{here}` ({}) has {count} parts, so `{id}` does not exist",
                sections::describe(&node)
            )
        })?;
    }
    let base = SectionId::base(parsed.hash, &parsed.path);
    if let Some(page) = parsed.page {
        return page_view(&node, &base, page, config.page_bytes);
    }
    let text = node.text();
    if text.len() > config.threshold_bytes {
        let parts = sections::split(&node, settings);
        if parts.len() >= 2 {
            return Ok(toc(&node, &parts, &base, document.format));
        }
    }
    if text.len() > config.page_bytes {
        return page_view(&node, &base, 1, config.page_bytes);
    }
    Ok(text.to_owned())
}

/// Page `page` of a node, with its footer.
fn page_view(node: &Node, base: &str, page: usize, page_bytes: usize) -> Result<String, String> {
    let text = node.text();
    let ends = paging::page_ends(text, page_bytes);
    let count = ends.len();
    let Some(body) = paging::page(text, &ends, page) else {
        return Err(format!(
            "`{base}` ({}) has {count} pages, so there is no page {page}",
            sections::describe(node)
        ));
    };
    let footer = if page < count {
        format!(
            "[page {page} of {count} ({} in all); for page {} call the tool read_section with \
             {{\"id\": \"{base}-p{}\"}}]",
            paging::size(text.len()),
            page + 1,
            page + 1
        )
    } else {
        format!("[page {page} of {count}, the last]")
    };
    Ok(format!("{body}\n\n{footer}"))
}

/// A title as one line of at most 120 characters.
fn short_title(title: &str) -> String {
    const MAX: usize = 120;
    let line: String = title
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match line.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

/// A table of contents: what was split, then one line per part (id, size, title).
fn toc(node: &Node, parts: &[Node], base: &str, format: Format) -> String {
    let what = if node.title.is_empty() {
        format!(
            "This {} document ({})",
            format.name(),
            paging::size(node.text().len())
        )
    } else {
        format!(
            "Section {base} `{}` ({})",
            node.title,
            paging::size(node.text().len())
        )
    };
    let rows: Vec<(String, String, String)> = parts
        .iter()
        .enumerate()
        .map(|(at, part)| {
            (
                format!("{base}-{}", at + 1),
                paging::size(part.text().len()),
                short_title(&part.title),
            )
        })
        .collect();
    let id_width = rows.iter().map(|r| r.0.len()).max().unwrap_or(2).max(2);
    let size_width = rows.iter().map(|r| r.1.len()).max().unwrap_or(4).max(4);
    let mut out = format!(
        "{what} is too large to return at once, so here is its table of contents ({} parts). \
         Read a part with the tool read_section, passing its id (such as {{\"id\": \"{}\"}}); a \
         large part comes back as a table of its own parts or page by page.\n\n",
        rows.len(),
        rows.first().map_or(base, |r| r.0.as_str())
    );
    out.push_str(&format!(
        "{:<id_width$}  {:>size_width$}  section\n",
        "id", "size"
    ));
    for (id, size, title) in rows {
        out.push_str(&format!("{id:<id_width$}  {size:>size_width$}  {title}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> section_split::Config {
        section_split::Config {
            threshold_bytes: 256,
            page_bytes: 256,
            ..Default::default()
        }
    }

    fn markdown() -> String {
        let mut text = String::from("# Guide\n\nWelcome.\n\n");
        for chapter in 1..=3 {
            text.push_str(&format!("## Chapter {chapter}\n\n"));
            for section in 1..=2 {
                text.push_str(&format!("### Part {chapter}.{section}\n\n"));
                text.push_str(&"Lorem ipsum dolor sit amet. ".repeat(8));
                text.push('\n');
            }
        }
        text
    }

    #[test]
    fn titles_are_one_short_line() {
        assert_eq!(short_title("a\nb"), "a b");
        let long = "é".repeat(300);
        assert_eq!(short_title(&long).chars().count(), 121);
    }

    #[test]
    fn ids_parse_and_reject_garbage() {
        assert_eq!(
            SectionId::parse("3fa9c2d1-2-1-p3"),
            Some(SectionId {
                hash: 0x3fa9_c2d1,
                path: vec![2, 1],
                page: Some(3)
            })
        );
        assert_eq!(SectionId::parse("3fa9c2d1").map(|i| i.path.len()), Some(0));
        for bad in [
            "",
            "xyz",
            "3fa9c2d1-0",
            "3fa9c2d1-p0",
            "3fa9c2d1-p2-1",
            "3fa9c2d-1",
        ] {
            assert_eq!(SectionId::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn large_markdown_becomes_a_toc_whose_ids_read_sections() {
        let config = config();
        let (toc, stored) = first_view(markdown(), Format::Markdown, &config);
        let document = stored.expect("stored");
        assert!(toc.contains("This Markdown document"), "{toc}");
        let base = format!("{:08x}", document.hash);
        for (n, title) in ["# Guide", "## Chapter 1", "## Chapter 2", "## Chapter 3"]
            .iter()
            .enumerate()
        {
            assert!(toc.contains(&format!("{base}-{}", n + 1)), "{toc}");
            assert!(toc.contains(title), "{toc}");
        }
        let chapter = read(&document, &format!("{base}-2"), &config).expect("chapter 2");
        assert!(chapter.contains("Section"), "a sub-table: {chapter}");
        assert!(chapter.contains("### Part 1.2"), "{chapter}");
        // A section's own heading goes with its first part.
        let part = read(&document, &format!("{base}-2-1"), &config).expect("part 1.1");
        assert!(part.starts_with("## Chapter 1\n\n### Part 1.1"), "{part}");
        let part = read(&document, &format!("{base}-2-2"), &config).expect("part 1.2");
        assert!(part.starts_with("### Part 1.2"), "{part}");
        let missing = read(&document, &format!("{base}-9"), &config).unwrap_err();
        assert!(missing.contains("has 4 parts"), "{missing}");

        let (again, _) = first_view(markdown(), Format::Markdown, &config);
        assert_eq!(again, toc, "the same content gets the same ids");
    }

    #[test]
    fn text_that_does_not_split_is_paged() {
        let config = config();
        let text: String = (0..100).map(|n| format!("line {n}\n")).collect();
        let (first, stored) = first_view(text.clone(), Format::Plain, &config);
        let document = stored.expect("stored");
        assert!(first.contains("read_section"), "{first}");
        let mut joined = first[..first.rfind("\n\n[page ").expect("footer")].to_owned();
        let mut page = 2;
        loop {
            let id = format!("{:08x}-p{page}", document.hash);
            let next = read(&document, &id, &config).expect("page");
            joined.push_str(&next[..next.rfind("\n\n[page ").expect("footer")]);
            if next.ends_with("the last]") {
                break;
            }
            page += 1;
        }
        assert_eq!(joined, text);
    }

    #[test]
    fn the_store_forgets_the_oldest_and_says_so() {
        let mut store = SectionStore::default();
        let limits = Limits {
            documents: 1,
            bytes: 1 << 20,
        };
        let config = config();
        let (_, first) = first_view(markdown(), Format::Markdown, &config);
        let first = first.expect("stored");
        let id = format!("{:08x}-1", first.hash);
        store.add(first, limits);
        assert!(store.find(&id).is_ok());
        let (_, second) = first_view(markdown().repeat(2), Format::Markdown, &config);
        store.add(second.expect("stored"), limits);
        let gone = store.find(&id).unwrap_err();
        assert!(gone.contains("not stored in this session"), "{gone}");
        let garbled = store.find("what").unwrap_err();
        assert!(garbled.contains("not a section id"), "{garbled}");
    }
}
