//! The scheduler module binary.
//!
//! Its own settings come from the command line or the environment (see
//! `scheduler --help`); the HTTP server's come from `HOST`, `PORT`,
//! `SERVICE_AUTH_TOKEN`, `MAX_BODY_BYTES` and `LOG_FORMAT`.

use std::process::ExitCode;

use module_sdk::ServeConfig;
use scheduler::settings::Settings;

#[tokio::main]
async fn main() -> ExitCode {
    module_sdk::run_main("scheduler", async {
        let settings = module_sdk::parse_settings::<Settings>();
        // Logging first (stderr under `--stdio`): `Module::serve` would set
        // it up only after the warnings below were dropped.
        let config = ServeConfig::from_env().map_err(|e| e.to_string())?;
        module_sdk::service::init_logging(config.log_format, settings.sdk.log_output());
        let (module, firing) = scheduler::module(&settings)?;
        let firing = firing.map(scheduler::firing::Firing::start);
        if firing.is_none() {
            tracing::warn!("DELIVERY_URL is not set: tasks are kept but not fired until it is");
        }
        let served = module.serve().await.map_err(|e| e.to_string());
        if let Some(firing) = firing {
            match firing.stop().await {
                Ok(released) => tracing::info!(released, "stopped firing; runs in flight are due again"),
                Err(error) => {
                    tracing::error!(%error, "could not give back the runs in flight; they fire once their lease lapses")
                }
            }
        }
        served
    })
    .await
}
