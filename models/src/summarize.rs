//! `summarize`: large text results of tool calls come back as a summary from
//! `ctx.llm()`, with the original readable through `read_page`.

use std::time::Duration;

use mcp_middleware::Context;
use mcp_middleware::llm::{LlmRequest, LlmResponse};
use mcp_middleware::proxy_model;
use sha2::{Digest, Sha256};

use crate::{paginate, paging};

/// Summarizes large text results of tool calls with an LLM (the client's sampling, or the
/// project's endpoint), and keeps the full text readable page by page with `read_page`.
///
/// A text part of a `tools/call` result larger than `thresholdBytes` is sent to the LLM with
/// `prompt` ([`Context::llm`]: the client's sampling when it declared the capability, else the
/// project's OpenAI-compatible endpoint, `spec.llm`). The client gets the summary followed by a
/// footer such as `[summary of 120.4 KiB of text; the full text is 4 pages: call the tool
/// read_page with {"cursor": "3fa9c2d1-2846519-1"} for page 1]`. Resource reads, prompt messages and
/// text up to the threshold pass unchanged. A summary is kept in the project's cache
/// (`ctx.cache()`) for `cacheSeconds`, so the same text with the same prompt is summarized once.
///
/// **When the LLM fails** (no client sampling and no endpoint, a refusal, an error, the
/// timeout), the result is never lost: the client gets the original text, paged by `paginate`
/// as it would be without summaries, and the proxy logs a warning naming the tool and why.
///
/// The chain is `summarize -> paginate -> summarize-text -> server`: `summarize-text` (the
/// transform) runs innermost, so it sees the server's full text, and `paginate` pages only what
/// was not summarized. Configure paging under `paginate` (`paginate.pageBytes`) and summaries
/// here. To add summaries to another composition, extend `summarize` (as in `extends = [gate,
/// summarize]`).
#[proxy_model(extends = [paginate, summarize_text], chain = [transform_content])]
pub mod summarize {
    use mcp_middleware::prelude::*;

    /// When to summarize, and how.
    #[derive(Debug, Clone, Deserialize, JsonSchema)]
    #[serde(default, rename_all = "camelCase", deny_unknown_fields)]
    pub struct Config {
        /// Text larger than this, in bytes, is summarized. At least 256; default 8192 (8 KiB).
        #[serde(deserialize_with = "crate::paging::at_least::<256, _>")]
        #[schemars(range(min = 256))]
        pub threshold_bytes: usize,
        /// What the LLM is asked; the text follows it. Default: a request for a concise summary
        /// that keeps names, numbers and identifiers.
        pub prompt: String,
        /// The most tokens a summary may have. At least 16; default 512.
        #[serde(deserialize_with = "crate::paging::at_least::<16, _>")]
        #[schemars(range(min = 16))]
        pub max_tokens: usize,
        /// The most bytes of the text the LLM is sent (a longer text is cut and the LLM told
        /// so). At least 1024; default 262144 (256 KiB).
        #[serde(deserialize_with = "crate::paging::at_least::<1024, _>")]
        #[schemars(range(min = 1024))]
        pub max_input_bytes: usize,
        /// Seconds the LLM may take before the original comes back instead. At least 1;
        /// default 60.
        #[serde(deserialize_with = "crate::paging::at_least::<1, _>")]
        #[schemars(range(min = 1))]
        pub timeout_seconds: usize,
        /// Seconds a summary is kept in the project's cache (0: not cached). Default 600.
        pub cache_seconds: u64,
    }

    impl Default for Config {
        fn default() -> Self {
            Self {
                threshold_bytes: 8 * 1024,
                prompt: super::DEFAULT_PROMPT.to_owned(),
                max_tokens: 512,
                max_input_bytes: 256 * 1024,
                timeout_seconds: 60,
                cache_seconds: 600,
            }
        }
    }
}

/// The transform of [`summarize`]: use `summarize`, which puts `paginate` around it.
///
/// Large text of tool results is replaced by a summary from `ctx.llm()` (settings from
/// `summarize`'s config, or its defaults). The original is kept in `paginate`'s store for
/// `read_page` when `paginate` is in the chain; without it the footer says the original is not
/// kept. When the LLM fails, the original text passes on unchanged and a warning is logged.
#[proxy_model(name = "summarize-text")]
pub mod summarize_text {
    use mcp_middleware::prelude::*;

    /// Summarizes text of tool results larger than `summarize.thresholdBytes`.
    pub async fn transform_content(ctx: &Context, content: Content) -> HookResult<String> {
        super::transform(ctx, content).await
    }
}

/// What the LLM is asked when the config does not say.
pub(crate) const DEFAULT_PROMPT: &str = "Summarize the following tool result for the AI \
    assistant that called the tool. Keep every fact it needs to continue its task: names, \
    numbers, identifiers, paths, errors, and what the result as a whole is about. Be concise, \
    use plain text, and add nothing that is not in the result.";

/// The system prompt of every summary request.
const SYSTEM_PROMPT: &str = "You summarize tool results. Answer with the summary only.";

async fn transform(
    ctx: &Context,
    content: mcp_middleware::model::Content,
) -> mcp_middleware::HookResult<String> {
    use mcp_middleware::model::ContentKind;
    let config = ctx
        .config::<summarize::Config>()
        .cloned()
        .unwrap_or_default();
    let ContentKind::ToolResult { tool } = &content.kind else {
        return Ok(content.text);
    };
    if content.text.len() <= config.threshold_bytes {
        return Ok(content.text);
    }
    let summary = match summary(ctx, &config, &content.text).await {
        Ok(summary) => summary,
        Err(reason) => {
            tracing::warn!(
                tool = tool.as_str(),
                bytes = content.text.len(),
                "summarize: returning the original result, the LLM failed: {reason}"
            );
            return Ok(content.text);
        }
    };
    let size = paging::size(content.text.len());
    let kept = match ctx.config::<paginate::Config>() {
        Ok(paging) => {
            let (page_bytes, limits) = (paging.page_bytes, paging.limits());
            let text = content.text;
            ctx.state(|state: &mut paginate::State| state.store.keep(text, page_bytes, limits))
                .ok()
        }
        Err(_) => None,
    };
    Ok(with_footer(&summary, &size, kept))
}

/// The summary with the footer that says how to read the original.
fn with_footer(summary: &str, size: &str, kept: Option<(String, usize)>) -> String {
    let footer = match kept {
        Some((cursor, 1)) => format!(
            "[summary of {size} of text; for the full text call the tool read_page with \
             {{\"cursor\": \"{cursor}\"}}]"
        ),
        Some((cursor, pages)) => format!(
            "[summary of {size} of text; the full text is {pages} pages: call the tool read_page \
             with {{\"cursor\": \"{cursor}\"}} for page 1]"
        ),
        None => format!(
            "[summary of {size} of text; the original is not kept (no paginate in this chain)]"
        ),
    };
    format!(
        "{}{}{footer}",
        summary.trim_end(),
        crate::paginate_file::FOOTER_SEPARATOR
    )
}

/// A summary of `text`: from the project's cache, else from the LLM (and then cached).
async fn summary(
    ctx: &Context,
    config: &summarize::Config,
    text: &str,
) -> Result<String, mcp_middleware::llm::LlmError> {
    let key = cache_key(config, text);
    let cache = ctx.cache();
    if config.cache_seconds > 0
        && let Some(summary) = cache.get_json::<String>(&key).await
    {
        return Ok(summary);
    }
    let LlmResponse { text: summary, .. } = ctx.llm().complete(request(config, text)).await?;
    if config.cache_seconds > 0 {
        cache
            .put_json(&key, &summary, Duration::from_secs(config.cache_seconds))
            .await;
    }
    Ok(summary)
}

/// The completion request for `text`, cut to `maxInputBytes` at a character boundary.
fn request(config: &summarize::Config, text: &str) -> LlmRequest {
    let mut end = config.max_input_bytes.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = if end < text.len() {
        format!(
            "\n\n(The result is cut: these are its first {} of {}.)",
            paging::size(end),
            paging::size(text.len())
        )
    } else {
        String::new()
    };
    let prompt = format!(
        "{}\n\n<tool_result>\n{}\n</tool_result>{cut}",
        config.prompt,
        &text[..end]
    );
    LlmRequest::new(prompt)
        .system(SYSTEM_PROMPT)
        .max_tokens(u32::try_from(config.max_tokens).unwrap_or(u32::MAX))
        .timeout(Duration::from_secs(config.timeout_seconds as u64))
}

/// Where a summary is cached: the hash of everything that makes it.
fn cache_key(config: &summarize::Config, text: &str) -> String {
    let mut hash = Sha256::new();
    for part in [
        config.prompt.as_bytes(),
        &config.max_tokens.to_le_bytes(),
        &config.max_input_bytes.to_le_bytes(),
        text.as_bytes(),
    ] {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part);
    }
    format!(
        "summarize:{}",
        base16ct::lower::encode_string(&hash.finalize())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footers_say_how_to_read_the_original() {
        let one = with_footer("It lists 3 files.\n", "9.0 KiB", Some(("ab-1-1".into(), 1)));
        assert_eq!(
            one,
            "It lists 3 files.\n\n[summary of 9.0 KiB of text; for the full text call the tool \
             read_page with {\"cursor\": \"ab-1-1\"}]"
        );
        let many = with_footer("S", "1.0 MiB", Some(("ab-2-1".into(), 32)));
        assert!(
            many.ends_with("the full text is 32 pages: call the tool read_page with {\"cursor\": \"ab-2-1\"} for page 1]"),
            "{many}"
        );
        let none = with_footer("S", "9 KiB", None);
        assert!(none.contains("not kept"), "{none}");
    }

    #[test]
    fn long_texts_are_cut_at_a_character_boundary() {
        let config = summarize::Config {
            max_input_bytes: 1024,
            ..Default::default()
        };
        let text = "ż".repeat(1000);
        let request = request(&config, &text);
        let prompt = &request.messages[0].text;
        assert!(prompt.starts_with(DEFAULT_PROMPT), "{prompt}");
        assert!(prompt.contains(&"ż".repeat(512)));
        assert!(!prompt.contains(&"ż".repeat(513)));
        assert!(prompt.contains("first 1.0 KiB of 2.0 KiB"), "{prompt}");
        assert_eq!(request.max_tokens, 512);
        let short = super::request(&config, "short");
        assert!(!short.messages[0].text.contains("is cut"));
    }

    #[test]
    fn cache_keys_depend_on_the_prompt_and_the_text() {
        let config = summarize::Config::default();
        let other = summarize::Config {
            prompt: "Other".to_owned(),
            ..Default::default()
        };
        assert_eq!(cache_key(&config, "t"), cache_key(&config, "t"));
        assert_ne!(cache_key(&config, "t"), cache_key(&config, "u"));
        assert_ne!(cache_key(&config, "t"), cache_key(&other, "t"));
    }
}
