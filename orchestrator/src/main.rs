//! The `orchestrator` command: serve the HTTP API, or list tools, show
//! module states and call one tool from the terminal.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use module_sdk::contract::ToolResult;
use orchestrator::execute::{CallArguments, ExecuteRequest};
use orchestrator::identity::Identity;
use orchestrator::identity::keys::{MIN_KEY_LENGTH, generate_key, hash_text};
use orchestrator::identity::revocations::{REVOKED_KEYS, RevocationError};
use orchestrator::providers::ToolFormat;
use orchestrator::registry::ModuleStatus;
use orchestrator::{Caller, CallerFields, Config, Orchestrator};
use serde_json::{Map, Value};

/// The process's allocator: mimalloc (Microsoft's, a well-kept crate over
/// its C library) instead of glibc's malloc, which callgrind put at ~18 000
/// of a routed call's ~89 000 instructions (small allocations freed on
/// another thread, arena consolidation). Built without transparent huge
/// pages (`no_thp`): they made the hostile-input test's peak RSS 93-115
/// instead of 66-68 MiB, for no routing throughput measurably gained. Its
/// v2 line (`v2`): v3 spent ~600 more instructions a routed call, mostly in
/// the generic path of aligned allocation.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Finds tool modules, lists each caller's tools and routes their calls.
///
/// Settings come from the TOML file given with --config and from the
/// environment (MODULE_SERVICES, REDIS_URL, PORT, ...), the environment winning.
#[derive(Debug, Parser)]
#[command(version)]
struct Cli {
    /// A TOML file of settings (keys are the lower-case variable names).
    #[arg(long, global = true, env = "ORCHESTRATOR_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the HTTP API until Ctrl-C or SIGTERM.
    Serve,
    /// Probe a running orchestrator's /health on HOST:PORT; exit 0 when healthy
    /// (for container healthchecks: scratch images have no curl).
    Healthcheck,
    /// Discover the modules once and print the tools a caller may use.
    Tools {
        /// The caller's permission: guest, user, admin or owner.
        #[arg(long, default_value = "guest")]
        permission: String,
        /// Comma-separated modules the caller may use (default: all).
        #[arg(long)]
        modules: Option<String>,
        /// raw, openai, openai-responses, anthropic, gemini, gemini-json-schema or prompt.
        #[arg(long, default_value = "raw")]
        format: ToolFormatArg,
    },
    /// Discover the modules once and print each one's state.
    Modules,
    /// Print the hash of an API key for `[[api_keys]]`: of the key read from
    /// standard input (one line), or of a new random key printed with it.
    HashKey {
        /// Make a new random key and print it with its hash.
        #[arg(long)]
        generate: bool,
    },
    /// Revoke the API key KEY_ID on every orchestrator sharing REDIS_URL
    /// (refused within REVOCATION_REFRESH_SECONDS, without a restart).
    RevokeKey {
        /// The key's `id` in `[[api_keys]]`.
        key_id: String,
    },
    /// Undo `revoke-key`: the key KEY_ID works again on every orchestrator
    /// sharing REDIS_URL.
    RestoreKey {
        /// The key's `id` in `[[api_keys]]`.
        key_id: String,
    },
    /// Discover the tool's module and execute one call, printing the ToolResult
    /// (as a trusted local caller: the command line needs no key).
    Call {
        /// The tool, `module.tool`.
        tool_name: String,
        /// The arguments, one JSON object.
        #[arg(long, default_value = "{}")]
        args: String,
        /// The user the call is made for.
        #[arg(long)]
        user_id: Option<String>,
        /// The caller's permission: guest, user, admin or owner.
        #[arg(long, default_value = "guest")]
        permission: String,
        /// The user approved the call (for tools that require approval).
        #[arg(long)]
        approved: bool,
    },
}

/// A `--format` value, checked by the provider module's own parser.
#[derive(Debug, Clone, Copy)]
struct ToolFormatArg(ToolFormat);

impl std::str::FromStr for ToolFormatArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse().map(Self).map_err(|e: orchestrator::providers::ProviderError| e.to_string())
    }
}

fn main() -> ExitCode {
    // As a container's PID 1, this process only reaps orphans (see its module).
    orchestrator::init::supervise_if_pid_1().unwrap_or_else(run)
}

/// Runs the command line.
#[tokio::main]
async fn run() -> ExitCode {
    // reqwest 0.13 is built with rustls but no crypto provider: a client made
    // without the orchestrator's configuration (src/tls.rs) would panic. Ring,
    // the provider of that configuration, is made the process's default.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    let config = match Config::load(cli.config.as_deref()) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("orchestrator: {error}");
            return ExitCode::from(2);
        }
    };
    if matches!(cli.command, Command::Serve) {
        module_sdk::service::init_logging(config.log_format, module_sdk::service::LogOutput::Stdout);
    } else {
        // Keep stdout for the answer; only problems go to stderr.
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    }
    let health_address = module_sdk::service::local_address(config.host, config.port);
    let orchestrator = match Orchestrator::new(config) {
        Ok(orchestrator) => orchestrator,
        Err(error) => {
            eprintln!("orchestrator: {error}");
            return ExitCode::from(2);
        }
    };
    match cli.command {
        Command::HashKey { generate } => hash_key(generate),
        Command::RevokeKey { key_id } => change_revocation(&orchestrator, &key_id, true).await,
        Command::RestoreKey { key_id } => change_revocation(&orchestrator, &key_id, false).await,
        Command::Healthcheck => match module_sdk::service::probe_health(health_address) {
            Ok(()) => ExitCode::SUCCESS,
            Err(reason) => {
                eprintln!("orchestrator: unhealthy: {reason}");
                ExitCode::FAILURE
            }
        },
        Command::Serve => match orchestrator::serve(orchestrator).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("orchestrator: {error}");
                ExitCode::FAILURE
            }
        },
        Command::Tools { permission, modules, format } => {
            orchestrator.registry.load_cached().await;
            orchestrator.registry.discover_all().await;
            let caller = Caller::new(Some(&permission), modules.as_deref().map(Caller::parse_modules));
            print_json(&orchestrator.render_tools(&caller, format.0));
            ExitCode::SUCCESS
        }
        Command::Modules => {
            orchestrator.registry.load_cached().await;
            orchestrator.registry.discover_all().await;
            print_modules(&orchestrator.registry.statuses());
            ExitCode::SUCCESS
        }
        Command::Call { tool_name, args, user_id, permission, approved } => {
            let arguments = match serde_json::from_str::<Map<String, Value>>(&args) {
                Ok(arguments) => arguments,
                Err(error) => {
                    eprintln!("orchestrator: --args must be one JSON object: {error}");
                    return ExitCode::from(2);
                }
            };
            orchestrator.registry.load_cached().await;
            if let Some((module, _)) = tool_name.split_once('.') {
                // An unconfigured module is reported by the call itself.
                let _ = orchestrator.registry.discover(module).await;
            }
            let caller = CallerFields { user_id, user_permission: Some(permission), modules: None };
            let request = ExecuteRequest { tool_name, arguments: CallArguments::Tree(arguments), caller, approved };
            let result: ToolResult = match orchestrator.execute(&Identity::development(), request).await {
                Ok(result) => result,
                Err(error) => {
                    eprintln!("orchestrator: {error}");
                    return ExitCode::from(2);
                }
            };
            print_json(&serde_json::to_value(&result).expect("a ToolResult always serializes"));
            if result.success { ExitCode::SUCCESS } else { ExitCode::FAILURE }
        }
    }
}

/// `hash-key`: the hash of a new key, or of the key on standard input.
fn hash_key(generate: bool) -> ExitCode {
    if generate {
        let key = generate_key();
        println!("key:  {key}\nhash: {}", hash_text(&key));
        return ExitCode::SUCCESS;
    }
    let mut line = String::new();
    if let Err(error) = std::io::stdin().read_line(&mut line) {
        eprintln!("orchestrator: cannot read the key from standard input: {error}");
        return ExitCode::from(2);
    }
    let key = line.trim();
    if key.len() < MIN_KEY_LENGTH {
        eprintln!(
            "orchestrator: a key must be at least {MIN_KEY_LENGTH} characters of random data (a short key's hash can be \
             guessed back); use `orchestrator hash-key --generate` for a new one"
        );
        return ExitCode::from(2);
    }
    println!("{}", hash_text(key));
    ExitCode::SUCCESS
}

/// `revoke-key` (`revoke`) or `restore-key`: the key id, one of the
/// configuration's keys, added to or removed from the revoked keys in REDIS_URL.
async fn change_revocation(orchestrator: &Orchestrator, key_id: &str, revoke: bool) -> ExitCode {
    let key_id = key_id.trim();
    if key_id.is_empty() {
        eprintln!("orchestrator: name the key by its `id` in [[api_keys]]");
        return ExitCode::from(2);
    }
    let identities = &orchestrator.identities;
    if identities.key(key_id).is_none() {
        eprintln!(
            "orchestrator: `{key_id}` is not the id of an API key of this configuration: run the command with the \
             orchestrators' [[api_keys]] (the same --config or API_KEYS_FILE), and check the id"
        );
        return ExitCode::from(2);
    }
    match (identities.set_revoked(key_id, revoke).await, revoke) {
        (Ok(true), true) => println!("revoked API key `{key_id}` (added to {REVOKED_KEYS})"),
        (Ok(false), true) => println!("API key `{key_id}` was already revoked"),
        (Ok(true), false) => println!("restored API key `{key_id}` (removed from {REVOKED_KEYS})"),
        (Ok(false), false) => println!("API key `{key_id}` was not revoked"),
        (Err(error @ RevocationError::NotShared), _) => {
            eprintln!("orchestrator: {error}");
            return ExitCode::from(2);
        }
        (Err(error), _) => {
            eprintln!("orchestrator: {error}");
            return ExitCode::FAILURE;
        }
    }
    println!(
        "every orchestrator on this Redis applies it within REVOCATION_REFRESH_SECONDS ({} s here)",
        orchestrator.config.identities.revocation_refresh.as_secs_f64()
    );
    ExitCode::SUCCESS
}

fn print_json(value: &Value) {
    println!("{}", serde_json::to_string_pretty(value).expect("JSON values always serialize"));
}

/// One line per module: name, state, tool count, URL, last success, last error.
fn print_modules(statuses: &[ModuleStatus]) {
    let width = statuses.iter().map(|s| s.name.len()).max().unwrap_or(4).max(4);
    println!("{:width$}  {:6}  {:>5}  {:30}  {:20}  LAST ERROR", "NAME", "STATE", "TOOLS", "URL", "LAST SUCCESS");
    for status in statuses {
        let state = serde_json::to_value(status.state).expect("a state always serializes");
        println!(
            "{:width$}  {:6}  {:>5}  {:30}  {:20}  {}",
            status.name,
            state.as_str().unwrap_or_default(),
            status.tool_count,
            status.url.as_deref().unwrap_or("-"),
            status.last_success.as_deref().unwrap_or("-"),
            status.last_error.as_deref().unwrap_or("-"),
        );
    }
}
