//! Real tool definitions through every provider format: tools built with
//! the SDK from representative Rust argument types (the demo module's and
//! the shapes schemars makes hardest), and the manifests the sample module
//! binaries serve. Every converted definition must pass the rule checker.

// The argument types exist for the schemas derived from them; no handler reads them.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::Command;

use module_sdk::contract::ToolDefinition;
use module_sdk::{Context, Module, ToolError, tool};
use orchestrator::providers::{PROVIDERS, Provider, ToolFormat, render_tools, rules};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use test_support::Process;
use test_support::samples::{Greet, PlanTrip};

/// Arguments with the shapes providers refuse most often.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
struct Awkward {
    /// What to search for.
    #[schemars(length(min = 1, max = 200), url)]
    query_url: String,
    /// How many results (1-20).
    #[serde(default = "five")]
    #[schemars(range(min = 1, max = 20))]
    max_results: u8,
    /// A tree of labels.
    tree: Tree,
    /// A shape, tagged.
    shape: Shape,
    /// An externally tagged enum.
    action: Action,
    /// Counters by name.
    counters: HashMap<String, u32>,
    /// Anything at all.
    extra: Value,
    /// An optional tagged shape.
    maybe_shape: Option<Shape>,
    /// A fixed-size triple.
    triple: (u8, String, bool),
    /// A byte array of three.
    rgb: [u8; 3],
    /// Ordered settings.
    settings: BTreeMap<String, Setting>,
    /// A list of optional numbers.
    sparse: Vec<Option<i64>>,
    /// How long to wait.
    wait: Option<std::time::Duration>,
    /// Strict settings.
    strict: Strict,
    /// A flattened part.
    #[serde(flatten)]
    paging: Paging,
}

fn five() -> u8 {
    5
}

/// A recursive tree.
#[derive(Deserialize, JsonSchema)]
struct Tree {
    /// The label.
    label: String,
    /// The children.
    children: Vec<Tree>,
    /// The parent, if any.
    parent: Option<Box<Tree>>,
}

/// An internally tagged enum.
#[derive(Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Shape {
    /// A circle.
    Circle {
        /// Its radius.
        radius: f64,
    },
    /// A square.
    Square {
        /// Its side.
        side: f32,
    },
}

/// An externally tagged enum with unit, newtype and struct variants.
#[derive(Deserialize, JsonSchema)]
enum Action {
    /// Do nothing.
    Wait,
    /// Say something.
    Say(String),
    /// Move somewhere.
    Move {
        /// East.
        x: i32,
        /// North.
        y: i32,
    },
}

/// An untagged value.
#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
enum Setting {
    /// A flag.
    Flag(bool),
    /// A number.
    Number(f64),
    /// A list of words.
    Words(Vec<String>),
}

/// No unknown fields allowed.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Strict {
    /// A level.
    #[schemars(range(min = 0, max = 10))]
    level: i8,
}

/// Paging, flattened into the arguments.
#[derive(Deserialize, JsonSchema)]
struct Paging {
    /// The page to show.
    page: Option<u32>,
}

/// Anything a tool returns.
#[derive(Serialize, JsonSchema)]
struct Done {
    /// Whether it worked.
    ok: bool,
}

/// Say hello to someone.
#[tool(read_only, idempotent)]
async fn greet(_ctx: Context, _args: Greet) -> Result<Done, ToolError> {
    Ok(Done { ok: true })
}

/// Plan a trip through a list of stops.
#[tool(permission = "user")]
async fn plan_trip(_ctx: Context, _args: PlanTrip) -> Result<Done, ToolError> {
    Ok(Done { ok: true })
}

/// Take every awkward shape of argument at once.
#[tool]
async fn awkward(_ctx: Context, _args: Awkward) -> Result<Done, ToolError> {
    Ok(Done { ok: true })
}

/// The tools of a module built with the SDK from the types above.
fn sdk_tools() -> Vec<ToolDefinition> {
    let module = Module::new("samples", "Sample tools with representative argument types.")
        .tool(greet)
        .tool(plan_trip)
        .tool(awkward);
    module.build().expect("the sample module is valid").manifest().tools.clone()
}

/// Asserts that every definition of `tools` passes every provider's rules.
fn assert_accepted(tools: &[ToolDefinition], origin: &str) {
    for provider in PROVIDERS {
        let rendered = render_tools(provider.format(), tools);
        let violations: Vec<String> = rules::check_all(provider, &rendered).iter().map(ToString::to_string).collect();
        assert!(violations.is_empty(), "{origin}, {provider:?}:\n{}\n{rendered:#}", violations.join("\n"));
        assert_eq!(rendered.as_array().unwrap().len(), tools.len(), "{origin}: no tool is dropped");
    }
    let prompt = render_tools(ToolFormat::Prompt, tools);
    for tool in tools {
        assert!(prompt["prompt"].as_str().unwrap().contains(&format!("### {}\n", tool.name)));
    }
}

#[test]
fn sdk_built_tools_pass_every_provider() {
    assert_accepted(&sdk_tools(), "SDK-built sample tools");
}

#[test]
fn the_conversions_keep_what_the_types_say() {
    let tools = sdk_tools();
    let openai = render_tools(ToolFormat::OpenAiChat, &tools);
    let greet = &openai[0]["function"];
    assert_eq!(greet["name"], "samples__greet");
    assert_eq!(greet["strict"], true);
    assert_eq!(greet["parameters"]["required"], json!(["name", "style", "excitement"]));
    assert_eq!(greet["parameters"]["properties"]["excitement"]["type"], json!(["integer", "null"]));
    assert!(greet["parameters"]["properties"]["excitement"]["description"].as_str().unwrap().contains("default: 0"));
    // Free-form maps and `Value` cannot be strict: the tool is still there, non-strict.
    let awkward = &openai[2]["function"];
    assert_eq!(awkward["strict"], false);

    let gemini = render_tools(ToolFormat::Gemini, &tools);
    let properties = &gemini[2]["parameters"]["properties"];
    let query = &properties["query_url"];
    assert_eq!(query["type"], "string");
    let text = query["description"].as_str().unwrap();
    assert_eq!(text, "What to search for. (format: uri)");
    assert_eq!((query["minLength"].clone(), query["maxLength"].clone()), (json!(1), json!(200)));
    assert_eq!(properties["max_results"]["maximum"], 20);
    assert_eq!(properties["maybe_shape"]["nullable"], true);
    let mode = &gemini[1]["parameters"]["properties"]["mode"];
    assert_eq!(
        (mode["type"].clone(), mode["enum"].clone(), mode["nullable"].clone()),
        (json!("string"), json!(["car", "train", "bike"]), json!(true))
    );
}

/// The manifest a sample module binary serves, or `None` (said loudly)
/// when the binary is not built; under `REQUIRE_SERVICES=1` (CI) a missing
/// binary fails the test instead.
fn served_manifest(binary: PathBuf) -> Option<Vec<ToolDefinition>> {
    if !binary.exists() {
        let message = format!("{} is not built (`cargo test --workspace` builds it)", binary.display());
        assert!(!test_support::services_required(), "{message}");
        eprintln!("\n!!! SKIPPED: {message} !!!\n");
        return None;
    }
    let mut command = Command::new(&binary);
    command.env_remove("SERVICE_AUTH_TOKEN");
    let module = Process::start(command);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let manifest = runtime.block_on(module.client().manifest());
    Some(serde_json::from_value(manifest["tools"].clone()).expect("the manifest's tools read as ToolDefinitions"))
}

/// The directory holding this build's binaries (`target/debug`).
fn build_dir() -> PathBuf {
    let test_binary = std::env::current_exe().unwrap();
    test_binary.parent().and_then(|deps| deps.parent()).unwrap().to_path_buf()
}

#[test]
fn the_sample_module_binaries_tools_pass_every_provider() {
    let dir = build_dir();
    for binary in [dir.join("research"), dir.join("file_manager"), dir.join("examples").join("demo")] {
        if let Some(tools) = served_manifest(binary.clone()) {
            assert_accepted(&tools, &binary.display().to_string());
            let anthropic = render_tools(Provider::Anthropic.format(), &tools);
            assert!(anthropic.as_array().unwrap().iter().all(|t| !t["name"].as_str().unwrap().contains('.')));
        }
    }
}
