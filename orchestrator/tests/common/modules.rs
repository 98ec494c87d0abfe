//! The modules the tests route to: an SDK module with a guest and an admin
//! tool, a hand-written base-fields-only module whose calls never end, and
//! hand-written modules answering what a test gives them.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Json;
use axum::Router;
use axum::routing::{get, post};
use module_sdk::{Context, Module, ToolError, tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// How many calls reached a module's handlers.
#[derive(Clone, Default)]
pub struct Calls(Arc<AtomicUsize>);

impl Calls {
    /// The count so far.
    pub fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }

    fn record(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Arguments of `echo`.
#[derive(Deserialize, JsonSchema)]
struct Echo {
    /// What to send back.
    text: String,
}

/// What `echo` returns.
#[derive(Serialize, JsonSchema)]
struct Echoed {
    /// The text that was sent.
    text: String,
    /// The user the orchestrator named.
    user_id: Option<String>,
}

/// Send the text back, with the caller's user id.
#[tool(read_only, idempotent)]
async fn echo(ctx: Context, args: Echo) -> Result<Echoed, ToolError> {
    ctx.state::<Calls>().expect("the module carries a counter").record();
    Ok(Echoed { text: args.text, user_id: ctx.user_id().map(str::to_owned) })
}

/// Arguments of `wipe`.
#[derive(Deserialize, JsonSchema)]
struct Wipe {}

/// What `wipe` returns.
#[derive(Serialize, JsonSchema)]
struct Wiped {
    /// Always true.
    wiped: bool,
}

/// Wipe everything (admins only).
#[tool(permission = "admin", destructive)]
async fn wipe(ctx: Context, _args: Wipe) -> Result<Wiped, ToolError> {
    ctx.state::<Calls>().expect("the module carries a counter").record();
    Ok(Wiped { wiped: true })
}

/// An SDK module called `name` with `echo` (guest) and `wipe` (admin), and
/// the counter of the calls that reached them.
pub fn sdk_module(name: &str) -> (Module, Calls) {
    let calls = Calls::default();
    let module = Module::new(name, "A test module with a harmless and a dangerous tool.")
        .tool(echo)
        .tool(wipe)
        .state(calls.clone());
    (module, calls)
}

/// A module written without the SDK, sending only the base fields: `wait`
/// says it ends within one second, `stall` names no timeout; neither ever
/// answers. Each call that arrives is counted.
pub fn stalling_module(name: &str) -> (Router, Calls) {
    let calls = Calls::default();
    let manifest = json!({
        "module_name": name,
        "description": "Tools that never finish.",
        "tools": [
            {
                "name": format!("{name}.wait"),
                "description": "Wait for a while.",
                "parameters": [{"name": "reason", "type": "string", "description": "Why.", "required": false, "enum": null}],
                "required_permission": "guest",
                "timeout_seconds": 1
            },
            {
                "name": format!("{name}.stall"),
                "description": "Stall forever.",
                "parameters": [],
                "required_permission": "guest"
            }
        ]
    });
    let counter = calls.clone();
    let router = Router::new().route("/manifest", get(move || std::future::ready(Json(manifest.clone())))).route(
        "/execute",
        post(move |Json(_call): Json<Value>| {
            counter.record();
            std::future::pending::<Json<Value>>()
        }),
    );
    (router, calls)
}

/// A module whose manifest is `manifest`, whatever it says.
pub fn manifest_module(manifest: Value) -> Router {
    Router::new().route("/manifest", get(move || std::future::ready(Json(manifest.clone()))))
}

/// A module whose manifest is `manifest` and whose `/execute` answers a call
/// of each tool of `answers` (its name, an answer's JSON text) with that
/// text as it is, `200`; a call of another tool with an empty body.
pub fn answering_module(manifest: Value, answers: &[(&str, String)]) -> Router {
    let answers: Arc<HashMap<String, String>> =
        Arc::new(answers.iter().map(|(tool, answer)| ((*tool).to_owned(), answer.clone())).collect());
    let execute = move |Json(call): Json<Value>| {
        let answer = call["tool_name"].as_str().and_then(|name| answers.get(name)).cloned().unwrap_or_default();
        std::future::ready(([("content-type", "application/json")], answer))
    };
    manifest_module(manifest).route("/execute", post(execute))
}

/// Arguments of `transfer`.
#[derive(Deserialize, JsonSchema)]
struct Transfer {
    /// Whom to pay.
    to: String,
    /// How much, in cents.
    cents: u32,
    /// How long the transfer takes, in milliseconds (none: at once).
    wait_ms: Option<u64>,
}

/// What `transfer` returns.
#[derive(Serialize, JsonSchema)]
struct Transferred {
    /// The payee.
    to: String,
    /// The amount.
    cents: u32,
    /// The user it was done for.
    user_id: Option<String>,
}

/// Pay someone (always asks the user first).
#[tool(requires_approval)]
async fn transfer(ctx: Context, args: Transfer) -> Result<Transferred, ToolError> {
    if let Some(wait) = args.wait_ms {
        tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
    }
    ctx.state::<Calls>().expect("the module carries a counter").record();
    Ok(Transferred { to: args.to, cents: args.cents, user_id: ctx.user_id().map(str::to_owned) })
}

/// An SDK module called `name` with `echo` (guest), `wipe` (admin,
/// destructive) and `transfer` (guest, `requires_approval`), and the counter
/// of the calls that reached them.
pub fn approval_module(name: &str) -> (Module, Calls) {
    let (module, calls) = sdk_module(name);
    (module.tool(transfer), calls)
}
