//! `--stdio`: the module's MCP server on standard input and output, for an
//! MCP client that launches the module itself (Claude Desktop, Cursor, Claude
//! Code). Logs go to standard error, as stdout carries the protocol.

use std::ffi::OsStr;
use std::sync::Arc;

use rmcp::ServiceExt;

use crate::config::ServeConfig;
use crate::error::ServeError;
use crate::logging::{LogOutput, init_logging};
use crate::mcp::handler::ModuleMcp;
use crate::mcp::in_flight::BoundedRequests;
use crate::mcp::stdio_lines::StdioLines;
use crate::module::Module;
use crate::server::shutdown_signal;

/// The command-line flag that selects stdio.
pub const STDIO_FLAG: &str = "--stdio";

/// The SDK's own command-line flags. A module whose settings are a clap
/// parser flattens them in (`#[command(flatten)] pub sdk: SdkFlags`), so clap
/// accepts them instead of refusing an unknown argument and `--help` lists
/// them, and hands the parsed flags to its module with
/// [`Module::sdk_flags`]; a module without clap gets them from
/// [`SdkFlags::from_command_line`], which [`Module::serve`] reads when it was
/// given none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::Args)]
pub struct SdkFlags {
    /// Serve MCP on standard input and output instead of HTTP, for an MCP
    /// client that starts the module itself (logs go to standard error).
    #[arg(long = "stdio")]
    pub stdio: bool,
}

impl SdkFlags {
    /// The flags on the process's command line, for a module without clap.
    pub fn from_command_line() -> Self {
        Self::from_args(std::env::args_os().skip(1))
    }

    /// The flags among `args` (a command line without the program's name);
    /// other arguments are left to the module.
    pub fn from_args<I>(args: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<OsStr>,
    {
        Self { stdio: args.into_iter().any(|argument| argument.as_ref() == STDIO_FLAG) }
    }

    /// Where the process's logs go: standard error under `--stdio`, whose
    /// standard output carries MCP; standard output otherwise.
    pub fn log_output(self) -> LogOutput {
        if self.stdio { LogOutput::Stderr } else { LogOutput::Stdout }
    }
}

/// Serves `module` over stdio until the client closes standard input, or
/// SIGINT or SIGTERM; then flushes its call spans (OTLP). A line (one
/// message) longer than `MAX_BODY_BYTES` is skipped unread, as `/mcp`
/// refuses such a body (rmcp's own cap would be 16 MiB), and answered with a
/// JSON-RPC error, as is a line that is not a message ([`StdioLines`]); no
/// more lines are read while `MAX_CONNECTIONS` requests are unanswered, the
/// most HTTP would serve at once (one per connection).
pub(crate) async fn serve_stdio(module: Module) -> Result<(), ServeError> {
    let config = ServeConfig::from_env()?;
    init_logging(config.log_format, LogOutput::Stderr);
    let service = Arc::new(module.build_limited(config.max_blocking_calls)?);
    tracing::info!(
        module = %service.manifest().module_name,
        tools = service.manifest().tools.len(),
        "module serving MCP on stdio"
    );
    let failed = |error: std::io::Error| ServeError::Io { address: "standard input/output".to_owned(), source: error };
    let running = ModuleMcp::new(service, config.mcp.page_size)
        .serve(BoundedRequests::new(
            StdioLines::new(tokio::io::stdin(), tokio::io::stdout(), config.limits.max_body_bytes),
            config.limits.max_connections,
        ))
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

    #[test]
    fn a_module_without_clap_finds_the_flag_among_its_own_arguments() {
        assert!(SdkFlags::from_args(["--notes-db", "/data/notes.db", STDIO_FLAG]).stdio);
        assert!(!SdkFlags::from_args(["--notes-db", "/data/notes.db"]).stdio);
        assert!(!SdkFlags::from_args(["--stdio=false", "stdio"]).stdio, "only the flag itself counts");
        assert_eq!(SdkFlags { stdio: true }.log_output(), LogOutput::Stderr);
        assert_eq!(SdkFlags::default().log_output(), LogOutput::Stdout);
    }
}
