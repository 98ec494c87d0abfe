//! Every binary crate under `modules/`, and the SDK's demo module, started
//! with `--stdio` (the flag `module_sdk::SdkFlags` adds to a module's clap
//! settings) answers MCP on its standard input and output: `initialize`,
//! then `tools/list`, through the official client, as an MCP client that
//! launches the module itself would.

#[path = "support/workspace.rs"]
mod workspace;

use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;

/// How long a module may take to answer `initialize`, and `tools/list`: a
/// module that ignores `--stdio` (and serves HTTP instead) never answers.
const ANSWER_WITHIN: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_workspace_module_serves_mcp_on_stdio() {
    let binaries = tokio::task::spawn_blocking(workspace::module_binaries).await.unwrap();
    let packages = workspace::module_packages();
    assert!(packages.iter().all(|package| binaries.iter().any(|(name, _)| name == package)), "{binaries:?}");
    for (name, executable) in &binaries {
        let dir = tempfile::tempdir().unwrap();
        let mut command = tokio::process::Command::new(executable);
        command
            .arg("--stdio")
            .current_dir(dir.path())
            .env_remove("SERVICE_AUTH_TOKEN")
            .env("NOTES_DB", dir.path().join("notes.db"))
            .env("SCHEDULER_DB", dir.path().join("scheduler.db"))
            .env("SKILLS_DIR", workspace::root().join("modules/skills/examples"))
            .env("FILES_ROOT", dir.path())
            .env("RUST_LOG", "warn");
        let Ok(connected) =
            tokio::time::timeout(ANSWER_WITHIN, ().serve(TokioChildProcess::new(command).unwrap())).await
        else {
            panic!("{name} --stdio: no answer to initialize within {ANSWER_WITHIN:?}");
        };
        let client = connected.unwrap_or_else(|error| panic!("{name} --stdio: no MCP initialize answer: {error}"));
        let info = client.peer_info().expect("the server's answer to initialize");
        assert_eq!(info.server_info.as_ref().map(|server| server.name.as_str()), Some(name.as_str()), "{name}");
        let tools = tokio::time::timeout(ANSWER_WITHIN, client.list_all_tools())
            .await
            .unwrap_or_else(|_| panic!("{name}: no answer to tools/list within {ANSWER_WITHIN:?}"))
            .unwrap_or_else(|error| panic!("{name}: tools/list failed: {error}"));
        assert!(!tools.is_empty(), "{name} listed no tools over stdio");
        client.cancel().await.unwrap();
    }
}
