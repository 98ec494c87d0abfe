//! The sample tool types, defined once: the SDK's demo module serves them,
//! and the orchestrator's provider tests and benchmark convert their schemas.
//! Together they have every argument shape the SDK handles: nested types,
//! lists with bounds, enums, optional fields and defaults.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Arguments of `greet`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Greet {
    /// Who to greet.
    pub name: String,
    /// How to say it.
    #[serde(default)]
    pub style: Style,
    /// How many exclamation marks to add (0-5).
    #[serde(default)]
    #[schemars(range(max = 5))]
    pub excitement: u8,
}

/// A way of greeting.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Default, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Style {
    /// "Hello, NAME".
    #[default]
    Plain,
    /// "Good day to you, NAME".
    Formal,
}

impl Greet {
    /// The greeting these arguments ask for.
    pub fn greeting(&self) -> Greeting {
        let bang = "!".repeat(usize::from(self.excitement));
        let text = match self.style {
            Style::Plain => format!("Hello, {}{bang}", self.name),
            Style::Formal => format!("Good day to you, {}{bang}", self.name),
        };
        Greeting { text }
    }
}

/// What `greet` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Greeting {
    /// The greeting text.
    pub text: String,
}

/// Arguments of `plan_trip`: nested objects, lists and optional parts.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct PlanTrip {
    /// Where the trip starts.
    pub origin: Place,
    /// The stops, in order (at least one).
    #[schemars(length(min = 1))]
    pub stops: Vec<Place>,
    /// How to travel between stops.
    pub mode: Option<Mode>,
    /// Most hours to travel per day.
    pub max_hours_per_day: Option<f64>,
}

/// A place on the map.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
pub struct Place {
    /// The place's name.
    pub name: String,
    /// Latitude and longitude, when known.
    pub coordinates: Option<Coordinates>,
}

/// A position in degrees.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
pub struct Coordinates {
    /// Degrees north.
    pub lat: f64,
    /// Degrees east.
    pub lon: f64,
}

/// A means of travel.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)] // The names say it; a model sees no description for them.
pub enum Mode {
    Car,
    Train,
    Bike,
}

impl PlanTrip {
    /// The trip these arguments ask for, planned for `user`.
    pub fn plan(self, user: Option<&str>) -> Trip {
        let mut from = self.origin.name;
        let mut legs = Vec::new();
        for stop in self.stops {
            legs.push(format!("{from} -> {}", stop.name));
            from = stop.name;
        }
        Trip { legs, mode: self.mode, max_hours_per_day: self.max_hours_per_day, planned_for: user.map(str::to_owned) }
    }
}

/// The planned trip.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Trip {
    /// Every leg as `from -> to`.
    pub legs: Vec<String>,
    /// The means of travel, when one was asked for.
    pub mode: Option<Mode>,
    /// The daily travel limit, when one was asked for.
    pub max_hours_per_day: Option<f64>,
    /// Who asked for the plan, if the orchestrator said.
    pub planned_for: Option<String>,
}
