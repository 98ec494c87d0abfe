//! The workspace's module binaries, found and built through cargo, so a new
//! crate under `modules/` is picked up without editing any test.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The workspace root (the parent of this crate).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn cargo() -> Command {
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command.current_dir(root());
    // `cargo test` gives this test its own package's metadata (CARGO_PKG_*,
    // CARGO_MANIFEST_DIR, ...). Passed on, build scripts that track them
    // (ring's) would see them change and run again, with every crate above
    // them, in this build and in the next top-level one.
    for (name, _) in std::env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        let package_metadata = ["CARGO_PKG_", "CARGO_BIN_"].iter().any(|prefix| name.starts_with(prefix))
            || [
                "CARGO_MANIFEST_DIR",
                "CARGO_MANIFEST_PATH",
                "CARGO_CRATE_NAME",
                "CARGO_PRIMARY_PACKAGE",
                "CARGO_TARGET_TMPDIR",
            ]
            .contains(&name);
        if package_metadata {
            command.env_remove(name);
        }
    }
    command
}

/// One executable `cargo build` produced.
struct Executable {
    /// The target's name (`research`, `demo`).
    name: String,
    /// `bin`, `example`, `test`, ...
    kind: String,
    /// The `Cargo.toml` of the target's package.
    manifest_path: PathBuf,
    /// Where the executable is.
    path: PathBuf,
}

/// Runs `cargo build <args> --message-format=json` and returns every
/// executable it produced or found fresh, except test harnesses (which
/// `--tests` or `--all-targets` would add).
fn build(args: &[&str]) -> Vec<Executable> {
    let output = cargo().arg("build").args(args).arg("--message-format=json").output().unwrap();
    let messages: Vec<Value> =
        String::from_utf8_lossy(&output.stdout).lines().filter_map(|line| serde_json::from_str(line).ok()).collect();
    if !output.status.success() {
        let errors: String = messages
            .iter()
            .filter(|m| m.pointer("/message/level").is_some_and(|level| level == "error"))
            .filter_map(|m| m.pointer("/message/rendered").and_then(Value::as_str))
            .collect();
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().filter(|line| !line.trim_start().starts_with("Compiling")).collect();
        panic!("cargo build {args:?} failed:\n{errors}\n{}", tail.join("\n"));
    }
    messages
        .iter()
        .filter(|m| m["reason"] == "compiler-artifact" && m.pointer("/profile/test") == Some(&Value::Bool(false)))
        .filter_map(|m| {
            Some(Executable {
                name: m.pointer("/target/name")?.as_str()?.to_owned(),
                kind: m.pointer("/target/kind/0")?.as_str()?.to_owned(),
                manifest_path: PathBuf::from(m["manifest_path"].as_str()?),
                path: PathBuf::from(m["executable"].as_str()?),
            })
        })
        .collect()
}

/// The packages under `modules/` that have a binary target, from `cargo
/// metadata`; only those named in `CONTRACT_TESTS_MODULES` (comma-separated)
/// when it is set, to check one module while working on it.
pub fn module_packages() -> Vec<String> {
    module_manifests().into_iter().map(|(name, _)| name).collect()
}

/// [`module_packages`]' names, each with its `Cargo.toml`, sorted by name.
fn module_manifests() -> Vec<(String, PathBuf)> {
    let only: Option<Vec<String>> = std::env::var("CONTRACT_TESTS_MODULES")
        .ok()
        .map(|names| names.split(',').map(|name| name.trim().to_owned()).filter(|name| !name.is_empty()).collect());
    let output = cargo().args(["metadata", "--format-version", "1", "--no-deps"]).output().unwrap();
    assert!(output.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&output.stderr));
    let metadata: Value = serde_json::from_slice(&output.stdout).unwrap();
    let modules_dir = root().join("modules");
    let mut packages: Vec<(String, PathBuf)> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["manifest_path"].as_str().is_some_and(|path| Path::new(path).starts_with(&modules_dir)))
        .filter(|p| {
            p["targets"].as_array().unwrap().iter().any(|t| t["kind"].as_array().unwrap().iter().any(|k| k == "bin"))
        })
        .map(|p| (p["name"].as_str().unwrap().to_owned(), PathBuf::from(p["manifest_path"].as_str().unwrap())))
        .filter(|(name, _)| only.as_ref().is_none_or(|only| only.contains(name)))
        .collect();
    packages.sort();
    packages
}

/// Every binary of every module package, plus the SDK's demo example, from
/// `cargo build --workspace --bins --examples --benches`: exactly the build
/// `scripts/test.sh` runs before the tests, so there nothing compiles again
/// (a build of only these packages unifies features over fewer crates, and
/// compiled rmcp, the SDK and every module a second time; `--all-targets`
/// linked every test executable once more); run alone, it builds what is
/// stale.
pub fn module_binaries() -> Vec<(String, PathBuf)> {
    let manifests: Vec<PathBuf> = module_manifests().into_iter().map(|(_, manifest)| manifest).collect();
    let sdk_manifest = root().join("module-sdk/Cargo.toml");
    build(&["--workspace", "--bins", "--examples", "--benches"])
        .into_iter()
        .filter(|executable| {
            (executable.kind == "bin" && manifests.contains(&executable.manifest_path))
                || (executable.kind == "example"
                    && executable.name == "demo"
                    && executable.manifest_path == sdk_manifest)
        })
        .map(|executable| (executable.name, executable.path))
        .collect()
}
