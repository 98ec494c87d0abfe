//! The scheduler module binary.
//!
//! Its own settings come from the command line or the environment (see
//! `scheduler --help`); the HTTP server's come from `HOST`, `PORT`,
//! `SERVICE_AUTH_TOKEN`, `MAX_BODY_BYTES` and `LOG_FORMAT`.

use std::process::ExitCode;

use clap::Parser;
use scheduler::settings::Settings;

#[tokio::main]
async fn main() -> ExitCode {
    // `--healthcheck` (for container healthchecks) probes a running instance and exits.
    module_sdk::run_healthcheck_if_requested();
    let settings = Settings::parse();
    let served = match scheduler::module(&settings) {
        Ok((module, firing)) => {
            match firing {
                Some(firing) => drop(tokio::spawn(firing.run())),
                None => tracing::warn!("DELIVERY_URL is not set: tasks are kept but not fired until it is"),
            }
            module.serve().await.map_err(|e| e.to_string())
        }
        Err(message) => Err(message),
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("scheduler: {message}");
            ExitCode::FAILURE
        }
    }
}
