//! What a handler gets besides its arguments: the injected caller, its
//! deadline and cancellation, and the module's typed state.

use std::any::{Any, TypeId, type_name};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::blocking_limit::BlockingLimit;
use crate::error::ToolError;
use crate::module::{PANIC_ANSWER, log_panic};

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

/// What every call of a module shares: its typed state and the bound on
/// its blocking work.
#[derive(Default)]
pub(crate) struct ModuleShared {
    pub(crate) state: StateMap,
    pub(crate) blocking: BlockingLimit,
}

/// The per-call context handed to every tool handler.
///
/// Everything in it comes from the orchestrator or the module itself, never
/// from the model's arguments. Cloning it is one reference count.
#[derive(Clone)]
pub struct Context(Arc<CallScope>);

/// What a call's [`Context`] and its clones share, in one allocation.
struct CallScope {
    tool_name: Arc<str>,
    user_id: Option<String>,
    deadline: Instant,
    /// The tool's timeout, which ended at `deadline`.
    timeout: Duration,
    /// Made on first use (most handlers never ask for it), or cancelled
    /// when the call ends while someone may still ask ([`CancelOnDrop`]).
    cancellation: OnceLock<CancellationToken>,
    shared: Arc<ModuleShared>,
}

/// Cancels a call's [`Context::cancellation`] when dropped: when the call
/// ends for any reason, including its future being dropped.
pub(crate) struct CancelOnDrop(Context);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let scope = &mut self.0.0;
        // A token never handed out, in a context nobody else holds, can be
        // observed by no one: there is nothing to cancel.
        if scope.cancellation.get().is_some() || Arc::get_mut(scope).is_none() {
            scope.cancellation.get_or_init(CancellationToken::new).cancel();
        }
    }
}

impl Context {
    pub(crate) fn new(
        tool_name: Arc<str>,
        user_id: Option<String>,
        deadline: Instant,
        timeout: Duration,
        shared: Arc<ModuleShared>,
    ) -> Self {
        Self(Arc::new(CallScope { tool_name, user_id, deadline, timeout, cancellation: OnceLock::new(), shared }))
    }

    /// A guard that cancels this call's [`Context::cancellation`] when dropped.
    pub(crate) fn cancel_on_drop(&self) -> CancelOnDrop {
        CancelOnDrop(self.clone())
    }

    /// The full name of the tool being called, `module.tool`.
    pub fn tool_name(&self) -> &str {
        &self.0.tool_name
    }

    /// The caller's id as injected by the orchestrator, if any.
    pub fn user_id(&self) -> Option<&str> {
        self.0.user_id.as_deref()
    }

    /// The caller's id, or a `permission_denied` error for tools that keep
    /// per-user data and must not run anonymously.
    pub fn require_user_id(&self) -> Result<&str, ToolError> {
        self.user_id().filter(|id| !id.is_empty()).ok_or_else(|| {
            ToolError::permission_denied(format!(
                "{} keeps per-user data and needs the caller's user_id, which the orchestrator sets; none was given",
                self.0.tool_name
            ))
        })
    }

    /// When the module gives up on this call.
    pub fn deadline(&self) -> Instant {
        self.0.deadline
    }

    /// How long the handler has left before the module gives up on it.
    pub fn remaining(&self) -> Duration {
        self.0.deadline.saturating_duration_since(Instant::now())
    }

    /// Cancelled when the call times out or its caller goes away; long work
    /// can `select!` on `cancellation().cancelled()` to stop early.
    pub fn cancellation(&self) -> &CancellationToken {
        self.0.cancellation.get_or_init(CancellationToken::new)
    }

    /// A check of whether this call has been given up: past its deadline
    /// (it is answered `timeout` then) or cancelled (its caller went away).
    /// Blocking work that runs on after its call ([`Context::blocking`])
    /// tests it before a change, so no change is started once its call was
    /// given up (one started just before may still finish after the answer).
    pub fn given_up(&self) -> impl Fn() -> bool + Send + Sync + 'static {
        let cancelled = self.cancellation().clone();
        let deadline = self.0.deadline;
        move || cancelled.is_cancelled() || Instant::now() >= deadline
    }

    /// The module state of type `T` registered with `Module::state`.
    pub fn state<T: Send + Sync + 'static>(&self) -> Result<Arc<T>, ToolError> {
        self.0.shared.state.get::<T>().ok_or_else(|| {
            ToolError::execution_failed(format!(
                "module state `{}` was not registered: call `.state(...)` on the Module",
                type_name::<T>()
            ))
        })
    }

    /// Runs blocking work (a database query, a walk of the file system) with
    /// the module state `S` on tokio's blocking threads, so the async workers
    /// stay free; the work's error converts to a [`ToolError`] as `?` would.
    /// A panic in the work is answered as a panic of the handler is: its
    /// text logged at error level, the caller told only that the tool failed.
    ///
    /// The work runs to its end even when the call times out or its caller
    /// goes away first (a thread cannot be stopped from outside; check
    /// [`Context::cancellation`] in long work, and [`Context::given_up`]
    /// before a change the caller may have been told failed). So that such work cannot pile
    /// up, at most `MAX_BLOCKING_CALLS` pieces of a module's work run at
    /// once: a call waits for one to end while at least half of its tool's
    /// timeout is left, then gets an `unavailable` error naming the setting
    /// (work started later would mostly run after its call was answered).
    /// A call given up by the time it has its slot starts no work.
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
        let permit = self.0.shared.blocking.permit(self.0.deadline, self.0.timeout).await?;
        // A slot free at once is granted even past the deadline (a handler's
        // first poll may have run long): no work for a call already answered.
        if self.given_up()() {
            return Err(ToolError::timeout(format!(
                "the call was given up (its tool's timeout of {} s passed, or its caller left) before its blocking \
                 work started; the work never ran",
                self.0.timeout.as_secs_f64()
            )));
        }
        let work = move || {
            // Given back when the work ends, whenever its call did.
            let _permit = permit;
            work(&state)
        };
        match tokio::task::spawn_blocking(work).await {
            Ok(outcome) => outcome.map_err(Into::into),
            Err(error) => match error.try_into_panic() {
                // As a panic of the handler itself: the text is logged, not told.
                Ok(payload) => {
                    log_panic(self.tool_name(), payload.as_ref(), "blocking work of a tool panicked");
                    Err(ToolError::execution_failed(PANIC_ANSWER))
                }
                Err(error) => Err(error.into()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context() -> Context {
        Context::new("m.t".into(), None, Instant::now(), Duration::from_secs(1), Arc::default())
    }

    #[test]
    fn a_token_handed_out_is_cancelled_when_the_call_ends() {
        let ctx = context();
        let guard = ctx.cancel_on_drop();
        let token = ctx.cancellation().clone();
        drop(ctx);
        assert!(!token.is_cancelled());
        drop(guard);
        assert!(token.is_cancelled());
    }

    #[tokio::test]
    async fn a_call_is_given_up_at_its_deadline_or_when_it_ends() {
        let later = Context::new(
            "m.t".into(),
            None,
            Instant::now() + Duration::from_secs(60),
            Duration::from_secs(60),
            Arc::default(),
        );
        let guard = later.cancel_on_drop();
        let given_up = later.given_up();
        assert!(!given_up());
        drop((guard, later));
        assert!(given_up(), "the call ended");
        assert!(context().given_up()(), "the deadline passed");
    }

    #[test]
    fn a_context_kept_past_the_call_sees_it_cancelled() {
        let ctx = context();
        let kept = ctx.clone();
        drop((ctx.cancel_on_drop(), ctx));
        assert!(kept.cancellation().is_cancelled());
    }
}
