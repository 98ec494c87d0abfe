//! The skills module: every tool of every `SKILL.toml` under `SKILLS_DIR`
//! becomes a contract tool with a real schema, run without a shell, in a
//! contained process, with its output scrubbed of credentials.
//!
//! Its own settings come from the command line or the environment (see
//! `skills --help`); the HTTP server's come from `HOST`, `PORT`,
//! `SERVICE_AUTH_TOKEN`, `MAX_BODY_BYTES` and `LOG_FORMAT`.

mod arguments;
mod catalog;
mod followed;
mod interpreters;
mod runner;
mod scrub;
mod serve;
mod settings;
mod skill_file;
mod slots;
mod stdout;
mod template;
mod tools;
mod variables;
mod watch;

use std::process::ExitCode;

use module_sdk::ServeConfig;
use module_sdk::service::init_logging;

use crate::catalog::Catalog;
use crate::serve::LiveRouter;
use crate::settings::{SKILLS_DIR, Settings};

#[tokio::main]
async fn main() -> ExitCode {
    // Settings are parsed inside the future, after `--healthcheck` had its turn.
    module_sdk::run_main("skills", async { run(module_sdk::parse_settings::<Settings>()).await }).await
}

async fn run(settings: Settings) -> Result<(), String> {
    let config = ServeConfig::from_env().map_err(|e| e.to_string())?;
    init_logging(config.log_format, settings.sdk.log_output());
    // Every child of this process is a script run: what a script leaves
    // behind (`setsid cmd &`) comes back here when it exits, to be killed.
    limited_process::become_subreaper().map_err(|error| format!("cannot become a child subreaper: {error}"))?;
    // Scripts run as the module's user: a dumpable module would let them
    // read its environment (`/proc/$PPID/environ`: SERVICE_AUTH_TOKEN, every
    // skill's secrets) and memory. Each script is dumpable again after exec.
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(|error| format!("cannot make the module non-dumpable: {error}"))?;
    let dir = SKILLS_DIR.absolute(&settings.skills_dir).map_err(|e| e.to_string())?;
    match std::fs::metadata(&dir) {
        Ok(metadata) if metadata.is_dir() => {}
        Ok(_) => return Err(SKILLS_DIR.unusable(&settings.skills_dir, &dir, "it is not a directory").to_string()),
        Err(error) => return Err(SKILLS_DIR.unusable(&settings.skills_dir, &dir, error).to_string()),
    }
    if settings.sdk.stdio {
        // One MCP session over stdio: the tools found now, no reload (MCP
        // clients that start a module list its tools once).
        tracing::info!("serving MCP on stdio: changes under SKILLS_DIR need a restart");
        return tools::module(Catalog::discover_logged(&settings), settings.max_manifest_bytes, settings.run_slots())
            .sdk_flags(settings.sdk)
            .serve()
            .await
            .map_err(|e| e.to_string());
    }
    let live = LiveRouter::new(&settings, config)?;
    watch::watch(settings, live.clone())?;
    live.serve().await.map_err(|e| e.to_string())
}
