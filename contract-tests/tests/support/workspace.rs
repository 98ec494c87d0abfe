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
    command
}

/// Runs `cargo build <args> --message-format=json` and returns every
/// executable it produced, by target name.
pub fn build(args: &[&str]) -> Vec<(String, PathBuf)> {
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
        .filter(|m| m["reason"] == "compiler-artifact")
        .filter_map(|m| {
            Some((m.pointer("/target/name")?.as_str()?.to_owned(), PathBuf::from(m["executable"].as_str()?)))
        })
        .collect()
}

/// The packages under `modules/` that have a binary target, from `cargo
/// metadata`; only those named in `CONTRACT_TESTS_MODULES` (comma-separated)
/// when it is set, to check one module while working on it.
pub fn module_packages() -> Vec<String> {
    let only: Option<Vec<String>> = std::env::var("CONTRACT_TESTS_MODULES")
        .ok()
        .map(|names| names.split(',').map(|name| name.trim().to_owned()).filter(|name| !name.is_empty()).collect());
    let output = cargo().args(["metadata", "--format-version", "1", "--no-deps"]).output().unwrap();
    assert!(output.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&output.stderr));
    let metadata: Value = serde_json::from_slice(&output.stdout).unwrap();
    let modules_dir = root().join("modules");
    let mut names: Vec<String> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["manifest_path"].as_str().is_some_and(|path| Path::new(path).starts_with(&modules_dir)))
        .filter(|p| {
            p["targets"].as_array().unwrap().iter().any(|t| t["kind"].as_array().unwrap().iter().any(|k| k == "bin"))
        })
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .filter(|name| only.as_ref().is_none_or(|only| only.contains(name)))
        .collect();
    names.sort();
    names
}

/// Every binary of every module package, built; plus the SDK's demo example.
pub fn module_binaries() -> Vec<(String, PathBuf)> {
    let packages = module_packages();
    let mut args: Vec<&str> = Vec::new();
    for package in &packages {
        args.extend(["-p", package.as_str()]);
    }
    let mut binaries = if packages.is_empty() { Vec::new() } else { build(&[args, vec!["--bins"]].concat()) };
    binaries.extend(build(&["-p", "module-sdk", "--example", "demo"]));
    binaries
}
