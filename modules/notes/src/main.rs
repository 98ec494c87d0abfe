//! The notes module binary.
//!
//! Its own settings come from the command line or the environment (see
//! `notes --help`); the HTTP server's come from `HOST`, `PORT`,
//! `SERVICE_AUTH_TOKEN`, `MAX_BODY_BYTES` and `LOG_FORMAT`.

use std::process::ExitCode;

use notes::settings::Settings;

#[tokio::main]
async fn main() -> ExitCode {
    module_sdk::run_main("notes", async {
        let settings = module_sdk::parse_settings::<Settings>();
        let module = notes::module(&settings).map_err(|e| e.to_string())?;
        module.serve().await.map_err(|e| e.to_string())
    })
    .await
}
