//! A demonstration module with every argument shape the SDK handles:
//! nested types, enums, optional fields and defaults, plus a tool that
//! hangs and one that panics, for the SDK's own whole-process tests.
//!
//! Run it with `cargo run -p module-sdk --example demo` (PORT defaults to 8000).

use std::time::Duration;

use module_sdk::{Context, Module, Permission, Tool, ToolError, tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Arguments of `greet`.
#[derive(Deserialize, JsonSchema)]
struct Greet {
    /// Who to greet.
    name: String,
    /// How to say it.
    #[serde(default)]
    style: Style,
    /// How many exclamation marks to add (0-5).
    #[serde(default)]
    #[schemars(range(max = 5))]
    excitement: u8,
}

/// A way of greeting.
#[derive(Deserialize, JsonSchema, Default, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum Style {
    /// "Hello, NAME".
    #[default]
    Plain,
    /// "Good day to you, NAME".
    Formal,
}

/// What `greet` returns.
#[derive(Serialize, JsonSchema)]
struct Greeting {
    /// The greeting text.
    text: String,
}

/// Say hello to someone.
#[tool(read_only, idempotent)]
async fn greet(_ctx: Context, args: Greet) -> Result<Greeting, ToolError> {
    let bang = "!".repeat(usize::from(args.excitement));
    let text = match args.style {
        Style::Plain => format!("Hello, {}{bang}", args.name),
        Style::Formal => format!("Good day to you, {}{bang}", args.name),
    };
    Ok(Greeting { text })
}

/// Arguments of `plan_trip`: nested objects, lists and optional parts.
#[derive(Deserialize, JsonSchema)]
struct PlanTrip {
    /// Where the trip starts.
    origin: Place,
    /// The stops, in order (at least one).
    #[schemars(length(min = 1))]
    stops: Vec<Place>,
    /// How to travel between stops.
    mode: Option<Mode>,
    /// Most hours to travel per day.
    max_hours_per_day: Option<f64>,
}

/// A place on the map.
#[derive(Deserialize, Serialize, JsonSchema)]
struct Place {
    /// The place's name.
    name: String,
    /// Latitude and longitude, when known.
    coordinates: Option<Coordinates>,
}

/// A position in degrees.
#[derive(Deserialize, Serialize, JsonSchema)]
struct Coordinates {
    /// Degrees north.
    lat: f64,
    /// Degrees east.
    lon: f64,
}

/// A means of travel.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Mode {
    Car,
    Train,
    Bike,
}

/// The planned trip.
#[derive(Serialize, JsonSchema)]
struct Trip {
    /// Every leg as `from -> to`.
    legs: Vec<String>,
    /// The means of travel, when one was asked for.
    mode: Option<Mode>,
    /// The daily travel limit, when one was asked for.
    max_hours_per_day: Option<f64>,
    /// Who asked for the plan, if the orchestrator said.
    planned_for: Option<String>,
}

/// Plan a trip through a list of stops.
#[tool(permission = "user")]
async fn plan_trip(ctx: Context, args: PlanTrip) -> Result<Trip, ToolError> {
    let mut from = args.origin.name;
    let mut legs = Vec::new();
    for stop in args.stops {
        legs.push(format!("{from} -> {}", stop.name));
        from = stop.name;
    }
    Ok(Trip {
        legs,
        mode: args.mode,
        max_hours_per_day: args.max_hours_per_day,
        planned_for: ctx.user_id().map(str::to_owned),
    })
}

/// Arguments of `sleep`.
#[derive(Deserialize, JsonSchema)]
struct Sleep {
    /// How long to sleep, in milliseconds.
    millis: u64,
}

/// What `sleep` returns.
#[derive(Serialize, JsonSchema)]
struct Slept {
    /// How long it slept, in milliseconds.
    millis: u64,
}

/// Sleep for a while (its timeout is one second), then answer.
#[tool(timeout_seconds = 1)]
async fn sleep(_ctx: Context, args: Sleep) -> Result<Slept, ToolError> {
    tokio::time::sleep(Duration::from_millis(args.millis)).await;
    Ok(Slept { millis: args.millis })
}

/// Arguments of `explode`.
#[derive(Deserialize, JsonSchema)]
struct Explode {
    /// What the panic says.
    message: String,
}

/// Fail with a panic, to show that a panicking handler does not take the module down.
async fn explode(_ctx: Context, args: Explode) -> Result<Greeting, ToolError> {
    panic!("{}", args.message)
}

/// The demo module, built the two ways the SDK offers.
fn module() -> Module {
    Module::new("demo", "Demonstration tools: greetings, trip plans, and tools that misbehave on purpose.")
        .version(env!("CARGO_PKG_VERSION"))
        .tool(greet)
        .tool(plan_trip)
        .tool(sleep)
        .tool(
            Tool::new(
                "explode",
                "Fail with a panic, to show that a panicking handler does not take the module down.",
                explode,
            )
            .permission(Permission::Admin)
            .destructive(),
        )
}

#[tokio::main]
async fn main() -> Result<(), module_sdk::ServeError> {
    module().serve().await
}
