//! What a handler gets besides its arguments: the injected caller, its
//! deadline and cancellation, and the module's typed state.

use std::any::{Any, TypeId, type_name};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::ToolError;

/// Typed values a module shares with all its handlers (a database handle, a
/// config, an HTTP client), one per type.
#[derive(Clone, Default)]
pub(crate) struct StateMap(HashMap<TypeId, Arc<dyn Any + Send + Sync>>);

impl StateMap {
    pub(crate) fn insert<T: Send + Sync + 'static>(&mut self, value: T) {
        self.0.insert(TypeId::of::<T>(), Arc::new(value));
    }

    fn get<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        self.0.get(&TypeId::of::<T>())?.clone().downcast().ok()
    }
}

/// The per-call context handed to every tool handler.
///
/// Everything in it comes from the orchestrator or the module itself, never
/// from the model's arguments.
#[derive(Clone)]
pub struct Context {
    tool_name: Arc<str>,
    user_id: Option<String>,
    deadline: Instant,
    cancellation: CancellationToken,
    state: Arc<StateMap>,
}

impl Context {
    pub(crate) fn new(tool_name: Arc<str>, user_id: Option<String>, deadline: Instant, state: Arc<StateMap>) -> Self {
        Self { tool_name, user_id, deadline, cancellation: CancellationToken::new(), state }
    }

    /// The full name of the tool being called, `module.tool`.
    pub fn tool_name(&self) -> &str {
        &self.tool_name
    }

    /// The caller's id as injected by the orchestrator, if any.
    pub fn user_id(&self) -> Option<&str> {
        self.user_id.as_deref()
    }

    /// The caller's id, or a `permission_denied` error for tools that keep
    /// per-user data and must not run anonymously.
    pub fn require_user_id(&self) -> Result<&str, ToolError> {
        self.user_id().filter(|id| !id.is_empty()).ok_or_else(|| {
            ToolError::permission_denied(format!(
                "{} keeps per-user data and needs the caller's user_id, which the orchestrator sets; none was given",
                self.tool_name
            ))
        })
    }

    /// When the module gives up on this call.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// How long the handler has left before the module gives up on it.
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// Cancelled when the call times out or its caller goes away; long work
    /// can `select!` on `cancellation().cancelled()` to stop early.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancellation
    }

    /// The module state of type `T` registered with `Module::state`.
    pub fn state<T: Send + Sync + 'static>(&self) -> Result<Arc<T>, ToolError> {
        self.state.get::<T>().ok_or_else(|| {
            ToolError::execution_failed(format!(
                "module state `{}` was not registered: call `.state(...)` on the Module",
                type_name::<T>()
            ))
        })
    }

    /// Runs blocking work (a database query, a walk of the file system) with
    /// the module state `S` on tokio's blocking threads, so the async workers
    /// stay free; the work's error converts to a [`ToolError`] as `?` would.
    ///
    /// ```
    /// # use module_sdk::{Context, ToolError};
    /// struct Counter(std::sync::Mutex<u64>);
    ///
    /// async fn bump(ctx: Context) -> Result<u64, ToolError> {
    ///     ctx.blocking(|counter: &Counter| {
    ///         let mut n = counter.0.lock().map_err(|_| ToolError::execution_failed("counter poisoned"))?;
    ///         *n += 1;
    ///         Ok::<_, ToolError>(*n)
    ///     })
    ///     .await
    /// }
    /// ```
    pub async fn blocking<S, T, E>(
        &self,
        work: impl FnOnce(&S) -> Result<T, E> + Send + 'static,
    ) -> Result<T, ToolError>
    where
        S: Send + Sync + 'static,
        T: Send + 'static,
        E: Into<ToolError> + Send + 'static,
    {
        let state = self.state::<S>()?;
        tokio::task::spawn_blocking(move || work(&state)).await?.map_err(Into::into)
    }
}
