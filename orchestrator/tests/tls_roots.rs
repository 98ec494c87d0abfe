//! `https://` modules and `mcp+https://` MCP servers behind a private CA,
//! through the real orchestrator binary: an SDK module (its `/manifest`,
//! `/execute` and `/mcp`) behind a TLS proxy whose certificate a CA made
//! at test time signed, configured both as a module and as an MCP server.
//! With `TLS_EXTRA_ROOTS` naming the CA both are discovered and called;
//! without it both are down, saying the certificate is not trusted; with a
//! certificate the CA issued for another host name both are down, saying
//! it is not valid for the name; and a `TLS_EXTRA_ROOTS` that cannot be
//! used stops start-up, naming it.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::modules::sdk_module;
use common::tls::{LOCAL_NAMES, TestCa, TlsProxy};
use common::{BINARY, ModuleServer, OrchestratorProcess};
use rcgen::KeyPair;
use serde_json::{Value, json};
use test_support::Process;

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
    let proxy = TlsProxy::start(&ca, &LOCAL_NAMES, server.port);
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
    let proxy = TlsProxy::start(&ca, &LOCAL_NAMES, server.port);
    let orchestrator = orchestrator_for(&proxy, &[]);

    for name in NAMES {
        let status = orchestrator.wait_for_module(name, "down", Duration::from_secs(20)).await;
        let error = status["last_error"].as_str().unwrap();
        assert!(error.contains("certificate"), "{name}: the error names the certificate: {status}");
    }
    assert_eq!(calls.count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_of_the_extra_ca_for_another_host_name_is_refused_saying_so() {
    let ca = TestCa::new("Cluster CA");
    let (module, calls) = sdk_module("secure");
    let server = ModuleServer::sdk(module);
    let proxy = TlsProxy::start(&ca, &["other.example"], server.port);
    let dir = tempfile::tempdir().unwrap();
    let roots = ca.write_pem(dir.path(), "cluster-ca.pem");
    let orchestrator = orchestrator_for(&proxy, &[("TLS_EXTRA_ROOTS", roots.to_str().unwrap())]);

    for name in NAMES {
        let status = orchestrator.wait_for_module(name, "down", Duration::from_secs(20)).await;
        let error = status["last_error"].as_str().unwrap();
        assert!(error.contains("not valid for name \"127.0.0.1\""), "{name}: the error names the host: {status}");
        assert!(error.contains("other.example"), "{name}: and the certificate's name: {status}");
    }
    assert_eq!(calls.count(), 0);
}

/// The standard error of the orchestrator started with `TLS_EXTRA_ROOTS`
/// at `path` and nothing else, which must stop with exit code 2 (a setting
/// it cannot use).
fn refused_start_with_roots(path: &Path) -> String {
    let mut command = Command::new(BINARY);
    command.arg("serve").env_clear().env("TLS_EXTRA_ROOTS", path);
    Process::start_failing(command, 2)
}

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
        let stderr = refused_start_with_roots(&path);
        assert!(stderr.contains("TLS_EXTRA_ROOTS"), "names the setting: {stderr}");
        assert!(stderr.contains(path.to_str().unwrap()), "names the file: {stderr}");
        assert!(stderr.contains(says), "{}: says `{says}`: {stderr}", path.display());
    }
}
