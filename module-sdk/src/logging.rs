//! Process-wide logging set-up for module binaries.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Installs a tracing subscriber writing to stdout, filtered by `RUST_LOG`
/// (default `info`), coloured only on a terminal; does nothing when one is
/// installed already.
pub fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_ansi(std::io::stdout().is_terminal());
    // An error only means a subscriber exists already (a test, an embedding
    // program), which is fine to keep.
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
