//! `https://` modules and `mcp+https://` MCP servers behind a private CA,
//! through the real orchestrator binary: an SDK module (its `/manifest`,
//! `/execute` and `/mcp`) behind a TLS proxy whose certificate a CA made
//! at test time signed, configured both as a module and as an MCP server.
//! With `TLS_EXTRA_ROOTS` naming the CA both are discovered and called;
//! without it both are down, saying the certificate is not trusted; and a
//! `TLS_EXTRA_ROOTS` that cannot be used stops start-up, naming it.

mod common;

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::modules::sdk_module;
use common::tls::{TestCa, TlsProxy};
use common::{BINARY, ModuleServer, OrchestratorProcess};
use rcgen::KeyPair;
use serde_json::{Value, json};

/// The names the module has: routed over https, and as an MCP server.
const NAMES: [&str; 2] = ["secure", "secure_mcp"];

/// `MODULE_SERVICES` with the module behind `proxy` as both.
fn services(proxy: &TlsProxy) -> String {
    json!({"secure": proxy.url(), "secure_mcp": format!("mcp+{}/mcp", proxy.url())}).to_string()
}

/// The orchestrator with the module behind `proxy` and `env`.
fn orchestrator_for(proxy: &TlsProxy, env: &[(&str, &str)]) -> OrchestratorProcess {
    let services = services(proxy);
    let mut settings = vec![("MODULE_SERVICES", services.as_str())];
    settings.extend_from_slice(env);
    OrchestratorProcess::start(&settings)
}

async fn echo(orchestrator: &OrchestratorProcess, module: &str) -> Value {
    let call = json!({
        "tool_name": format!("{module}.echo"),
        "arguments": {"text": "over TLS"},
        "user_id": "u1",
        "user_permission": "user"
    });
    orchestrator.execute(call).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_and_an_mcp_server_behind_a_private_ca_are_called_with_tls_extra_roots() {
    let ca = TestCa::new("Cluster CA");
    let (module, calls) = sdk_module("secure");
    let server = ModuleServer::sdk(module);
    let proxy = TlsProxy::start(&ca, server.port);
    let dir = tempfile::tempdir().unwrap();
    let roots = ca.write_pem(dir.path(), "cluster-ca.pem");
    let orchestrator = orchestrator_for(&proxy, &[("TLS_EXTRA_ROOTS", roots.to_str().unwrap())]);

    for name in NAMES {
        let status = orchestrator.wait_for_module(name, "up", Duration::from_secs(20)).await;
        assert_eq!(status["tool_count"], 2, "{status}");
        let answer = echo(&orchestrator, name).await;
        assert_eq!(answer["success"], true, "{name}: {answer}");
        assert_eq!(answer["result"]["text"], "over TLS", "{name}: {answer}");
    }
    assert_eq!(calls.count(), 2, "both calls reached the module, through TLS");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tls_extra_roots_a_private_ca_is_a_certificate_error() {
    let ca = TestCa::new("Cluster CA");
    let (module, calls) = sdk_module("secure");
    let server = ModuleServer::sdk(module);
    let proxy = TlsProxy::start(&ca, server.port);
    let orchestrator = orchestrator_for(&proxy, &[]);

    for name in NAMES {
        let status = orchestrator.wait_for_module(name, "down", Duration::from_secs(20)).await;
        let error = status["last_error"].as_str().unwrap();
        assert!(error.contains("certificate"), "{name}: the error names the certificate: {status}");
    }
    assert_eq!(calls.count(), 0);
}

/// `orchestrator serve` with `TLS_EXTRA_ROOTS=path`: its exit code and
/// standard error. It must stop by itself before it listens; one still
/// running after [`STOP_WITHIN`] is killed and fails the test.
fn start_with_roots(path: &Path) -> (Option<i32>, String) {
    let mut child = Command::new(BINARY)
        .arg("serve")
        .env_clear()
        .env("HOST", "127.0.0.1")
        .env("PORT", "0")
        .env("TLS_EXTRA_ROOTS", path)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + STOP_WITHIN;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("the orchestrator started with TLS_EXTRA_ROOTS={}", path.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    (status.code(), stderr)
}

/// How long a start-up refused for its settings may take at most (it takes
/// milliseconds; the margin is for a loaded machine).
const STOP_WITHIN: Duration = Duration::from_secs(30);

#[test]
fn a_tls_extra_roots_file_that_cannot_be_used_stops_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let cases = [
        (dir.path().join("missing.pem"), "cannot read"),
        (write("empty.pem", ""), "no PEM certificate"),
        (write("garbage.pem", "not a certificate at all\n"), "no PEM certificate"),
        (write("key.pem", &KeyPair::generate().unwrap().serialize_pem()), "no PEM certificate"),
        (write("bad-base64.pem", "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n"), "not PEM"),
        (write("not-x509.pem", "-----BEGIN CERTIFICATE-----\naGVsbG8=\n-----END CERTIFICATE-----\n"), "certificate 1"),
    ];
    for (path, says) in cases {
        let (code, stderr) = start_with_roots(&path);
        assert_eq!(code, Some(2), "{}: {stderr}", path.display());
        assert!(stderr.contains("TLS_EXTRA_ROOTS"), "names the setting: {stderr}");
        assert!(stderr.contains(path.to_str().unwrap()), "names the file: {stderr}");
        assert!(stderr.contains(says), "{}: says `{says}`: {stderr}", path.display());
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}
