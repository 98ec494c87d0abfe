//! Whole-process test: in a temporary copy of this workspace, `new-module`
//! scaffolds a module that the workspace picks up, that builds, whose own
//! test passes, and that passes the contract tests, all without an edit.
//!
//! The copy shares this build's target directory, so the dependencies are
//! not compiled again.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use test_support::Process;

/// The name of the module the test scaffolds.
const NAME: &str = "weather";
/// The service token the module is started with; the contract tests also check that calls without it get 401.
const TOKEN: &str = "scaffold-test-token";

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// The target directory this test was built in: `CARGO_TARGET_DIR` (relative to the
/// workspace root), or the directory above `<target>/debug/new-module`.
fn target_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return workspace_root().join(dir);
    }
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_new-module"));
    exe.parent().and_then(Path::parent).expect("the binary sits in <target>/<profile>/").to_owned()
}

/// Copies the workspace's files (tracked, or untracked but not ignored) into `to`.
fn copy_workspace(to: &Path) {
    let root = workspace_root();
    let listed = Command::new("git")
        .args(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
        .current_dir(&root)
        .output()
        .expect("git must be installed to list the workspace's files");
    assert!(listed.status.success(), "git ls-files failed: {}", String::from_utf8_lossy(&listed.stderr));
    let mut copied = 0;
    for relative in listed.stdout.split(|&b| b == 0).filter(|p| !p.is_empty()) {
        let relative = Path::new(std::str::from_utf8(relative).expect("workspace paths are UTF-8"));
        let from = root.join(relative);
        // Deleted but still tracked: not part of the working tree.
        if !from.is_file() {
            continue;
        }
        let dest = to.join(relative);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(&from, &dest).unwrap();
        copied += 1;
    }
    assert!(to.join("Cargo.toml").is_file() && copied > 10, "copied only {copied} files");
}

/// Runs cargo in the copied workspace with the shared target directory.
fn cargo(workspace: &Path, args: &[&str]) -> Output {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    Command::new(cargo)
        .args(args)
        .current_dir(workspace)
        .env("CARGO_TARGET_DIR", target_dir())
        .stdin(Stdio::null())
        .output()
        .expect("cargo runs")
}

fn new_module(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_new-module")).args(args).current_dir(cwd).output().unwrap()
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

#[test]
fn a_scaffolded_module_builds_tests_and_passes_the_contract_tests_unedited() {
    let copy = tempfile::Builder::new().prefix("scaffold-workspace-").tempdir().unwrap();
    let workspace = copy.path();
    copy_workspace(workspace);

    // The root is found by walking up from a subdirectory.
    let made = new_module(&workspace.join("modules"), &[NAME]);
    assert!(made.status.success(), "new-module failed:\n{}", text(&made));
    for file in ["Cargo.toml", "src/main.rs", "README.md", "Containerfile", "kubernetes/kustomization.yaml"] {
        assert!(workspace.join("modules").join(NAME).join(file).is_file(), "{file} was not written");
    }

    // A bad or taken name is refused with a clear message, and nothing is written.
    let root = workspace.to_str().unwrap();
    let bad = new_module(workspace, &["--root", root, "Weather-2"]);
    assert!(!bad.status.success());
    assert!(text(&bad).contains("not a valid module name"), "{}", text(&bad));
    assert!(!workspace.join("modules/Weather-2").exists());
    let taken = new_module(workspace, &["--root", root, NAME]);
    assert!(!taken.status.success());
    assert!(text(&taken).contains("is taken"), "{}", text(&taken));
    let taken = new_module(workspace, &["--root", root, "orchestrator"]);
    assert!(!taken.status.success());
    assert!(text(&taken).contains("is taken"), "{}", text(&taken));

    assert_kubernetes_overlay_renders(workspace);

    // The `modules/*` glob picks it up, its own tests pass, and it builds
    // alongside the contract tests.
    let tested = cargo(workspace, &["test", "--offline", "-p", NAME]);
    assert!(tested.status.success(), "cargo test -p {NAME} failed:\n{}", text(&tested));
    assert!(text(&tested).contains("echo_repeats_the_text ... ok"), "{}", text(&tested));
    let built = cargo(workspace, &["build", "--offline", "-p", NAME, "-p", "contract-tests"]);
    assert!(built.status.success(), "cargo build failed:\n{}", text(&built));

    // The running module, with a service token, passes the contract tests.
    let mut command = Command::new(target_dir().join("debug").join(NAME));
    command.env("SERVICE_AUTH_TOKEN", TOKEN);
    let module = Process::start(command);
    let url = module.url();
    let contract_tests = target_dir().join("debug/contract-tests");
    let checked = Command::new(&contract_tests)
        .args(["--url", &url, "--token", TOKEN])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", contract_tests.display()));
    println!("{}", text(&checked));
    assert!(checked.status.success(), "contract tests failed against {url}:\n{}", text(&checked));
}

/// An overlay of the fleet's base plus the scaffolded module's
/// `kubernetes/` directory (the lines its comment asks for) renders with
/// `kubectl kustomize`: the module's Deployment and Service, in the fleet's
/// namespace, and its URL in MODULE_SERVICES. Without kubectl this fails
/// under `REQUIRE_SERVICES=1` (CI; scripts/check-kubernetes.sh installs it)
/// and is skipped loudly otherwise.
fn assert_kubernetes_overlay_renders(workspace: &Path) {
    if Command::new("kubectl").args(["version", "--client"]).output().is_err() {
        let message = "kubectl is not installed, so the scaffolded module's Kubernetes overlay is not rendered";
        assert!(!test_support::services_required(), "{message} (REQUIRE_SERVICES=1)");
        eprintln!("\n!!! SKIPPED: {message} !!!\n");
        return;
    }
    let overlay = workspace.join("deploy/kubernetes/overlays/with-weather");
    std::fs::create_dir_all(&overlay).unwrap();
    let kustomization = format!(
        r#"apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: tool-modules
resources:
  - ../../base
  - ../../../../modules/{NAME}/kubernetes
configMapGenerator:
  - name: orchestrator-settings
    behavior: merge
    literals:
      - 'MODULE_SERVICES={{"research": "http://research-module:8000", "{NAME}": "http://{NAME}-module:8000"}}'
"#
    );
    std::fs::write(overlay.join("kustomization.yaml"), kustomization).unwrap();
    let rendered = Command::new("kubectl").arg("kustomize").arg(&overlay).output().unwrap();
    assert!(rendered.status.success(), "kubectl kustomize failed:\n{}", text(&rendered));
    let objects = String::from_utf8(rendered.stdout).unwrap();
    for expected in [
        format!("name: {NAME}-module\n  namespace: tool-modules"),
        format!("image: tool-modules/{NAME}:"),
        format!("app.kubernetes.io/name: {NAME}"),
        format!(r#""{NAME}": "http://{NAME}-module:8000""#),
    ] {
        assert!(objects.contains(&expected), "the rendered overlay lacks `{expected}`:\n{objects}");
    }
}
