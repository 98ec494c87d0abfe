//! The code_runner module: `code_runner.execute_code` runs a model's Python
//! in a bubblewrap sandbox (every namespace unshared, a seccomp filter, a read-only `/usr`,
//! fresh in-memory working directory and `/tmp`, an empty environment, no
//! capabilities, resource limits per process, a cgroup per run that bounds
//! its memory, processes and CPU in total, a timeout that kills everything
//! the code started) and answers what it printed and the files it left.
//!
//! At start the module runs a trivial program in the sandbox; when that
//! fails, it still serves its manifest, but `/health` answers `503` with
//! the reason and every call is refused: code never runs unsandboxed.

pub mod settings;

mod admission;
mod cgroup;
mod files;
mod host_usr;
mod run_user;
mod sandbox;
mod seccomp;
mod serve;
mod tool;

use module_sdk::{Module, Permission, RiskLevel, ServeConfig, Tool};

pub use crate::files::OutputFile;
pub use crate::sandbox::{ParentError, Ran, Sandbox, SandboxError, StartError};
pub use crate::seccomp::FilterError;
pub use crate::tool::{CodeOutput, ExecuteCode, Runner};

use crate::settings::Settings;

/// The module's name, the prefix of its tool names.
pub const MODULE_NAME: &str = "code_runner";

/// The module with `runner` shared by its calls.
pub fn module(settings: &Settings, runner: Runner) -> Module {
    let execute_code = Tool::new("execute_code", tool::DESCRIPTION, tool::execute_code)
        .permission(Permission::User)
        .requires_approval()
        .risk_level(RiskLevel::High)
        .timeout(Runner::call_timeout(settings));
    Module::new(
        MODULE_NAME,
        "Runs Python code in a sandbox without network or access to the host, and answers its output.",
    )
    .version(env!("CARGO_PKG_VERSION"))
    .sdk_flags(settings.sdk)
    .tool(execute_code)
    .state(runner)
}

/// Checks the sandbox, then serves until SIGINT or SIGTERM (MCP on stdio
/// with `--stdio`); fails at once when CODE_CGROUP_PARENT cannot hold run
/// cgroups or the seccomp filter cannot be built.
pub async fn run(settings: Settings) -> Result<(), String> {
    let config = ServeConfig::from_env().map_err(|e| e.to_string())?;
    module_sdk::service::init_logging(config.log_format, settings.sdk.log_output());
    let sandbox = Sandbox::new(&settings).map_err(|e| e.to_string())?;
    let broken = sandbox.check().await.err();
    match &broken {
        None => tracing::info!("the sandbox works"),
        Some(reason) => tracing::error!(%reason, "the sandbox does not work here; execute_code is refused"),
    }
    let runner = Runner::new(&settings, sandbox, broken.clone());
    let module = module(&settings, runner);
    if settings.sdk.stdio {
        // MCP has no `/health`: a broken sandbox shows in every call's refusal.
        return module.serve().await.map_err(|e| e.to_string());
    }
    serve::serve(module, config, broken).await.map_err(|e| e.to_string())
}
