//! The content models end to end: the real `mcpctl proxy --model paginate|section-split|default`
//! binary in front of the content upstream (`tests/fixtures/content_upstream.py`), driven by a
//! client over pipes.

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use serde_json::{Value, json};
use support::Client;

fn content_upstream() -> Vec<String> {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/content_upstream.py");
    vec![
        "python3".to_owned(),
        "-u".to_owned(),
        script.display().to_string(),
    ]
}

fn start(args: &[&str]) -> Client {
    let mut client = Client::start(args, &content_upstream(), &[]);
    client.initialize();
    client
}

/// The one text of a tool result.
fn text(answer: &Value) -> String {
    let parts = answer["result"]["content"]
        .as_array()
        .unwrap_or_else(|| panic!("a tool result: {}", head(&answer.to_string())));
    assert_eq!(parts.len(), 1, "one part: {}", head(&answer.to_string()));
    parts[0]["text"].as_str().expect("a text part").to_owned()
}

fn head(text: &str) -> &str {
    match text.char_indices().nth(800) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

fn call(client: &mut Client, id: i64, tool: &str, arguments: Value) -> Value {
    client.request(
        json!(id),
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    )
}

fn tool_names(client: &mut Client, id: i64) -> Vec<String> {
    let listed = client.request(json!(id), "tools/list", json!({}));
    listed["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

/// A page without its footer, and the cursor or id its footer names for the next page.
fn split_page(page: &str) -> (&str, Option<String>) {
    let at = page
        .rfind("\n\n[page ")
        .unwrap_or_else(|| panic!("a page footer: {}", head(page)));
    let footer = &page[at..];
    let next = ["{\"cursor\": \"", "{\"id\": \""].iter().find_map(|key| {
        let start = footer.find(key)? + key.len();
        let end = footer[start..].find('"')?;
        Some(footer[start..start + end].to_owned())
    });
    (&page[..at], next)
}

/// Reads the pages after `first` with `tool` and returns all pages joined without footers, and
/// how many there were.
fn read_all(client: &mut Client, first: &str, tool: &str, mut id: i64) -> (String, usize) {
    let key = if tool == "read_page" { "cursor" } else { "id" };
    let (body, mut next) = split_page(first);
    let mut joined = body.to_owned();
    let mut pages = 1;
    while let Some(cursor) = next {
        id += 1;
        let answer = call(client, id, tool, json!({ key: cursor }));
        assert_ne!(
            answer["result"]["isError"],
            true,
            "{}",
            head(&answer.to_string())
        );
        let page = text(&answer);
        let (body, after) = split_page(&page);
        joined.push_str(body);
        next = after;
        pages += 1;
    }
    (joined, pages)
}

/// What the upstream returns, through `passthrough`.
fn original(tool: &str, arguments: Value) -> String {
    let mut client = start(&["--model", "passthrough"]);
    let answer = call(&mut client, 1, tool, arguments);
    client.close();
    text(&answer)
}

#[test]
fn paginate_pages_a_large_result_and_read_page_returns_the_rest() {
    let expected = original("plain_text", json!({"bytes": 300_000, "long_lines": true}));
    let mut client = start(&["--model", "paginate", "--set", "paginate.pageBytes=8192"]);
    let names = tool_names(&mut client, 1);
    assert!(names.contains(&"read_page".to_owned()), "{names:?}");
    let first = text(&call(
        &mut client,
        2,
        "plain_text",
        json!({"bytes": 300_000, "long_lines": true}),
    ));
    let (body, cursor) = split_page(&first);
    assert!(body.len() <= 8192 && cursor.is_some());
    let (joined, pages) = read_all(&mut client, &first, "read_page", 100);
    assert!(pages >= 37, "{pages}");
    assert_eq!(joined, expected);

    // A resource with its MIME type, and a blob that passes untouched.
    let notes = client.request(
        json!(3),
        "resources/read",
        json!({"uri": "doc://notes.txt"}),
    );
    let page = notes["result"]["contents"][0]["text"]
        .as_str()
        .expect("text");
    assert!(page.contains("read_page"), "{}", head(page));
    let logo = client.request(json!(4), "resources/read", json!({"uri": "doc://logo.png"}));
    assert!(logo["result"]["contents"][0]["blob"].is_string());
    let bad = call(&mut client, 5, "read_page", json!({"cursor": "garbage"}));
    assert_eq!(bad["result"]["isError"], true);
    let (status, stderr) = client.close_with_stderr();
    assert!(status.success(), "{stderr}");
}

#[test]
fn paging_five_megabytes_stays_quick() {
    let mut client = start(&["--model", "paginate"]);
    let started = Instant::now();
    let first = text(&call(
        &mut client,
        1,
        "plain_text",
        json!({"bytes": 5_000_000}),
    ));
    let first_page = started.elapsed();
    let started = Instant::now();
    let (joined, pages) = read_all(&mut client, &first, "read_page", 100);
    let rest = started.elapsed();
    eprintln!(
        "5 MB: page 1 of {pages} in {first_page:?} (upstream included), the other pages in {rest:?}"
    );
    assert!(joined.len() >= 5_000_000);
    assert!(pages >= 150, "32 KiB pages: {pages}");
    client.close();
}

#[test]
fn section_split_replaces_large_documents_with_a_table_of_contents() {
    let mut client = start(&[
        "--model",
        "section-split",
        "--set",
        "section-split.thresholdBytes=16384",
    ]);
    let toc = text(&call(&mut client, 1, "markdown_doc", json!({})));
    assert!(toc.starts_with("This Markdown document"), "{}", head(&toc));
    assert!(toc.contains("## Chapter 7"), "{}", head(&toc));
    let id = toc
        .lines()
        .find(|line| line.contains("## Chapter 7"))
        .and_then(|line| line.split_whitespace().next())
        .expect("a row for chapter 7")
        .to_owned();
    let chapter = text(&call(&mut client, 2, "read_section", json!({"id": id})));
    assert!(chapter.starts_with("## Chapter 7"), "{}", head(&chapter));
    assert!(chapter.contains("### Part 7.2"), "{}", head(&chapter));

    let json_doc = client.request(
        json!(3),
        "resources/read",
        json!({"uri": "doc://data.json"}),
    );
    let json_toc = json_doc["result"]["contents"][0]["text"]
        .as_str()
        .expect("text");
    assert!(
        json_toc.starts_with("This JSON document"),
        "{}",
        head(json_toc)
    );
    assert!(json_toc.contains("$.items"), "{}", head(json_toc));

    let prompt = client.request(json!(4), "prompts/get", json!({"name": "long_prompt"}));
    let message = prompt["result"]["messages"][0]["content"]["text"]
        .as_str()
        .expect("text");
    assert!(
        message.starts_with("This Markdown document"),
        "{}",
        head(message)
    );
    client.close();
}

#[test]
fn default_gates_a_session_then_ungates_it_then_pages_a_large_result() {
    let expected = original("plain_text", json!({"bytes": 60_000}));
    let mut client = start(&["--model", "default", "--set", "paginate.pageBytes=16384"]);

    // Gated: only begin_session is listed, and an upstream tool is refused.
    assert_eq!(tool_names(&mut client, 1), ["begin_session"]);
    let refused = call(&mut client, 2, "plain_text", json!({"bytes": 60_000}));
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert!(text(&refused).contains("begin_session"), "{refused}");
    let read_page = call(&mut client, 3, "read_page", json!({"cursor": "x"}));
    assert_eq!(
        read_page["result"]["isError"], true,
        "read_page is gated too"
    );

    // begin_session opens it and tells the client its tools changed.
    let opened = call(
        &mut client,
        4,
        "begin_session",
        json!({"intent": "read the long notes"}),
    );
    assert_ne!(opened["result"]["isError"], true, "{opened}");
    assert!(
        client
            .inbox
            .iter()
            .any(|m| m["method"] == "notifications/tools/list_changed"),
        "{:?}",
        client.inbox
    );
    let names = tool_names(&mut client, 5);
    for expected in ["plain_text", "markdown_doc", "read_page"] {
        assert!(names.contains(&expected.to_owned()), "{names:?}");
    }
    assert!(!names.contains(&"begin_session".to_owned()), "{names:?}");

    // Open: a large result comes back paged, and the next pages read back the rest.
    let first = text(&call(
        &mut client,
        6,
        "plain_text",
        json!({"bytes": 60_000}),
    ));
    let (body, cursor) = split_page(&first);
    assert!(body.len() <= 16384, "{}", body.len());
    let cursor = cursor.expect("a cursor for page 2");
    let second = text(&call(
        &mut client,
        7,
        "read_page",
        json!({"cursor": cursor}),
    ));
    assert!(second.contains("[page 2 of 4"), "{}", head(&second));
    let (joined, pages) = read_all(&mut client, &first, "read_page", 100);
    assert_eq!(pages, 4);
    assert_eq!(joined, expected);
    let (status, stderr) = client.close_with_stderr();
    assert!(status.success(), "{stderr}");
}

#[test]
fn describe_shows_the_default_chain() {
    let out = Command::new(env!("CARGO_BIN_EXE_mcpctl"))
        .args(["describe", "proxymodel", "default", "-o", "json"])
        .output()
        .expect("mcpctl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let described: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(described["chain"], json!(["default", "gate", "paginate"]));
}
