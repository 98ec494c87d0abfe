//! Checks any tool module, in any language, against the module contract
//! (`CONTRACT.md`): the manifest and its schemas, provider convertibility,
//! and the behaviour of `POST /execute` driven by each tool's own schema.
//!
//! Every check has a stable name ([`Check::name`], e.g.
//! `manifest.tool_names_prefixed`) so a failure can be reported and found
//! by it, and a [`Level`]: a run at `base` holds a module only to what
//! existing orchestrators of the format rely on, and reports what the full
//! contract asks beyond that as warnings. [`check_module`] runs the whole
//! suite against one module's URL:
//!
//! ```no_run
//! # async fn run() -> Result<(), contract_tests::SuiteError> {
//! use contract_tests::{Level, SuiteOptions, check_module};
//! let options = SuiteOptions {
//!     token: None,
//!     read_only: false,
//!     user_id: "ci".into(),
//!     sample_url: contract_tests::generate::DEFAULT_SAMPLE_URL.into(),
//!     level: Level::Base,
//!     budgets: contract_tests::Budgets::default(),
//! };
//! let report = check_module("http://127.0.0.1:8000", &options).await?;
//! for failure in report.failures() {
//!     println!("{}: {}", failure.check.name(), failure.reason);
//! }
//! for warned in report.warnings() {
//!     println!("warning {}: {}", warned.check.name(), warned.reason);
//! }
//! # Ok(()) }
//! ```

pub mod budget;
pub mod check;
pub mod checks;
pub mod client;
pub mod generate;
pub mod junit;
pub mod mutate;
pub mod report;
pub mod schema_types;
pub mod suite;

pub use budget::Budgets;
pub use check::{Check, CheckResult, Level, Status};
pub use report::RunReport;
pub use suite::{ModuleReport, SuiteError, SuiteOptions, check_module};
