//! The module the provider round-trip tests call: a real SDK module with
//! an enum with a default, nested optional parts, the caller's user id in
//! its answer, and property names Gemini cannot take as they are.

use module_sdk::{Context, Module, ToolError, tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use test_support::samples::{Greet, Greeting, PlanTrip, Trip};

/// Say hello to someone.
#[tool]
async fn greet(_ctx: Context, args: Greet) -> Result<Greeting, ToolError> {
    Ok(args.greeting())
}

/// Plan a trip through a list of stops.
#[tool(permission = "user")]
async fn plan_trip(ctx: Context, args: PlanTrip) -> Result<Trip, ToolError> {
    Ok(args.plan(ctx.user_id()))
}

/// Arguments with names Gemini cannot take as they are.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
struct Search {
    /// What to look for.
    search_terms: String,
    /// How many results.
    #[serde(default = "three")]
    max_results: u8,
}

fn three() -> u8 {
    3
}

/// Echo a search request back.
#[tool]
async fn search(_ctx: Context, args: Search) -> Result<Search, ToolError> {
    Ok(args)
}

/// The `trips` module: `greet`, `plan_trip` (for users) and `search`.
pub fn trips() -> Module {
    Module::new("trips", "Trip tools.").tool(greet).tool(plan_trip).tool(search)
}
