//! `contract-tests`: checks running modules against the module contract and
//! prints one line per check. Exit status: 0 no check failed (warnings
//! allowed), 1 a check failed, 2 the suite could not run (unreachable
//! module, bad arguments, or the run's time ran out before a module's turn).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use contract_tests::Level;
use contract_tests::budget::{
    Budgets, DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_MAX_RUN, DEFAULT_MAX_TOOLS, DEFAULT_MODULE_MAX_BODY_BYTES,
};
use contract_tests::generate::DEFAULT_SAMPLE_URL;
use contract_tests::junit::to_junit;
use contract_tests::report::RunReport;
use contract_tests::suite::{SuiteOptions, check_module};

/// Check running tool modules, in any language, against the module contract.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    /// Base URL of a module, e.g. http://127.0.0.1:8000 (repeat for several modules).
    #[arg(long = "url", required = true, value_parser = parse_url)]
    urls: Vec<String>,
    /// How much of the contract to require: `base` (what existing orchestrators of the format rely on; the rest
    /// is reported as warnings) or `full` (every extension).
    #[arg(long, value_enum, default_value_t = Level::Full)]
    level: Level,
    /// The modules' service token (SERVICE_AUTH_TOKEN); also checks that calls without it, or with a wrong one,
    /// are refused.
    #[arg(long)]
    token: Option<String>,
    /// Also write a machine-readable report in this format to --out.
    #[arg(long, value_enum, requires = "out")]
    report: Option<ReportFormat>,
    /// Where --report goes.
    #[arg(long, requires = "report")]
    out: Option<PathBuf>,
    /// Do not call tools annotated `destructive`.
    #[arg(long)]
    read_only: bool,
    /// The user_id sent with every tool call (default: a fresh one per run).
    #[arg(long)]
    user_id: Option<String>,
    /// The URL put into URL-like tool arguments: a page your module may fetch.
    #[arg(long, default_value = DEFAULT_SAMPLE_URL, value_parser = parse_url)]
    sample_url: String,
    /// The largest answer read from a module, in bytes; a longer one fails the check that asked for it.
    #[arg(long, default_value_t = DEFAULT_MAX_RESPONSE_BYTES)]
    max_response_bytes: usize,
    /// The most tools of a module that are called, in manifest order; more fail execute.valid_arguments.
    #[arg(long, default_value_t = DEFAULT_MAX_TOOLS)]
    max_tools: usize,
    /// How long the whole run may take, in seconds: a request in flight then is cut off, none is made after.
    #[arg(long, default_value_t = DEFAULT_MAX_RUN.as_secs())]
    max_run_seconds: u64,
    /// The modules' own request body limit in bytes (their MAX_BODY_BYTES): execute.body_too_large sends one byte
    /// more and expects 413.
    #[arg(long, default_value_t = DEFAULT_MODULE_MAX_BODY_BYTES)]
    module_max_body_bytes: usize,
}

/// The machine-readable report formats.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum ReportFormat {
    /// Every check's outcome as JSON.
    Json,
    /// JUnit XML, one test case per check.
    Junit,
}

/// Accepts an absolute http(s) URL.
fn parse_url(text: &str) -> Result<String, String> {
    let url = reqwest::Url::parse(text).map_err(|e| format!("{text:?} is not a URL: {e}"))?;
    match url.scheme() {
        "http" | "https" => Ok(text.to_owned()),
        other => Err(format!("{text:?} uses {other}:, expected http:// or https://")),
    }
}

/// Exit status: could not run.
const COULD_NOT_RUN: u8 = 2;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let options = SuiteOptions {
        token: cli.token,
        read_only: cli.read_only,
        user_id: cli.user_id.unwrap_or_else(|| format!("contract-tests-{}", uuid::Uuid::new_v4())),
        sample_url: cli.sample_url,
        level: cli.level,
        budgets: Budgets {
            max_response_bytes: cli.max_response_bytes,
            max_tools: cli.max_tools,
            max_run: Duration::from_secs(cli.max_run_seconds),
            module_max_body_bytes: cli.module_max_body_bytes,
        },
    };
    let deadline = Instant::now().checked_add(options.budgets.max_run);
    let mut reports = Vec::new();
    let mut could_not_run = false;
    for url in &cli.urls {
        // The run's time is shared: each module gets what the ones before it left.
        let left = deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()));
        if left.is_some_and(|left| left.is_zero()) {
            eprintln!(
                "contract-tests: {url} not checked: the run's time ran out (--max-run-seconds {})",
                cli.max_run_seconds
            );
            could_not_run = true;
            continue;
        }
        let options = SuiteOptions {
            budgets: Budgets { max_run: left.unwrap_or(options.budgets.max_run), ..options.budgets },
            ..options.clone()
        };
        match check_module(url, &options).await {
            Ok(report) => reports.push(report),
            Err(error) => {
                eprintln!("contract-tests: {error}");
                could_not_run = true;
            }
        }
    }
    let run = RunReport::new(reports);
    print!("{}", run.to_text());
    if let (Some(format), Some(path)) = (cli.report, &cli.out) {
        let written = match format {
            ReportFormat::Json => Ok(run.to_json()),
            ReportFormat::Junit => to_junit(&run).map_err(|e| e.to_string()),
        }
        .and_then(|text| std::fs::write(path, text).map_err(|e| e.to_string()));
        if let Err(error) = written {
            eprintln!("contract-tests: cannot write the report to {}: {error}", path.display());
            return ExitCode::from(COULD_NOT_RUN);
        }
    }
    if could_not_run {
        ExitCode::from(COULD_NOT_RUN)
    } else if run.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
