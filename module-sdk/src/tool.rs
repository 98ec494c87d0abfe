//! A tool: one async handler plus what the manifest says about it.
//!
//! [`ToolHandler`] is implemented for every `async fn(Context, Args) ->
//! Result<Output, ToolError>` (a blanket impl, as axum does for handlers);
//! [`Tool::new`] reads the schemas off its types. The `#[tool]` attribute is
//! sugar that calls [`Tool::new`] with the function's name and doc comment.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::arguments::InPlaceValue;
use crate::context::Context;
use crate::contract::{Permission, RiskLevel, ToolAnnotations};
use crate::error::ToolError;
use crate::schema::{arguments_schema_for, schema_for};

/// How long a tool may run unless it says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest timeout a tool, or a server's header or body read, may have:
/// one day. A longer one stops the module from being built (or started).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(86_400);

/// An async function usable as a tool: `async fn(Context, A) -> Result<R, ToolError>`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a tool handler",
    label = "not `async fn(Context, {A}) -> Result<{R}, ToolError>`",
    note = "a tool is `async fn name(ctx: Context, args: Args) -> Result<Output, ToolError>`, with `Args: Deserialize + JsonSchema` and `Output: Serialize + JsonSchema`, and its future must be `Send` (hold no `Rc` or `std::sync::MutexGuard` across an `.await`)"
)]
pub trait ToolHandler<A, R>: Clone + Send + Sync + 'static {
    /// The future the handler returns.
    type Future: Future<Output = Result<R, ToolError>> + Send + 'static;

    /// Runs the tool.
    fn call(&self, ctx: Context, args: A) -> Self::Future;
}

impl<F, Fut, A, R> ToolHandler<A, R> for F
where
    F: Fn(Context, A) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<R, ToolError>> + Send + 'static,
{
    type Future = Fut;

    fn call(&self, ctx: Context, args: A) -> Fut {
        self(ctx, args)
    }
}

/// The future of a type-erased handler: arguments in, the result serialized
/// once, as it goes on the wire.
pub(crate) type JsonFuture = Pin<Box<dyn Future<Output = Result<Box<RawValue>, ToolError>> + Send>>;

/// A handler with its argument and result types erased to JSON.
pub(crate) trait ErasedHandler: Send + Sync {
    /// Runs the handler on arguments read from a tree; arguments its type
    /// refuses end as `invalid_arguments`.
    fn call(&self, ctx: Context, arguments: Value) -> JsonFuture;

    /// Runs the handler on arguments read in place, or gives `ctx` back
    /// when its type refuses them, for [`Self::call`] to word the refusal
    /// as it always does.
    fn call_in_place(&self, ctx: Context, arguments: &InPlaceValue<'_>) -> Result<JsonFuture, Context>;
}

/// The one [`ErasedHandler`]: deserializes arguments, serializes the result.
struct Typed<H, A, R> {
    handler: H,
    types: PhantomData<fn(A) -> R>,
}

impl<H, A, R> Typed<H, A, R>
where
    H: ToolHandler<A, R>,
    A: DeserializeOwned + Send + 'static,
    R: Serialize + Send + 'static,
{
    /// The handler's future, its result serialized once it is ready.
    fn run(&self, ctx: Context, args: A) -> JsonFuture {
        let output = self.handler.call(ctx, args);
        Box::pin(async move {
            let output = output.await?;
            serde_json::value::to_raw_value(&output)
                .map_err(|e| ToolError::execution_failed(format!("the tool's result could not be serialized: {e}")))
        })
    }
}

impl<H, A, R> ErasedHandler for Typed<H, A, R>
where
    H: ToolHandler<A, R>,
    A: DeserializeOwned + Send + 'static,
    R: Serialize + Send + 'static,
{
    fn call(&self, ctx: Context, arguments: Value) -> JsonFuture {
        match serde_json::from_value::<A>(arguments) {
            Ok(args) => self.run(ctx, args),
            Err(error) => {
                let message = format!("arguments: {error}");
                Box::pin(async move { Err(ToolError::invalid_arguments(message)) })
            }
        }
    }

    fn call_in_place(&self, ctx: Context, arguments: &InPlaceValue<'_>) -> Result<JsonFuture, Context> {
        match arguments.deserialize_into::<A>() {
            Ok(args) => Ok(self.run(ctx, args)),
            Err(_) => Err(ctx),
        }
    }
}

/// One tool, ready to be registered on a [`crate::Module`].
///
/// With `#[tool]`, the doc comment is the description, and a tool without
/// one is a compile error:
///
/// ```compile_fail
/// # use module_sdk::{Context, ToolError, tool};
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Args { x: u8 }
/// #[tool]
/// async fn undocumented(_ctx: Context, args: Args) -> Result<u8, ToolError> {
///     Ok(args.x)
/// }
/// ```
///
/// The same function with a doc comment compiles:
///
/// ```
/// # use module_sdk::{Context, ToolError, tool};
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Args { x: u8 }
/// /// Give the number back.
/// #[tool]
/// async fn documented(_ctx: Context, args: Args) -> Result<u8, ToolError> {
///     Ok(args.x)
/// }
/// ```
#[derive(Clone)]
pub struct Tool {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) permission: Permission,
    pub(crate) annotations: ToolAnnotations,
    pub(crate) requires_approval: bool,
    pub(crate) risk_level: Option<RiskLevel>,
    pub(crate) timeout: Duration,
    pub(crate) input_schema: Value,
    pub(crate) output_schema: Value,
    pub(crate) handler: Arc<dyn ErasedHandler>,
}

impl Tool {
    /// A tool named `name` (without the module prefix) running `handler`;
    /// `input_schema` and `output_schema` come from the handler's types.
    pub fn new<H, A, R>(name: impl Into<String>, description: impl Into<String>, handler: H) -> Self
    where
        H: ToolHandler<A, R>,
        A: DeserializeOwned + JsonSchema + Send + 'static,
        R: Serialize + JsonSchema + Send + 'static,
    {
        Self {
            name: name.into(),
            description: description.into().trim().to_owned(),
            permission: Permission::Guest,
            annotations: ToolAnnotations::default(),
            requires_approval: false,
            risk_level: None,
            timeout: DEFAULT_TIMEOUT,
            input_schema: arguments_schema_for::<A>(),
            output_schema: schema_for::<R>(),
            handler: Arc::new(Typed { handler, types: PhantomData }),
        }
    }

    /// Registers the tool under another name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Replaces the description.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into().trim().to_owned();
        self
    }

    /// The least privileged caller allowed (default `guest`).
    pub fn permission(mut self, permission: Permission) -> Self {
        self.permission = permission;
        self
    }

    /// Marks the tool as changing nothing.
    pub fn read_only(mut self) -> Self {
        self.annotations.read_only = true;
        self
    }

    /// Marks the tool as able to destroy or overwrite data.
    pub fn destructive(mut self) -> Self {
        self.annotations.destructive = true;
        self
    }

    /// Marks repeated calls with the same arguments as harmless (the
    /// orchestrator may then retry it).
    pub fn idempotent(mut self) -> Self {
        self.annotations.idempotent = true;
        self
    }

    /// Marks the tool as reaching outside systems.
    pub fn open_world(mut self) -> Self {
        self.annotations.open_world = true;
        self
    }

    /// Asks the orchestrator to get the user's approval before each call.
    pub fn requires_approval(mut self) -> Self {
        self.requires_approval = true;
        self
    }

    /// How much harm a wrong call can do (unset by default); an
    /// orchestrator may require approval at or above a configured level.
    pub fn risk_level(mut self, level: RiskLevel) -> Self {
        self.risk_level = Some(level);
        self
    }

    /// The longest the tool may run (default 30 s, at most [`MAX_TIMEOUT`]).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Replaces the input schema read off the argument type, for tools whose
    /// arguments are only known at run time (read from a file, say): the
    /// handler then takes a `serde_json::Map<String, Value>`, and `schema`
    /// (a JSON Schema with root `"type": "object"`) is what the manifest
    /// shows and what arguments are validated against before the call.
    pub fn input_schema(mut self, schema: Value) -> Self {
        self.input_schema = schema;
        self
    }
}

/// Anything that can be registered as a tool: a [`Tool`], or a function
/// that makes one (which is what `#[tool]` turns an async fn into).
pub trait IntoTool {
    /// The tool, with its name and description.
    fn into_tool(self) -> Tool;
}

impl IntoTool for Tool {
    fn into_tool(self) -> Tool {
        self
    }
}

impl<F: FnOnce() -> Tool> IntoTool for F {
    fn into_tool(self) -> Tool {
        self()
    }
}
