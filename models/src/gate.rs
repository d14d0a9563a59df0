//! `gate`: a session opens only once the model says what it is doing.

use mcp_middleware::proxy_model;

/// Opens a session only once the model states its intent, and hands it the project's prompts
/// that fit.
///
/// A new session is gated: `tools/list` shows only `begin_session` (plus the tools configured as
/// always visible), and a call to any other tool returns a tool error asking the model to call
/// `begin_session` first; the upstream is not called. `begin_session(intent, tags?)` scores the
/// project's prompts against the intent and tags, returns the best ones that fit in the byte
/// budget with the names of the rest, opens the session and sends
/// `notifications/tools/list_changed`. From then on `tools/list` shows the upstream's tools and
/// `read_prompts(names)`, which returns more prompts. Every session gates on its own.
///
/// Scoring: the intent is split into lowercase words (letters and digits, at least three
/// characters, common English stop words dropped). A prompt scores 3 for each of its tags that
/// is among the requested tags or the intent's words, 2 for each intent word in its name, and 1
/// for each intent word found in its text (each word counted once). Prompts that score 0 are
/// not offered; ties go to the shorter prompt, then by name. The best prompts are taken in
/// score order while they fit in `promptBudgetBytes`; the others are listed by name.
#[proxy_model]
pub mod gate {
    use std::collections::BTreeSet;

    use mcp_middleware::pattern::{Pattern, any_matches};
    use mcp_middleware::prelude::*;
    use mcp_middleware::project::ProjectPrompt;

    /// What the gate lets through and how much it hands over.
    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(default, rename_all = "camelCase", deny_unknown_fields)]
    pub struct Config {
        /// Tools (names or globs) listed and callable while the session is gated.
        pub always_visible: Vec<Pattern>,
        /// The most bytes of prompt text `begin_session` returns.
        pub prompt_budget_bytes: usize,
    }

    impl Default for Config {
        fn default() -> Self {
            Self {
                always_visible: Vec::new(),
                prompt_budget_bytes: 8 * 1024,
            }
        }
    }

    /// Whether this session is open, and what it was opened for (serde: a shared store carries
    /// it between replicas).
    #[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
    pub struct State {
        /// Set by `begin_session`.
        pub open: bool,
        /// The intent `begin_session` was given.
        pub intent: Option<String>,
        /// The prompts handed over so far, by name.
        pub delivered: BTreeSet<String>,
    }

    const BEGIN: &str = "begin_session";
    const READ: &str = "read_prompts";

    fn is_open(ctx: &Context) -> HookResult<bool> {
        ctx.state(|state: &mut State| state.open)
    }

    /// While gated: only `begin_session` and the always-visible tools. Once open: everything
    /// but `begin_session`.
    pub async fn on_tools_list(
        ctx: &Context,
        params: Option<PaginatedRequestParams>,
        next: Next<'_, hooks::ToolsList>,
    ) -> HookResult<ListToolsResult> {
        let mut listed = next.run(ctx, params).await?;
        if is_open(ctx)? {
            listed.tools.retain(|tool| tool.name != BEGIN);
        } else {
            let visible = &ctx.config::<Config>()?.always_visible;
            listed
                .tools
                .retain(|tool| tool.name == BEGIN || any_matches(visible, &tool.name));
        }
        Ok(listed)
    }

    /// While gated, a call to anything but `begin_session` and the always-visible tools is a
    /// tool error, and the upstream is not called. Once open, `begin_session` is refused.
    pub async fn on_tool_call(
        ctx: &Context,
        params: CallToolRequestParams,
        next: Next<'_, hooks::ToolCall>,
    ) -> HookResult<CallToolResult> {
        let open = is_open(ctx)?;
        let allowed = if open {
            params.name != BEGIN
        } else {
            params.name == BEGIN
                || any_matches(&ctx.config::<Config>()?.always_visible, &params.name)
        };
        if allowed {
            return next.run(ctx, params).await;
        }
        let message = if open {
            format!("`{BEGIN}` was already called: this session is open; call the tools directly")
        } else {
            format!(
                "This session is gated: call `{BEGIN}` with your intent (what you are trying to \
                 do) first; after that the server's tools are listed and callable (`{}` too, if \
                 the server has a tool of that name).",
                params.name
            )
        };
        Ok(CallToolResult::error(vec![ContentBlock::text(message)]))
    }

    /// What the model is about to do.
    #[derive(Debug, Deserialize, JsonSchema)]
    pub struct BeginSession {
        /// What you are trying to do, in a sentence or two.
        pub intent: String,
        /// Topics the work touches, matched against the prompts' tags.
        #[serde(default)]
        pub tags: Vec<String>,
    }

    /// Opens the session. Call this first, with what you are trying to do: it returns the
    /// project's guidance that fits and makes the tools available.
    #[tool]
    pub async fn begin_session(ctx: &Context, args: BeginSession) -> HookResult<String> {
        let budget = ctx.config::<Config>()?.prompt_budget_bytes;
        let prompts = ctx.project().map(|p| p.prompts.as_slice()).unwrap_or(&[]);
        let ranked = rank(prompts, &args.intent, &args.tags);
        let chosen = within_budget(&ranked, budget);
        let mut text = String::from("Session open: the tools are now available.\n");
        for prompt in &chosen {
            text.push_str(&format!(
                "\n## {}\n\n{}\n",
                prompt.name,
                prompt.content.trim_end()
            ));
        }
        let others: Vec<&str> = prompts
            .iter()
            .filter(|p| !chosen.iter().any(|c| c.name == p.name))
            .map(|p| p.name.as_str())
            .collect();
        if !others.is_empty() {
            text.push_str(&format!(
                "\nMore prompts (read them with `{READ}`): {}\n",
                others.join(", ")
            ));
        }
        let delivered: Vec<String> = chosen.iter().map(|p| p.name.clone()).collect();
        let newly_open = ctx.state(|state: &mut State| {
            let was_open = state.open;
            state.open = true;
            state.intent = Some(args.intent.clone());
            state.delivered.extend(delivered);
            !was_open
        })?;
        if newly_open {
            ctx.downstream().tools_list_changed()?;
        }
        Ok(text)
    }

    /// Prompts to read, by name.
    #[derive(Debug, Deserialize, JsonSchema)]
    pub struct ReadPrompts {
        /// The prompts' names, as `begin_session` listed them.
        pub names: Vec<String>,
    }

    /// Returns the project's prompts of these names.
    #[tool]
    pub async fn read_prompts(ctx: &Context, args: ReadPrompts) -> HookResult<CallToolResult> {
        let prompts = ctx.project().map(|p| p.prompts.as_slice()).unwrap_or(&[]);
        let mut text = String::new();
        let mut missing = Vec::new();
        for name in &args.names {
            match prompts.iter().find(|p| &p.name == name) {
                Some(prompt) => {
                    text.push_str(&format!(
                        "## {}\n\n{}\n\n",
                        prompt.name,
                        prompt.content.trim_end()
                    ));
                }
                None => missing.push(name.as_str()),
            }
        }
        ctx.state(|state: &mut State| state.delivered.extend(args.names.iter().cloned()))?;
        if !missing.is_empty() {
            let known: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
            text.push_str(&format!(
                "No prompt named {}; the project has: {}\n",
                missing.join(", "),
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ));
            if missing.len() == args.names.len() {
                return Ok(CallToolResult::error(vec![ContentBlock::text(text)]));
            }
        }
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
    }

    const STOP_WORDS: &[&str] = &[
        "the", "and", "for", "with", "that", "this", "from", "into", "are", "was", "were", "will",
        "have", "has", "had", "not", "but", "you", "your", "our", "can", "use", "using", "want",
        "need", "some", "all", "any", "how", "what", "when", "which", "who", "why", "about",
        "then", "than", "there", "their", "them", "they", "its", "also", "just", "get", "make",
    ];

    /// The distinct lowercase words of `text` that carry meaning.
    pub(crate) fn words(text: &str) -> BTreeSet<String> {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.chars().count() >= 3)
            .map(str::to_lowercase)
            .filter(|w| !STOP_WORDS.contains(&w.as_str()))
            .collect()
    }

    /// The prompts that score above zero, best first.
    pub(crate) fn rank<'p>(
        prompts: &'p [ProjectPrompt],
        intent: &str,
        tags: &[String],
    ) -> Vec<(&'p ProjectPrompt, u32)> {
        let intent_words = words(intent);
        let wanted_tags: BTreeSet<String> = tags.iter().map(|t| t.to_lowercase()).collect();
        let mut scored: Vec<(&ProjectPrompt, u32)> = prompts
            .iter()
            .map(|prompt| {
                let tag_hits = prompt
                    .tags
                    .iter()
                    .map(|t| t.to_lowercase())
                    .filter(|t| wanted_tags.contains(t) || intent_words.contains(t))
                    .count() as u32;
                let name_words = words(&prompt.name);
                let body_words = words(&prompt.content);
                let name_hits = intent_words.intersection(&name_words).count() as u32;
                let body_hits = intent_words.intersection(&body_words).count() as u32;
                (prompt, 3 * tag_hits + 2 * name_hits + body_hits)
            })
            .filter(|(_, score)| *score > 0)
            .collect();
        scored.sort_by(|(a, sa), (b, sb)| {
            sb.cmp(sa)
                .then(a.content.len().cmp(&b.content.len()))
                .then(a.name.cmp(&b.name))
        });
        scored
    }

    /// The ranked prompts that fit in `budget` bytes together, in rank order (a prompt that
    /// does not fit is skipped and smaller ones after it may still fit).
    fn within_budget<'p>(
        ranked: &[(&'p ProjectPrompt, u32)],
        budget: usize,
    ) -> Vec<&'p ProjectPrompt> {
        let mut used = 0;
        let mut chosen = Vec::new();
        for (prompt, _) in ranked {
            if used + prompt.content.len() <= budget {
                used += prompt.content.len();
                chosen.push(*prompt);
            }
        }
        chosen
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn prompt(name: &str, tags: &[&str], content: &str) -> ProjectPrompt {
            ProjectPrompt::new(name, content).tags(tags.iter().copied())
        }

        #[test]
        fn tags_count_more_than_words_in_the_text() {
            let prompts = [
                prompt("style", &[], "Deploy notes: how we deploy the database."),
                prompt("release", &["deploy"], "Checklist."),
                prompt("unrelated", &["cooking"], "Recipes."),
            ];
            let ranked = rank(&prompts, "Deploy the new database schema", &[]);
            let names: Vec<&str> = ranked.iter().map(|(p, _)| p.name.as_str()).collect();
            assert_eq!(names, ["release", "style"], "{ranked:?}");
            let by_tag = rank(&prompts, "anything", &["cooking".to_owned()]);
            assert_eq!(by_tag[0].0.name, "unrelated");
        }

        #[test]
        fn the_budget_keeps_the_best_that_fit() {
            let prompts = [
                prompt("big", &["x"], &"a".repeat(100)),
                prompt("small", &["x"], "b"),
            ];
            let ranked = rank(&prompts, "x", &["x".to_owned()]);
            let chosen = within_budget(&ranked, 50);
            assert_eq!(chosen.len(), 1);
            assert_eq!(chosen[0].name, "small");
        }
    }
}
