//! One run of the whole suite against one module, in the order a person
//! would check it by hand: reachable, documented, guarded, described, working.

use serde::Serialize;
use serde_json::Value;

use crate::budget::Budgets;
use crate::check::{Check, CheckResult, Findings, Level, Status};
use crate::checks::execute::check_execute;
use crate::checks::{auth, endpoints, manifest, parameters, providers, schemas, tools_of};
use crate::client::ModuleClient;

/// What the suite needs besides the module's URL.
#[derive(Debug, Clone)]
pub struct SuiteOptions {
    /// The module's service token; enables the auth checks.
    pub token: Option<String>,
    /// Leave tools annotated `destructive` alone.
    pub read_only: bool,
    /// The `user_id` sent with every tool call.
    pub user_id: String,
    /// The URL put into URL-like arguments (`format: uri`, properties named
    /// `url`); a page the module may fetch.
    pub sample_url: String,
    /// How much of the contract the module is held to: at [`Level::Base`]
    /// what only the full contract asks is a warning, not a failure.
    pub level: Level,
    /// What the run may spend on the module (bytes read, ...).
    pub budgets: Budgets,
}

/// Why the suite could not run against a module at all.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    /// Nothing answered at the URL.
    #[error("{url}: nothing answers there ({reason}); start the module or fix --url")]
    Unreachable {
        /// The module's URL.
        url: String,
        /// What the connection attempt said.
        reason: String,
    },
    /// The HTTP client could not be set up.
    #[error("cannot set up an HTTP client: {0}")]
    Client(#[from] reqwest::Error),
}

/// Every check's outcome for one module.
#[derive(Debug, Clone, Serialize)]
pub struct ModuleReport {
    /// The URL the module was checked at.
    pub url: String,
    /// The module's name, when its manifest said.
    pub module_name: Option<String>,
    /// The level the module was checked at.
    pub level: Level,
    /// One result per check, in [`Check::ALL`] order.
    pub results: Vec<CheckResult>,
}

impl ModuleReport {
    /// Whether no check failed (warnings do not count).
    pub fn passed(&self) -> bool {
        self.results.iter().all(|r| r.status != Status::Failed)
    }

    /// The results that failed.
    pub fn failures(&self) -> impl Iterator<Item = &CheckResult> {
        self.results.iter().filter(|r| r.status == Status::Failed)
    }

    /// The results that warned: what only a higher level than the run's requires.
    pub fn warnings(&self) -> impl Iterator<Item = &CheckResult> {
        self.results.iter().filter(|r| r.status == Status::Warned)
    }
}

/// Runs every check against the module at `url`.
pub async fn check_module(url: &str, options: &SuiteOptions) -> Result<ModuleReport, SuiteError> {
    let client = ModuleClient::new(url, options.token.clone(), options.budgets)?;
    let mut findings = Findings::default();
    endpoints::check_health(&client, &mut findings)
        .await
        .map_err(|failure| SuiteError::Unreachable { url: client.base().to_owned(), reason: failure.to_string() })?;
    endpoints::check_openapi(&client, &mut findings).await;
    auth::check_auth(&client, &mut findings).await;
    let manifest = manifest::fetch(&client, &mut findings).await;
    let module_name = manifest.as_ref().and_then(|m| m.get("module_name")).and_then(Value::as_str).map(str::to_owned);
    if let Some(manifest) = &manifest {
        manifest::check_manifest(manifest, &mut findings);
        let tools = tools_of(manifest);
        schemas::check_schemas(&tools, &mut findings);
        parameters::check_parameters(&tools, &mut findings);
        providers::check_providers(&tools, &mut findings);
        check_execute(&client, module_name.as_deref(), &tools, options, &mut findings).await;
    }
    findings.ran(Check::NoServerErrors);
    for incident in client.incidents() {
        findings.fail(Check::NoServerErrors, incident);
    }
    Ok(ModuleReport {
        url: client.base().to_owned(),
        module_name,
        level: options.level,
        results: findings
            .into_results(options.level, "not run: the manifest could not be read (see manifest.available)"),
    })
}
