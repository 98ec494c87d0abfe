//! Process-wide logging set-up for module binaries.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Where [`init_logging`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogOutput {
    /// Standard output: a server.
    Stdout,
    /// Standard error: a module serving MCP on stdio, whose standard output
    /// carries the protocol ([`SdkFlags::log_output`](crate::SdkFlags::log_output)).
    Stderr,
}

/// Installs a tracing subscriber writing to `output`, filtered by
/// `RUST_LOG` (default `info`, and `warn` for the MCP library `rmcp`),
/// coloured only on a terminal; does nothing when one is installed already.
/// Starts exporting call spans when `OTEL_EXPORTER_OTLP_ENDPOINT` is set
/// (see [`crate::otlp`]).
pub fn init_logging(format: LogFormat, output: LogOutput) {
    match output {
        LogOutput::Stdout => install(format, std::io::stdout, std::io::stdout().is_terminal()),
        LogOutput::Stderr => install(format, std::io::stderr, std::io::stderr().is_terminal()),
    }
}

fn install<W>(format: LogFormat, writer: W, ansi: bool)
where
    W: for<'a> tracing_subscriber::fmt::MakeWriter<'a> + Send + Sync + 'static,
{
    // rmcp logs every stateless MCP request at `info` (three lines), so its
    // default is `warn`; `RUST_LOG` decides when it is set.
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,rmcp=warn"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(writer);
    // An error only means a subscriber exists already (a test, an embedding
    // program), which is fine to keep.
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
    // Call spans over OTLP when an endpoint is set; after the subscriber, so its problems are logged.
    crate::otlp::start_from_env();
}
