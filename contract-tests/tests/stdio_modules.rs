//! Every binary crate under `modules/`, and the SDK's demo module, started
//! with `--stdio` (the flag `module_sdk::SdkFlags` adds to a module's clap
//! settings) answers MCP on its standard input and output: `initialize`,
//! then `tools/list`, through the official client, as an MCP client that
//! launches the module itself would; and, with every log line enabled,
//! writes nothing else to stdout.

#[path = "support/workspace.rs"]
mod workspace;

use std::process::Stdio;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

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
        let command = |log_level: &str| {
            let mut command = tokio::process::Command::new(executable);
            command
                .arg("--stdio")
                .current_dir(dir.path())
                .env_remove("SERVICE_AUTH_TOKEN")
                .env("NOTES_DB", dir.path().join("notes.db"))
                .env("SCHEDULER_DB", dir.path().join("scheduler.db"))
                .env("SKILLS_DIR", workspace::root().join("modules/skills/examples"))
                .env("FILES_ROOT", dir.path())
                .env("RUST_LOG", log_level);
            command
        };
        assert_stdout_is_only_protocol(name, command("debug")).await;
        let command = command("warn");
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

/// Runs `initialize` and `tools/list` over raw pipes with every log line
/// enabled, and checks that each line the module writes to stdout is a
/// JSON-RPC message: rmcp's client skips lines that are not, so a log line
/// on stdout would pass the check above unseen.
async fn assert_stdout_is_only_protocol(name: &str, mut command: tokio::process::Command) {
    command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).kill_on_drop(true);
    let mut child = command.spawn().unwrap_or_else(|error| panic!("{name}: {error}"));
    let mut stdin = child.stdin.take().unwrap();
    let requests = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"stdio-check","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    ];
    for request in requests {
        stdin.write_all(format!("{request}\n").as_bytes()).await.unwrap();
    }
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let read_until_listed = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let message: Value = serde_json::from_str(&line)
                .unwrap_or_else(|error| panic!("{name} --stdio wrote a line that is not JSON ({error}): {line}"));
            assert_eq!(message["jsonrpc"], "2.0", "{name} --stdio wrote a line that is not JSON-RPC: {line}");
            if message["id"] == 2 {
                return;
            }
        }
        panic!("{name} --stdio closed stdout before answering tools/list");
    };
    tokio::time::timeout(ANSWER_WITHIN, read_until_listed)
        .await
        .unwrap_or_else(|_| panic!("{name} --stdio: no answer to tools/list within {ANSWER_WITHIN:?}"));
    drop(stdin);
    let _ = child.kill().await;
}
