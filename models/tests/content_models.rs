//! The content models (paginate, section-split) through the real proxy, in front of
//! the content upstream (`tests/fixtures/content_upstream.py`, a child process over stdio), and
//! the `transform_content` pipeline of composed content models.
//!
//! Originals are fetched through `passthrough` from the same deterministic upstream, so every
//! "gives the original back" check compares with what the server really sent.

#![allow(missing_docs, unreachable_pub)]

#[path = "../../mcp-middleware/tests/support/mod.rs"]
mod support;

use std::path::PathBuf;

use mcp_middleware::Proxy;
use mcp_middleware::prelude::*;
use mcp_middleware::upstream::StdioServer;
use mcp_middleware_models::{paginate, passthrough, section_split};
use serde_json::{Value, json};
use support::Client;

fn content_upstream() -> StdioServer {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/content_upstream.py");
    StdioServer::new("python3").arg(script)
}

fn proxy<M: ProxyModel>() -> Proxy {
    Proxy::new(content_upstream()).model::<M>()
}

/// The one text of a tool result.
fn text(answer: &Value) -> String {
    let texts = Client::texts(answer);
    assert_eq!(texts.len(), 1, "one text part: {answer}");
    texts[0].clone()
}

/// A page without its footer, and the cursor (or id) its footer names, if any.
fn split_page(page: &str) -> (&str, Option<String>) {
    let at = page
        .rfind("\n\n[page ")
        .unwrap_or_else(|| panic!("a page footer: {page}"));
    let footer = &page[at..];
    let next = ["{\"cursor\": \"", "{\"id\": \""].iter().find_map(|key| {
        let start = footer.find(key)? + key.len();
        let end = footer[start..].find('"')?;
        Some(footer[start..start + end].to_owned())
    });
    (&page[..at], next)
}

/// Reads every page after `first` with `tool` (`read_page` with `cursor`, or `read_section`
/// with `id`) and returns the pages joined without their footers, and how many there were.
async fn read_all(client: &mut Client, first: &str, tool: &str) -> (String, usize) {
    let key = if tool == "read_page" { "cursor" } else { "id" };
    let (body, mut next) = split_page(first);
    let mut joined = body.to_owned();
    let mut pages = 1;
    while let Some(cursor) = next {
        let answer = client.call_tool(tool, json!({ key: cursor })).await;
        assert_ne!(answer["result"]["isError"], true, "{}", short(&answer));
        let page = text(&answer);
        let (body, after) = split_page(&page);
        joined.push_str(body);
        next = after;
        pages += 1;
        if next.is_none() {
            assert!(page.ends_with("the last]"), "the last page says so: {page}");
        }
    }
    (joined, pages)
}

/// The start of a text, for failure messages.
fn head(text: &str) -> &str {
    match text.char_indices().nth(800) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

/// A message, cut short for failure messages.
fn short(message: &Value) -> String {
    let text = message.to_string();
    match text.char_indices().nth(600) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

async fn original(tool: &str, arguments: Value) -> String {
    let mut direct = Client::initialized(proxy::<passthrough::Model>()).await;
    let answer = direct.call_tool(tool, arguments).await;
    direct.close().await.unwrap();
    text(&answer)
}

#[tokio::test]
async fn paginate_cuts_a_large_result_and_read_page_gives_back_the_rest_exactly() {
    let expected = original("plain_text", json!({"bytes": 200_000, "long_lines": true})).await;
    let mut client = Client::initialized(
        proxy::<paginate::Model>().config("paginate", json!({"pageBytes": 16384})),
    )
    .await;
    let listed = client.request("tools/list", json!({})).await;
    let read_page = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "read_page")
        .expect("read_page is listed");
    assert!(
        read_page["inputSchema"]["properties"]["cursor"].is_object(),
        "{read_page}"
    );

    let answer = client
        .call_tool("plain_text", json!({"bytes": 200_000, "long_lines": true}))
        .await;
    let first = text(&answer);
    let (body, cursor) = split_page(&first);
    assert!(body.len() <= 16384, "page 1 is {} bytes", body.len());
    assert!(cursor.is_some(), "{}", &first[body.len()..]);
    assert!(first.contains("read_page"), "the footer names the tool");
    let (joined, pages) = read_all(&mut client, &first, "read_page").await;
    assert!(pages >= 13, "{pages} pages");
    assert_eq!(joined, expected);

    // Text of a page or less passes unchanged.
    let small = client.call_tool("small", json!({})).await;
    assert_eq!(text(&small), "a small result");
    client.close().await.unwrap();
}

#[tokio::test]
async fn paginate_round_trips_tricky_text_through_the_proxy() {
    let mut client = Client::initialized(
        proxy::<paginate::Model>().config("paginate", json!({"pageBytes": 256})),
    )
    .await;
    let samples = [
        "€".repeat(1000),
        format!("{}\n{}\n", "🐢".repeat(300), "x".repeat(700)),
        "line\r\n".repeat(200),
        "\n".repeat(1000),
        (0..400)
            .map(|n| format!("{n} żółw 日本語\n"))
            .collect::<String>(),
    ];
    for sample in samples {
        let answer = client.call_tool("echo_text", json!({"text": sample})).await;
        let (joined, _) = read_all(&mut client, &text(&answer), "read_page").await;
        assert_eq!(joined, sample);
    }
    client.close().await.unwrap();
}

#[tokio::test]
async fn paginate_leaves_non_text_content_alone_and_pages_resources() {
    let mut direct = Client::initialized(proxy::<passthrough::Model>()).await;
    let plain = direct.call_tool("mixed", json!({})).await;
    let notes = direct
        .request("resources/read", json!({"uri": "doc://notes.txt"}))
        .await;
    direct.close().await.unwrap();

    let mut client = Client::initialized(proxy::<paginate::Model>()).await;
    let paged = client.call_tool("mixed", json!({})).await;
    let before = plain["result"]["content"].as_array().unwrap();
    let after = paged["result"]["content"].as_array().unwrap();
    assert_eq!(before.len(), after.len());
    for (b, a) in before.iter().zip(after) {
        match b["type"].as_str() {
            Some("image" | "audio" | "resource_link") => assert_eq!(a, b),
            Some("resource") if b["resource"]["blob"].is_string() => assert_eq!(a, b),
            Some("resource") => {
                // Embedded text is content too: paged, its MIME type kept.
                assert_eq!(a["resource"]["mimeType"], b["resource"]["mimeType"]);
                let page = a["resource"]["text"].as_str().unwrap();
                assert!(page.contains("read_page"), "{page}");
            }
            _ => {
                let page = a["text"].as_str().unwrap();
                assert!(page.len() < 40_000 && page.contains("read_page"));
            }
        }
    }

    let read = client
        .request("resources/read", json!({"uri": "doc://notes.txt"}))
        .await;
    let contents = &read["result"]["contents"][0];
    assert_eq!(contents["mimeType"], "text/plain");
    let (joined, _) = read_all(&mut client, contents["text"].as_str().unwrap(), "read_page").await;
    assert_eq!(
        joined,
        notes["result"]["contents"][0]["text"].as_str().unwrap()
    );

    let blob = client
        .request("resources/read", json!({"uri": "doc://logo.png"}))
        .await;
    assert!(blob["result"]["contents"][0]["blob"].is_string(), "{blob}");

    let prompt = client
        .request("prompts/get", json!({"name": "long_prompt"}))
        .await;
    let messages = prompt["result"]["messages"].as_array().unwrap();
    assert!(
        messages[0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("read_page")
    );
    assert_eq!(messages[1]["content"]["text"], "Understood.");
    client.close().await.unwrap();
}

#[tokio::test]
async fn paginate_refuses_evicted_foreign_and_garbled_cursors_clearly() {
    let config = json!({"pageBytes": 4096, "maxDocuments": 1});
    let mut first =
        Client::initialized(proxy::<paginate::Model>().config("paginate", config.clone())).await;
    let mut second =
        Client::initialized(proxy::<paginate::Model>().config("paginate", config)).await;

    let a = text(
        &first
            .call_tool("plain_text", json!({"bytes": 20_000}))
            .await,
    );
    let cursor_a = split_page(&a).1.expect("cursor");
    let b = text(
        &first
            .call_tool("plain_text", json!({"bytes": 30_000}))
            .await,
    );
    let cursor_b = split_page(&b).1.expect("cursor");

    let expired = first
        .call_tool("read_page", json!({"cursor": cursor_a}))
        .await;
    assert_eq!(expired["result"]["isError"], true, "{expired}");
    assert!(text(&expired).contains("expired"), "{expired}");
    let still = first
        .call_tool("read_page", json!({"cursor": cursor_b}))
        .await;
    assert_eq!(still["result"]["isError"], false, "{}", short(&still));

    let foreign = second
        .call_tool("read_page", json!({"cursor": cursor_b}))
        .await;
    assert_eq!(foreign["result"]["isError"], true, "{foreign}");
    assert!(text(&foreign).contains("another session"), "{foreign}");

    let garbled = first
        .call_tool("read_page", json!({"cursor": "page two please"}))
        .await;
    assert!(
        text(&garbled).contains("not a read_page cursor"),
        "{garbled}"
    );
    let missing = first.call_tool("read_page", json!({})).await;
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
    first.close().await.unwrap();
    second.close().await.unwrap();
}

#[tokio::test]
async fn paginate_config_is_checked_at_start() {
    let refused =
        Client::connect(proxy::<paginate::Model>().config("paginate", json!({"pageBytes": 10})))
            .close()
            .await
            .unwrap_err();
    let message = refused.to_string();
    assert!(
        message.contains("paginate") && message.contains("pageBytes"),
        "{message}"
    );
    assert!(message.contains("at least 256"), "{message}");
    let unknown =
        Client::connect(proxy::<paginate::Model>().config("paginate", json!({"pageSize": 1000})))
            .close()
            .await
            .unwrap_err();
    assert!(unknown.to_string().contains("pageSize"), "{unknown}");
}

/// The rows of a table of contents: (id, title).
fn toc_rows(toc: &str) -> Vec<(String, String)> {
    toc.lines()
        .skip_while(|line| !line.starts_with("id "))
        .skip(1)
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let id = words.next()?.to_owned();
            // size: a number and a unit
            words.next()?;
            words.next()?;
            Some((id, words.collect::<Vec<_>>().join(" ")))
        })
        .collect()
}

fn id_of(rows: &[(String, String)], title: &str) -> String {
    rows.iter()
        .find(|(_, t)| t == title)
        .unwrap_or_else(|| panic!("no `{title}` in {rows:?}"))
        .0
        .clone()
}

fn split_proxy() -> Proxy {
    proxy::<section_split::Model>().config(
        "section-split",
        json!({"thresholdBytes": 8192, "pageBytes": 8192}),
    )
}

#[tokio::test]
async fn section_split_turns_markdown_into_a_table_of_contents_with_stable_ids() {
    let expected = original("markdown_doc", json!({})).await;
    let mut client = Client::initialized(split_proxy()).await;
    let toc = text(&client.call_tool("markdown_doc", json!({})).await);
    assert!(toc.starts_with("This Markdown document"), "{}", head(&toc));
    assert!(toc.contains("read_section"), "{}", head(&toc));
    let rows = toc_rows(&toc);
    assert_eq!(rows.len(), 31, "the title and 30 chapters: {toc}");
    assert_eq!(rows[0].1, "# The Guide");
    assert_eq!(rows[1].1, "## Chapter 1: gamma kitten");

    // Every chapter, read back, is a slice of the original, in order.
    let mut joined = String::new();
    for (id, _) in &rows {
        let section = text(&client.call_tool("read_section", json!({"id": id})).await);
        joined.push_str(&section);
    }
    assert_eq!(joined, expected);

    // The same content gets the same ids, in another session too.
    let again = text(&client.call_tool("markdown_doc", json!({})).await);
    assert_eq!(again, toc);
    let mut other = Client::initialized(split_proxy()).await;
    assert_eq!(text(&other.call_tool("markdown_doc", json!({})).await), toc);
    other.close().await.unwrap();

    let bad = client
        .call_tool("read_section", json!({"id": "nope"}))
        .await;
    assert_eq!(bad["result"]["isError"], true);
    assert!(text(&bad).contains("not a section id"), "{bad}");
    let past = format!("{}-99", rows[0].0.split('-').next().unwrap());
    let past = client.call_tool("read_section", json!({"id": past})).await;
    assert!(text(&past).contains("has 31 parts"), "{past}");
    client.close().await.unwrap();
}

#[tokio::test]
async fn section_split_splits_json_by_members_and_array_chunks() {
    let expected: Value = serde_json::from_str(&original("json_doc", json!({})).await).unwrap();
    let mut client = Client::initialized(split_proxy()).await;
    let toc = text(&client.call_tool("json_doc", json!({})).await);
    assert!(toc.starts_with("This JSON document"), "{}", head(&toc));
    let rows = toc_rows(&toc);
    let titles: Vec<&str> = rows.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(titles, ["$.meta", "$.items", "$.settings"]);

    let meta = text(
        &client
            .call_tool("read_section", json!({"id": id_of(&rows, "$.meta")}))
            .await,
    );
    assert_eq!(
        serde_json::from_str::<Value>(&meta).unwrap(),
        expected["meta"]
    );

    // `$.items` is large: a table of chunks, each a JSON array of the elements.
    let items = text(
        &client
            .call_tool("read_section", json!({"id": id_of(&rows, "$.items")}))
            .await,
    );
    assert!(items.starts_with("Section "), "{}", head(&items));
    let chunks = toc_rows(&items);
    assert!(
        chunks.len() > 2 && chunks[0].1.starts_with("$.items[0.."),
        "{}",
        head(&items)
    );
    let mut all = Vec::new();
    for (id, _) in &chunks {
        let chunk = text(&client.call_tool("read_section", json!({"id": id})).await);
        let chunk: Vec<Value> = serde_json::from_str(&chunk).expect("a chunk is a JSON array");
        all.extend(chunk);
    }
    assert_eq!(Value::Array(all), expected["items"]);
    client.close().await.unwrap();
}

#[tokio::test]
async fn section_split_detects_yaml_from_the_mime_type_and_pages_plain_text() {
    let mut client = Client::initialized(split_proxy()).await;
    let read = client
        .request("resources/read", json!({"uri": "doc://config.yaml"}))
        .await;
    let toc = read["result"]["contents"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(toc.starts_with("This YAML document"), "{}", head(&toc));
    let rows = toc_rows(&toc);
    let titles: Vec<&str> = rows.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(titles, ["version", "services", "volumes"]);
    let services = text(
        &client
            .call_tool("read_section", json!({"id": id_of(&rows, "services")}))
            .await,
    );
    let parts = toc_rows(&services);
    assert!(
        parts[0].1.starts_with("services.service_0"),
        "{}",
        head(&services)
    );
    let one = text(
        &client
            .call_tool("read_section", json!({"id": parts[0].0}))
            .await,
    );
    assert!(
        one.contains("service_0:") && one.contains("image:"),
        "{}",
        head(&one)
    );

    // Sniffed: the same YAML as a tool result without a MIME type.
    let sniffed = text(&client.call_tool("yaml_doc", json!({})).await);
    assert!(
        sniffed.starts_with("This YAML document"),
        "{}",
        head(&sniffed)
    );

    // Plain text does not split: it is paged, and read_section reads the pages.
    let expected = original("plain_text", json!({"bytes": 40_000})).await;
    let first = text(
        &client
            .call_tool("plain_text", json!({"bytes": 40_000}))
            .await,
    );
    assert!(first.contains("read_section"), "{}", head(&first));
    let (joined, pages) = read_all(&mut client, &first, "read_section").await;
    assert!(pages >= 5);
    assert_eq!(joined, expected);
    client.close().await.unwrap();
}

/// Appends `[a]` to every text.
#[proxy_model]
pub mod tag_a {
    use mcp_middleware::prelude::*;

    pub async fn transform_content(_ctx: &Context, content: Content) -> HookResult<String> {
        Ok(format!("{}[a]", content.text))
    }
}

/// Appends `[b]` to every text.
#[proxy_model]
pub mod tag_b {
    use mcp_middleware::prelude::*;

    pub async fn transform_content(_ctx: &Context, content: Content) -> HookResult<String> {
        Ok(format!("{}[b]", content.text))
    }
}

/// Two content models chained: `tag_b` is inner, so its transform runs first.
#[proxy_model(extends = [tag_a, tag_b], chain = [transform_content])]
pub mod tagged {}

/// Split first (section-split is inner), then page whatever is still too large.
#[proxy_model(extends = [paginate, section_split], chain = [transform_content])]
pub mod split_then_page {}

#[tokio::test]
async fn chained_content_transforms_run_innermost_first() {
    let mut client = Client::initialized(proxy::<tagged::Model>()).await;
    assert_eq!(
        text(&client.call_tool("small", json!({})).await),
        "a small result[b][a]"
    );
    let prompt = client
        .request("prompts/get", json!({"name": "short_prompt"}))
        .await;
    assert_eq!(
        prompt["result"]["messages"][0]["content"]["text"],
        "hi[b][a]"
    );
    client.close().await.unwrap();
}

#[tokio::test]
async fn section_split_inside_paginate_splits_first_and_pages_what_is_left() {
    let expected = original("plain_text", json!({"bytes": 100_000})).await;
    let proxy = proxy::<split_then_page::Model>()
        .config("paginate", json!({"pageBytes": 4096}))
        .config(
            "section-split",
            json!({"thresholdBytes": 8192, "pageBytes": 32768}),
        );
    let mut client = Client::initialized(proxy).await;
    let listed = client.request("tools/list", json!({})).await;
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"read_page") && names.contains(&"read_section"),
        "{names:?}"
    );

    // Markdown: section-split's table of contents (small, so paginate leaves it).
    let toc = text(&client.call_tool("markdown_doc", json!({})).await);
    assert!(toc.starts_with("This Markdown document"), "{}", head(&toc));
    assert!(!toc.contains("read_page"), "{}", head(&toc));

    // Plain text: section-split pages it by 32 KiB, then paginate cuts each of those pages by
    // 4 KiB; reading both levels gives the original back.
    let first = text(
        &client
            .call_tool("plain_text", json!({"bytes": 100_000}))
            .await,
    );
    assert!(first.contains("read_page"), "{}", head(&first));
    let mut joined = String::new();
    let mut outer = first;
    loop {
        // A section page small enough for paginate comes as it is.
        let section_page = if outer.contains("read_page") {
            read_all(&mut client, &outer, "read_page").await.0
        } else {
            outer
        };
        let (body, next) = split_page(&section_page);
        joined.push_str(body);
        let Some(id) = next else { break };
        outer = text(&client.call_tool("read_section", json!({"id": id})).await);
    }
    assert_eq!(joined, expected);
    client.close().await.unwrap();
}
