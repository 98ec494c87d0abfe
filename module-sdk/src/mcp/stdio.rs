//! `--stdio`: the module's MCP server on standard input and output, for an
//! MCP client that launches the module itself (Claude Desktop, Cursor, Claude
//! Code). Logs go to standard error, as stdout carries the protocol.

use std::sync::Arc;

use rmcp::ServiceExt;

use crate::config::ServeConfig;
use crate::error::ServeError;
use crate::logging::init_logging_to_stderr;
use crate::mcp::handler::ModuleMcp;
use crate::module::Module;
use crate::server::shutdown_signal;

/// The command-line flag that selects stdio.
pub const STDIO_FLAG: &str = "--stdio";

/// Whether the process was started with `--stdio`.
pub(crate) fn stdio_requested() -> bool {
    std::env::args().skip(1).any(|argument| argument == STDIO_FLAG)
}

/// Serves `module` over stdio until the client closes standard input, or
/// SIGINT or SIGTERM; then flushes its call spans (OTLP).
pub(crate) async fn serve_stdio(module: Module) -> Result<(), ServeError> {
    let config = ServeConfig::from_env()?;
    init_logging_to_stderr(config.log_format);
    let service = Arc::new(module.build()?);
    tracing::info!(
        module = %service.manifest().module_name,
        tools = service.manifest().tools.len(),
        "module serving MCP on stdio"
    );
    let failed = |error: std::io::Error| ServeError::Io { address: "standard input/output".to_owned(), source: error };
    let running = ModuleMcp::new(service, config.mcp.page_size)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|error| failed(std::io::Error::other(error)))?;
    let cancel = running.cancellation_token();
    tokio::select! {
        finished = running.waiting() => { finished.map_err(|error| failed(std::io::Error::other(error)))?; }
        () = shutdown_signal() => cancel.cancel(),
    }
    // Call spans still queued go out now (within the export timeout), as when an HTTP module stops.
    crate::otlp::shutdown().await;
    tracing::info!("module stopped");
    Ok(())
}
