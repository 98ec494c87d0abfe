//! The orchestrator as the first process of a PID namespace, as in a
//! container started without an init: the orphans of its stdio MCP servers
//! are reaped, not left as zombies (src/init.rs). Run in a new user and PID
//! namespace with util-linux's `unshare`, which needs user namespaces.

mod common;

use std::time::{Duration, Instant};

use common::OrchestratorProcess;
use serde_json::json;
use test_support::built_binary;
use test_support::process_tree::descendants;

/// The process below `pid` whose command name is `name`.
fn named(pid: u32, name: &str) -> Option<u32> {
    descendants(pid)
        .into_iter()
        .find(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|comm| comm.trim() == name))
}

/// Process `pid`'s state letter (`S`, `Z`...), `None` once it is gone (reaped).
fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_pid_1_the_orphans_of_a_stdio_server_are_reaped() {
    let demo = built_binary("examples/demo");
    // As `npx` or `sh -c` does: the server is not alone in the child's tree.
    let script = format!("sleep 600 </dev/null >/dev/null 2>&1 & exec {demo:?} --stdio");
    let services = json!({"local": {"command": ["sh", "-c", script], "permission": "guest"}}).to_string();
    // Killed with `unshare` (`--kill-child`), and the namespace with it.
    let namespace = ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc", "--kill-child"];
    let mut orchestrator = OrchestratorProcess::start_under(&namespace, &[("MODULE_SERVICES", &services)]);
    orchestrator.wait_for_module("local", "up", Duration::from_secs(20)).await;
    let server = named(orchestrator.pid(), "demo").expect("the stdio server runs");
    let sleeper = named(orchestrator.pid(), "sleep").expect("the server's own child runs");

    // The server dies; its child, now an orphan, is killed with the server's
    // process group when the next call finds the session ended, and must
    // then be reaped by PID 1.
    let _ = std::process::Command::new("kill").args(["-9", &server.to_string()]).status();
    let call = json!({"tool_name": "local.greet", "arguments": {"name": "Ann"}, "user_permission": "guest"});
    let _ = orchestrator.post("/execute", &call).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while let Some(state) = state(sleeper) {
        assert!(Instant::now() < deadline, "process {sleeper}, orphaned by the stdio server, is left in state {state}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(orchestrator.get("/health").await["status"], "ok");

    // SIGTERM to PID 1 (a container runtime's stop) reaches the orchestrator,
    // which stops gracefully: PID 1 exits as it did, with success.
    let init = descendants(orchestrator.pid())[0];
    let _ = std::process::Command::new("kill").args(["-TERM", &init.to_string()]).status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while state(init).is_some_and(|state| state != 'Z') {
        assert!(Instant::now() < deadline, "PID 1 did not stop on SIGTERM");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        orchestrator.logged(|line| line.contains("orchestrator stopped")),
        "it stopped gracefully: {:?}",
        orchestrator.logs()
    );
    assert!(orchestrator.terminate().success());
}
