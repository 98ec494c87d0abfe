//! The code_runner module binary.
//!
//! Its own settings come from the command line or the environment (see
//! `code_runner --help`); the HTTP server's come from `HOST`, `PORT`,
//! `SERVICE_AUTH_TOKEN`, `MAX_BODY_BYTES` and `LOG_FORMAT`.

use std::process::ExitCode;

use code_runner::settings::Settings;

#[tokio::main]
async fn main() -> ExitCode {
    // Settings are parsed inside the future, after `--healthcheck` had its turn.
    module_sdk::run_main("code_runner", async { code_runner::run(module_sdk::parse_settings::<Settings>()).await })
        .await
}
