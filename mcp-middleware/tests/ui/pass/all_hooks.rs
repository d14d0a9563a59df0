//! Every hook of the catalogue, with the signature the docs give; all of them are in `hooks`.
#![allow(deprecated)]

use mcp_middleware::__private::HookId;
use mcp_middleware::prelude::*;

#[proxy_model]
pub mod everything {
    #![allow(deprecated)]
    use mcp_middleware::prelude::*;
    use mcp_middleware::types::*;

    pub async fn on_initialize(
        ctx: &Context,
        params: InitializeRequestParams,
        next: Next<'_, hooks::Initialize>,
    ) -> HookResult<InitializeResult> {
        next.run(ctx, params).await
    }

    pub async fn on_discover(
        ctx: &Context,
        params: DiscoverRequestParams,
        next: Next<'_, hooks::Discover>,
    ) -> HookResult<DiscoverResult> {
        next.run(ctx, params).await
    }

    pub async fn on_tools_list(
        ctx: &Context,
        params: Option<PaginatedRequestParams>,
        next: Next<'_, hooks::ToolsList>,
    ) -> HookResult<ListToolsResult> {
        next.run(ctx, params).await
    }

    pub async fn on_tool_call(
        ctx: &Context,
        params: CallToolRequestParams,
        next: Next<'_, hooks::ToolCall>,
    ) -> HookResult<CallToolResult> {
        next.run(ctx, params).await
    }

    pub async fn on_resources_list(
        ctx: &Context,
        params: Option<PaginatedRequestParams>,
        next: Next<'_, hooks::ResourcesList>,
    ) -> HookResult<ListResourcesResult> {
        next.run(ctx, params).await
    }

    pub async fn on_resource_templates_list(
        ctx: &Context,
        params: Option<PaginatedRequestParams>,
        next: Next<'_, hooks::ResourceTemplatesList>,
    ) -> HookResult<ListResourceTemplatesResult> {
        next.run(ctx, params).await
    }

    pub async fn on_resource_read(
        ctx: &Context,
        params: ReadResourceRequestParams,
        next: Next<'_, hooks::ResourceRead>,
    ) -> HookResult<ReadResourceResult> {
        next.run(ctx, params).await
    }

    pub async fn on_resource_subscribe(
        ctx: &Context,
        params: SubscribeRequestParams,
        next: Next<'_, hooks::ResourceSubscribe>,
    ) -> HookResult<EmptyResult> {
        next.run(ctx, params).await
    }

    pub async fn on_resource_unsubscribe(
        ctx: &Context,
        params: UnsubscribeRequestParams,
        next: Next<'_, hooks::ResourceUnsubscribe>,
    ) -> HookResult<EmptyResult> {
        next.run(ctx, params).await
    }

    pub async fn on_prompts_list(
        ctx: &Context,
        params: Option<PaginatedRequestParams>,
        next: Next<'_, hooks::PromptsList>,
    ) -> HookResult<ListPromptsResult> {
        next.run(ctx, params).await
    }

    pub async fn on_prompt_get(
        ctx: &Context,
        params: GetPromptRequestParams,
        next: Next<'_, hooks::PromptGet>,
    ) -> HookResult<GetPromptResult> {
        next.run(ctx, params).await
    }

    pub async fn on_completion(
        ctx: &Context,
        params: CompleteRequestParams,
        next: Next<'_, hooks::Completion>,
    ) -> HookResult<CompleteResult> {
        next.run(ctx, params).await
    }

    pub async fn on_set_level(
        ctx: &Context,
        params: SetLevelRequestParams,
        next: Next<'_, hooks::SetLevel>,
    ) -> HookResult<EmptyResult> {
        next.run(ctx, params).await
    }

    pub async fn on_request(
        ctx: &Context,
        request: RawRequest,
        next: Next<'_, hooks::Request>,
    ) -> HookResult<serde_json::Value> {
        next.run(ctx, request).await
    }

    pub async fn on_client_notification(
        ctx: &Context,
        notification: RawNotification,
        next: Next<'_, hooks::ClientNotification>,
    ) -> HookResult<()> {
        next.run(ctx, notification).await
    }

    pub async fn on_server_notification(
        ctx: &Context,
        notification: RawNotification,
        next: Next<'_, hooks::ServerNotification>,
    ) -> HookResult<()> {
        next.run(ctx, notification).await
    }

    pub async fn on_server_request(
        ctx: &Context,
        request: RawRequest,
        next: Next<'_, hooks::ServerRequest>,
    ) -> HookResult<serde_json::Value> {
        next.run(ctx, request).await
    }

    pub async fn transform_content(_ctx: &Context, content: Content) -> HookResult<String> {
        Ok(content.text)
    }

    pub async fn on_session_start(_ctx: &Context) -> HookResult<()> {
        Ok(())
    }

    pub async fn on_session_end(_ctx: &Context) -> HookResult<()> {
        Ok(())
    }
}

fn main() {
    let model = <everything::Model as ProxyModel>::DESCRIPTOR;
    assert_eq!(model.hooks.iter().collect::<Vec<_>>(), HookId::ALL);
}
