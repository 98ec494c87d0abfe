//! Every binary crate under `modules/`, and the SDK's demo module, passes the
//! whole suite: each is built through cargo, started on a free port with its
//! own temporary directories, a service token and a local web fixture
//! (SearxNG answers and a page to fetch), then checked.

#[path = "fixtures/web.rs"]
mod web;
#[path = "support/workspace.rs"]
mod workspace;

use std::process::Command;

use contract_tests::{Check, RunReport, Status, SuiteOptions, check_module};
use test_support::Process;

const TOKEN: &str = "workspace-modules-token";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_workspace_module_passes_the_whole_suite() {
    let packages = workspace::module_packages();
    let binaries = tokio::task::spawn_blocking(workspace::module_binaries).await.unwrap();
    for package in &packages {
        assert!(
            binaries.iter().any(|(name, _)| name == package),
            "no binary was built for modules/{package}: {binaries:?}"
        );
    }
    let web = web::serve().await;
    let mut failures = Vec::new();
    for (name, executable) in &binaries {
        let dir = tempfile::tempdir().unwrap();
        let files = dir.path().join("files");
        std::fs::create_dir(&files).unwrap();
        let mut command = Command::new(executable);
        // Each module runs in its own directory, so relative defaults
        // (`./data/...`) land in it; the settings below cover every
        // sample module's storage, and the skills module's sample skills.
        command
            .current_dir(dir.path())
            .env("SERVICE_AUTH_TOKEN", TOKEN)
            .env("NOTES_DB", dir.path().join("notes.db"))
            .env("SCHEDULER_DB", dir.path().join("scheduler.db"))
            .env("SKILLS_DIR", workspace::root().join("modules/skills/examples"))
            .env("FILES_ROOT", &files)
            .env("SEARXNG_URL", &web.url)
            .env("FETCH_ALLOW_NETWORKS", "127.0.0.1")
            .env("RUST_LOG", "warn");
        let running = Process::start(command);
        let options = SuiteOptions {
            token: Some(TOKEN.to_owned()),
            read_only: false,
            user_id: "contract-tests-user".to_owned(),
            sample_url: web.page_url(),
            level: contract_tests::Level::Full,
            budgets: contract_tests::Budgets::default(),
        };
        let report = check_module(&running.url(), &options).await.unwrap();
        let text = RunReport::new(vec![report.clone()]).to_text();
        println!("{name}:\n{text}");
        let exercised = [Check::AuthMissingToken, Check::ManifestBaseFields, Check::ValidArguments, Check::UnknownTool];
        let not_run: Vec<&str> = report
            .results
            .iter()
            .filter(|r| exercised.contains(&r.check) && r.status != Status::Passed)
            .map(|r| r.check.name())
            .collect();
        if !report.passed() || !not_run.is_empty() {
            failures.push(format!(
                "{name} (not passed: {not_run:?}):\n{text}\n{name}'s output:\n{}",
                running.logs().join("\n")
            ));
        }
    }
    assert!(failures.is_empty(), "modules that break the contract:\n{}", failures.join("\n"));
}
