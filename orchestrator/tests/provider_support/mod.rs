//! The module the provider round-trip tests call: a real SDK module with
//! an enum with a default, nested optional parts, the caller's user id in
//! its answer, and property names Gemini cannot take as they are.

use module_sdk::{Context, Module, ToolError, tool};
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
#[derive(Deserialize, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
enum Style {
    /// "Hello, NAME".
    #[default]
    Plain,
    /// "Good day to you, NAME".
    Formal,
}

/// A greeting.
#[derive(Serialize, JsonSchema)]
struct Greeting {
    /// The text.
    text: String,
}

/// Say hello to someone.
#[tool]
async fn greet(_ctx: Context, args: Greet) -> Result<Greeting, ToolError> {
    let bang = "!".repeat(usize::from(args.excitement));
    let text = match args.style {
        Style::Plain => format!("Hello, {}{bang}", args.name),
        Style::Formal => format!("Good day to you, {}{bang}", args.name),
    };
    Ok(Greeting { text })
}

/// Arguments of `plan_trip`: nested and optional parts.
#[derive(Deserialize, JsonSchema)]
struct PlanTrip {
    /// Where the trip starts.
    origin: Place,
    /// The stops, in order.
    stops: Vec<Place>,
    /// Most hours to travel per day.
    max_hours_per_day: Option<f64>,
}

/// A place.
#[derive(Deserialize, JsonSchema)]
struct Place {
    /// Its name.
    name: String,
    /// Latitude and longitude, when known.
    coordinates: Option<[f64; 2]>,
}

/// The plan.
#[derive(Serialize, JsonSchema)]
struct Trip {
    /// Every leg as `from -> to`.
    legs: Vec<String>,
    /// How many stops have coordinates.
    located: usize,
    /// The daily limit asked for.
    max_hours_per_day: Option<f64>,
    /// For whom.
    user: Option<String>,
}

/// Plan a trip through a list of stops.
#[tool(permission = "user")]
async fn plan_trip(ctx: Context, args: PlanTrip) -> Result<Trip, ToolError> {
    let located = args.stops.iter().filter(|stop| stop.coordinates.is_some()).count();
    let mut from = args.origin.name;
    let mut legs = Vec::new();
    for stop in args.stops {
        legs.push(format!("{from} -> {}", stop.name));
        from = stop.name;
    }
    Ok(Trip { legs, located, max_hours_per_day: args.max_hours_per_day, user: ctx.user_id().map(str::to_owned) })
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
