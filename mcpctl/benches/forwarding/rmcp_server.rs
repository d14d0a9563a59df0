//! The second baseline (a 5 us hand-written server is not what users run): the
//! same tools as `server.rs` (`echo`, `blob`, the 1,000-tool list) served by rmcp 3.11's own
//! server, a `ServerHandler` as an rmcp user writes it. On stdio it runs on rmcp's default
//! `stdio()` transport (what rmcp's examples use), with the line limit raised to 64 MiB so the
//! 16 MiB message fits; over HTTP on rmcp's `StreamableHttpService` in its default stateful
//! mode (a session per `initialize`, every answer an SSE stream), served by hyper's HTTP/1.1
//! connection directly, without axum. Selected with `FORWARDING_BENCH_UPSTREAM=rmcp`.

use std::convert::Infallible;
use std::io;
use std::sync::Arc;

use hyper_util::rt::TokioIo;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler, ServiceExt as _};

/// The largest message either transport accepts: above the 16 MiB message the bench sends.
const MAX_MESSAGE_BYTES: usize = 64 << 20;

/// The bench's tools, as an rmcp server holds them.
#[derive(Clone)]
struct BenchServer {
    tools: Arc<Vec<Tool>>,
    blob: Arc<str>,
}

impl BenchServer {
    fn new() -> io::Result<Self> {
        let mut list = super::server::tools_list_result();
        let tools: Vec<Tool> = serde_json::from_value(list["tools"].take()).map_err(|err| {
            io::Error::other(format!("the bench's tools are not rmcp tools: {err}"))
        })?;
        Ok(Self {
            tools: Arc::new(tools),
            blob: super::server::blob_text().into(),
        })
    }
}

impl ServerHandler for BenchServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("forwarding-bench-rmcp", "0.1.0"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // What a server that keeps its tools in a list does: a copy per answer.
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let text = match request.name.as_ref() {
            "echo" => request
                .arguments
                .as_ref()
                .and_then(|arguments| arguments.get("text"))
                .and_then(serde_json::Value::as_str)
                .ok_or_else(|| ErrorData::invalid_params("echo needs a `text` string", None))?
                .to_owned(),
            "blob" => self.blob.as_ref().to_owned(),
            _ => {
                return Err(ErrorData::invalid_params(
                    "Unknown tool: only echo and blob",
                    None,
                ));
            }
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

fn runtime() -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}

/// Serves MCP on stdin and stdout until stdin closes.
pub(super) fn run_stdio() -> io::Result<()> {
    let server = BenchServer::new()?;
    runtime()?.block_on(async move {
        let (stdin, stdout) = rmcp::transport::stdio();
        let transport =
            AsyncRwTransport::new_server(stdin, stdout).with_max_line_length(MAX_MESSAGE_BYTES);
        let running = server
            .serve(transport)
            .await
            .map_err(|err| io::Error::other(format!("rmcp server start: {err}")))?;
        running
            .waiting()
            .await
            .map_err(|err| io::Error::other(format!("rmcp server: {err}")))?;
        Ok(())
    })
}

/// Serves MCP over HTTP on a free loopback port until killed; prints `listening on URL` on
/// stdout first.
pub(super) fn run_http() -> io::Result<()> {
    let server = BenchServer::new()?;
    runtime()?.block_on(async move {
        let mut config = StreamableHttpServerConfig::default();
        config.max_request_body_bytes = MAX_MESSAGE_BYTES;
        let service = StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        println!("listening on http://{}/mcp", listener.local_addr()?);
        loop {
            let (stream, _) = listener.accept().await?;
            stream.set_nodelay(true)?;
            let service = service.clone();
            tokio::spawn(async move {
                let handler = hyper::service::service_fn(move |request| {
                    let service = service.clone();
                    async move { Ok::<_, Infallible>(service.handle(request).await) }
                });
                if let Err(err) = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), handler)
                    .await
                    && !err.is_incomplete_message()
                {
                    eprintln!("forwarding bench rmcp HTTP server: {err}");
                }
            });
        }
    })
}
