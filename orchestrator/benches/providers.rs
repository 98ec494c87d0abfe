//! Listing and converting 1,000 tools from 50 modules for one caller, in
//! every format: cold (every schema compiled for the request) against
//! cached (converted definitions memoized per format and tool in a
//! `ConvertedCache`, as values or as JSON text), side by side in one run;
//! then the orchestrator's own `GET /tools` answer for the same 1,000 tools
//! served by 50 module servers (`Orchestrator::render_tools_json`: the
//! registry's snapshot, the converted definitions and the listing cache):
//! cold (a fresh orchestrator's first listing in each format: every tool
//! converted, on `LISTING_THREADS` threads and on one), after a change (the first listing once one module's manifest
//! changed: a new snapshot generation, that module's 20 tools converted
//! again) and cached (a repeated listing).
//!
//! Run with `cargo bench -p orchestrator --bench providers`.

// The argument types exist for the schemas derived from them.
#![allow(dead_code)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use axum::routing::get;
use axum::{Json, Router};

use common::ModuleServer;
use module_sdk::Permission;
use module_sdk::contract::{ModuleManifest, ToolDefinition};
use module_sdk::schema::{parameters_of, schema_for};
use orchestrator::providers::{ConvertedCache, Listed, ToolFormat, render_tools};
use orchestrator::{Caller, Config, Orchestrator};
use schemars::JsonSchema;
use serde::Deserialize;
use test_support::samples::PlanTrip;

/// The orchestrator binary's allocator (src/main.rs), so that the figures are the binary's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const MODULES: usize = 50;
const TOOLS_PER_MODULE: usize = 20;

/// A search tool's arguments.
#[derive(Deserialize, JsonSchema)]
struct Search {
    /// What to search for.
    query: String,
    /// How many results to return (1-20).
    #[serde(default = "five")]
    #[schemars(range(min = 1, max = 20))]
    max_results: u8,
    /// Only results newer than this many days.
    max_age_days: Option<u32>,
    /// Which kind of results.
    #[serde(default)]
    kind: Kind,
}

fn five() -> u8 {
    5
}

/// Kinds of results.
#[derive(Deserialize, JsonSchema, Default)]
#[serde(rename_all = "lowercase")]
enum Kind {
    /// Anything.
    #[default]
    All,
    /// News only.
    News,
    /// Images only.
    Images,
}

/// A file edit's arguments: tagged unions, maps and recursion.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
struct Edit {
    /// The file.
    file_path: String,
    /// What to do.
    operation: Operation,
    /// Metadata to set.
    metadata: HashMap<String, String>,
    /// The directory tree to create.
    tree: Option<Dir>,
}

/// An edit operation.
#[derive(Deserialize, JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Operation {
    /// Replace a range of lines.
    Replace {
        /// First line.
        from: u32,
        /// Last line.
        to: u32,
        /// The new text.
        text: String,
    },
    /// Append text.
    Append {
        /// The text.
        text: String,
    },
    /// Delete the file.
    Delete,
}

/// A directory and what it holds.
#[derive(Deserialize, JsonSchema)]
struct Dir {
    /// Its name.
    name: String,
    /// Subdirectories.
    children: Vec<Dir>,
}

/// 50 manifests of 20 tools, the schemas cycling through the types above.
fn manifests() -> Vec<ModuleManifest> {
    let schemas = [schema_for::<Search>(), schema_for::<PlanTrip>(), schema_for::<Edit>()];
    let permissions = [Permission::Guest, Permission::User, Permission::Guest, Permission::Admin];
    (0..MODULES)
        .map(|m| {
            let module_name = format!("module_{m:02}");
            let tools = (0..TOOLS_PER_MODULE)
                .map(|t| {
                    let schema = schemas[(m + t) % schemas.len()].clone();
                    ToolDefinition {
                        name: format!("{module_name}.tool_{t:02}"),
                        description: format!("Tool {t} of module {m}: does one careful thing with its arguments."),
                        parameters: parameters_of(&schema),
                        required_permission: permissions[t % permissions.len()],
                        input_schema: Some(schema),
                        output_schema: None,
                        annotations: None,
                        requires_approval: None,
                        timeout_seconds: None,
                        risk_level: None,
                    }
                })
                .collect();
            ModuleManifest {
                module_name,
                description: "A module.".into(),
                tools,
                version: None,
                contract_version: None,
            }
        })
        .collect()
}

/// The caller's tools: every tool its permission allows, borrowed from the
/// shared manifests as the registry's snapshot lists them.
fn list(manifests: &[Arc<ModuleManifest>], caller: Permission) -> Vec<Listed<'_>> {
    manifests
        .iter()
        .flat_map(|manifest| (0..manifest.tools.len()).filter_map(|index| Listed::from_manifest(manifest, index)))
        .filter(|listed| caller.allows(listed.tool.required_permission))
        .collect()
}

/// The median of `runs` timings of `f`.
fn median(runs: usize, mut f: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort_unstable();
    times[runs / 2]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

fn main() {
    let manifests: Vec<Arc<ModuleManifest>> = manifests().into_iter().map(Arc::new).collect();
    let caller = Permission::Owner;
    let tools = list(&manifests, caller);
    let definitions: Vec<&ToolDefinition> = tools.iter().map(|listed| listed.tool).collect();
    let listing = median(31, || {
        black_box(list(&manifests, caller));
    });
    println!("{} tools from {MODULES} modules for one caller; median of runs, in ms", tools.len());
    println!("listing (permission filter, definitions borrowed): {:.2}", ms(listing));
    println!(
        "{:<19} {:>12} {:>14} {:>7} {:>10} {:>11} {:>13} {:>7} {:>12} {:>7}",
        "format",
        "convert cold",
        "convert cached",
        "ratio",
        "serialize",
        "total cold",
        "total cached",
        "ratio",
        "cached text",
        "ratio"
    );
    println!("(total = listing + convert + serialize; cached text = listing + ConvertedCache::render_tools_json)");
    let cache = ConvertedCache::new();
    for format in ToolFormat::ALL {
        let cold = median(11, || {
            black_box(render_tools(format, &definitions));
        });
        let answer = cache.render_tools(format, &tools);
        assert_eq!(answer, render_tools(format, &definitions), "cached and cold answers agree");
        let cached = median(31, || {
            black_box(cache.render_tools(format, &tools));
        });
        let serialize = median(31, || {
            black_box(serde_json::to_vec(&answer).unwrap());
        });
        let text = median(31, || {
            black_box(cache.render_tools_json(format, &tools));
        });
        let (total_cold, total_cached, total_text) =
            (listing + cold + serialize, listing + cached + serialize, listing + text);
        println!(
            "{:<19} {:>12.2} {:>14.2} {:>6.1}x {:>10.2} {:>11.2} {:>13.2} {:>6.1}x {:>12.2} {:>6.1}x",
            format.as_str(),
            ms(cold),
            ms(cached),
            ratio(cold, cached),
            ms(serialize),
            ms(total_cold),
            ms(total_cached),
            ratio(total_cold, total_cached),
            ms(total_text),
            ratio(total_cold, total_text),
        );
    }
    let manifests: Vec<ModuleManifest> = manifests.iter().map(|manifest| ModuleManifest::clone(manifest)).collect();
    orchestrator_listing(&manifests);
}

/// A module server whose manifest the benchmark can change.
fn changeable_module(manifest: Arc<RwLock<serde_json::Value>>) -> Router {
    Router::new().route(
        "/manifest",
        get(move || std::future::ready(Json(manifest.read().unwrap_or_else(|e| e.into_inner()).clone()))),
    )
}

/// The orchestrator's whole listing of the 1,000 tools, served by 50 module
/// servers: a fresh orchestrator's first answer in each format (cold: nothing
/// converted or cached yet), the first answer after one module's manifest
/// changed (every tool of that module described anew) and a repeated one
/// (cached), in microseconds.
fn orchestrator_listing(manifests: &[ModuleManifest]) {
    const ROUNDS: usize = 5;
    let served: Vec<Arc<RwLock<serde_json::Value>>> =
        manifests.iter().map(|m| Arc::new(RwLock::new(serde_json::to_value(m).unwrap()))).collect();
    let servers: Vec<ModuleServer> =
        served.iter().map(|manifest| ModuleServer::start(changeable_module(Arc::clone(manifest)))).collect();
    let config = Config {
        module_services: manifests.iter().zip(&servers).map(|(m, s)| (m.module_name.clone(), s.url())).collect(),
        ..Config::default()
    };
    let caller = Caller::new(Some("owner"), None);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let mut cold: HashMap<ToolFormat, Vec<Duration>> = HashMap::new();
    let mut cold_one_thread: HashMap<ToolFormat, Vec<Duration>> = HashMap::new();
    let threads = config.budgets.listing_threads;
    let mut one_thread = config.clone();
    one_thread.budgets.listing_threads = 1;
    let mut changed: HashMap<ToolFormat, Vec<Duration>> = HashMap::new();
    let mut cached = HashMap::new();
    let mut digests = HashMap::new();
    let changing = &manifests[0].module_name;
    for round in 0..ROUNDS {
        // The same first answers converted on the request's thread alone (LISTING_THREADS=1).
        let orchestrator = Orchestrator::new(one_thread.clone()).unwrap();
        runtime.block_on(orchestrator.registry.discover_all());
        for format in ToolFormat::ALL {
            let start = Instant::now();
            let answer = orchestrator.render_tools_json(&caller, format);
            cold_one_thread.entry(format).or_default().push(start.elapsed());
            digests.insert(format, digest(&answer));
        }
        let orchestrator = Orchestrator::new(config.clone()).unwrap();
        runtime.block_on(orchestrator.registry.discover_all());
        let listed = orchestrator.registry.snapshot().tools_for(&caller).count();
        assert_eq!(listed, MODULES * TOOLS_PER_MODULE, "every module was discovered");
        for format in ToolFormat::ALL {
            let start = Instant::now();
            let answer = orchestrator.render_tools_json(&caller, format);
            cold.entry(format).or_default().push(start.elapsed());
            assert_eq!(digest(&answer), digests[&format], "one thread or several, the same answer");
            cached.insert(
                format,
                median(1001, || {
                    black_box(orchestrator.render_tools_json(&caller, format));
                }),
            );
        }
        for format in ToolFormat::ALL {
            // One module's manifest changes (every tool described anew): a new generation.
            let generation = orchestrator.registry.snapshot().generation();
            let mut manifest = manifests[0].clone();
            for tool in &mut manifest.tools {
                tool.description = format!("{} (revision {round}, {format})", tool.description);
            }
            *served[0].write().unwrap() = serde_json::to_value(&manifest).unwrap();
            runtime.block_on(orchestrator.registry.discover(changing)).unwrap();
            assert!(orchestrator.registry.snapshot().generation() > generation, "the change was published");
            let start = Instant::now();
            black_box(orchestrator.render_tools_json(&caller, format));
            changed.entry(format).or_default().push(start.elapsed());
        }
        *served[0].write().unwrap() = serde_json::to_value(&manifests[0]).unwrap();
    }
    println!();
    println!(
        "orchestrator GET /tools answer (Orchestrator::render_tools_json) of {} tools from {MODULES} module servers, in µs",
        MODULES * TOOLS_PER_MODULE
    );
    println!(
        "(cold: a fresh orchestrator's first answer, every tool converted on up to LISTING_THREADS={threads} threads, and on one;"
    );
    println!(
        "changed: the first answer after one module's manifest changed, its {TOOLS_PER_MODULE} tools converted again; medians of {ROUNDS};"
    );
    println!("cached: median of 1001; goals: cold <= 10,000, cached <= 50)");
    println!(
        "{:<19} {:>12} {:>14} {:>12} {:>12} {:>18}",
        "format", "cold", "cold 1 thread", "changed", "cached", "answer digest"
    );
    let middle = |times: &mut Vec<Duration>| {
        times.sort_unstable();
        times[times.len() / 2].as_secs_f64() * 1e6
    };
    for format in ToolFormat::ALL {
        println!(
            "{:<19} {:>12.0} {:>14.0} {:>12.0} {:>12.2} {:>18}",
            format.as_str(),
            middle(cold.get_mut(&format).unwrap()),
            middle(cold_one_thread.get_mut(&format).unwrap()),
            middle(changed.get_mut(&format).unwrap()),
            cached[&format].as_secs_f64() * 1e6,
            format!("{:016x}", digests[&format]),
        );
    }
    drop(servers);
}

/// A digest of an answer's bytes (SipHash with fixed keys), printed so two
/// runs can show their answers are byte-identical.
fn digest(bytes: &[u8]) -> u64 {
    use std::hash::{DefaultHasher, Hasher};
    let mut hasher = DefaultHasher::new();
    hasher.write(bytes);
    hasher.finish()
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}
