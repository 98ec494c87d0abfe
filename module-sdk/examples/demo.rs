//! A demonstration module with every argument shape the SDK handles:
//! nested types, enums, optional fields and defaults (the sample types of
//! `test-support/src/samples.rs`, which the orchestrator's provider tests
//! convert too), plus a tool that hangs and one that panics, for the SDK's
//! own whole-process tests.
//!
//! Run it with `cargo run -p module-sdk --example demo` (PORT defaults to 8000).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use module_sdk::{Context, Module, Permission, Tool, ToolError, tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use test_support::samples::{Greet, Greeting, PlanTrip, Trip};

/// Say hello to someone.
#[tool(read_only, idempotent)]
async fn greet(_ctx: Context, args: Greet) -> Result<Greeting, ToolError> {
    Ok(args.greeting())
}

/// Plan a trip through a list of stops.
#[tool(permission = "user")]
async fn plan_trip(ctx: Context, args: PlanTrip) -> Result<Trip, ToolError> {
    Ok(args.plan(ctx.user_id()))
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
    /// How many `sleep` calls were running when this one started, itself
    /// included (the most at once is the largest of these).
    running: usize,
}

/// `sleep` calls running now.
static SLEEPING: AtomicUsize = AtomicUsize::new(0);

/// Counts a `sleep` call as running until dropped (also when it is cancelled).
struct Sleeping;

impl Drop for Sleeping {
    fn drop(&mut self) {
        SLEEPING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Sleep for a while (its timeout is one second), then answer.
#[tool(timeout_seconds = 1)]
async fn sleep(_ctx: Context, args: Sleep) -> Result<Slept, ToolError> {
    let running = SLEEPING.fetch_add(1, Ordering::SeqCst) + 1;
    let _sleeping = Sleeping;
    tokio::time::sleep(Duration::from_millis(args.millis)).await;
    Ok(Slept { millis: args.millis, running })
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
