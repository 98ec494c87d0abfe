//! The notes module binary.
//!
//! Its own settings come from the command line or the environment (see
//! `notes --help`); the HTTP server's come from `HOST`, `PORT`,
//! `SERVICE_AUTH_TOKEN`, `MAX_BODY_BYTES` and `LOG_FORMAT`.

use std::process::ExitCode;

use clap::Parser;
use notes::settings::Settings;

#[tokio::main]
async fn main() -> ExitCode {
    // `--healthcheck` (for container healthchecks) probes a running instance and exits.
    module_sdk::run_healthcheck_if_requested();
    let settings = Settings::parse();
    let served = match notes::module(&settings) {
        Ok(module) => module.serve().await.map_err(|e| e.to_string()),
        Err(error) => Err(format!("cannot use NOTES_DB={}: {error}", settings.notes_db.display())),
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("notes: {message}");
            ExitCode::FAILURE
        }
    }
}
