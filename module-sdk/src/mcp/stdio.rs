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

/// The SDK's own command-line flags, for a module whose settings are a clap
/// parser: flattened in (`#[command(flatten)] pub sdk: SdkFlags`), clap
/// accepts them instead of refusing an unknown argument, and `--help`
/// lists them. [`Module::serve`] reads the command line itself, so a module
/// without clap gets them too.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::Args)]
pub struct SdkFlags {
    /// Serve MCP on standard input and output instead of HTTP, for an MCP
    /// client that starts the module itself (logs go to standard error).
    #[arg(long = "stdio")]
    pub stdio: bool,
}

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

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;

    /// A module's settings, flattening the SDK's flags.
    #[derive(Debug, Parser)]
    struct Settings {
        #[command(flatten)]
        sdk: SdkFlags,
    }

    #[test]
    fn the_flattened_flag_is_the_one_serve_reads_and_help_lists_it() {
        assert!(Settings::try_parse_from(["module", STDIO_FLAG]).unwrap().sdk.stdio);
        assert!(!Settings::try_parse_from(["module"]).unwrap().sdk.stdio);
        assert!(Settings::command().render_help().to_string().contains("--stdio"));
    }
}
