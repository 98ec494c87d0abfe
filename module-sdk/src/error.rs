//! The errors of this crate: what a handler returns ([`ToolError`]), what a
//! module definition can get wrong ([`ModuleError`]), and what stops a
//! server ([`ServeError`]).

use std::fmt;

use crate::contract::ErrorKind;
use crate::manifest_check::ManifestError;

/// A tool's failure, turned into a `success: false` ToolResult.
///
/// The constructors pick a kind. `?` converts any error that says its kind
/// ([`ToolErrorKind`]: your module's own error type, and the standard
/// library's errors), with the whole cause chain as the message; an error of
/// another crate converts with [`ToolError::from_error`] or through your own
/// error type. Like `anyhow::Error`, it deliberately does not implement
/// `std::error::Error` itself, which is what makes that blanket conversion
/// possible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    kind: ErrorKind,
    message: String,
}

impl ToolError {
    /// A failure of the given kind with a message a model can act on.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }

    /// The arguments are well-typed but still wrong (e.g. a date in the past).
    pub fn invalid_arguments(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidArguments, message)
    }

    /// The thing the arguments name does not exist.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }

    /// The caller may not do this.
    pub fn permission_denied(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::PermissionDenied, message)
    }

    /// A service the tool needs is down or not configured.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, message)
    }

    /// The tool ran out of time.
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Timeout, message)
    }

    /// The tool failed while doing its work.
    pub fn execution_failed(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::ExecutionFailed, message)
    }

    /// The contract's `error_kind` of this failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message sent to the model.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Any error (one of another crate, which cannot implement
    /// [`ToolErrorKind`]) as `execution_failed`, its message the whole cause
    /// chain: `fetch(url).await.map_err(|e| ToolError::from_error(&e))?`.
    pub fn from_error(error: &(dyn std::error::Error + 'static)) -> Self {
        Self::execution_failed(error_chain(error))
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

/// An error that says which `error_kind` it is, so `?` turns it into a
/// [`ToolError`] of that kind, its message the whole cause chain
/// ([`error_chain`]).
///
/// Implement it for your module's error type (usually a thiserror enum that
/// wraps the errors of the crates you use with `#[from]`):
///
/// ```
/// use module_sdk::{ErrorKind, ToolErrorKind};
///
/// #[derive(Debug, thiserror::Error)]
/// enum StoreError {
///     #[error("no note {0}")]
///     NotFound(String),
///     #[error("the database failed")]
///     Database(#[from] std::io::Error),
/// }
///
/// impl ToolErrorKind for StoreError {
///     fn kind(&self) -> ErrorKind {
///         match self {
///             StoreError::NotFound(_) => ErrorKind::NotFound,
///             StoreError::Database(_) => ErrorKind::ExecutionFailed,
///         }
///     }
/// }
/// ```
///
/// `impl ToolErrorKind for MyError {}` keeps the default,
/// `execution_failed`. The standard library's errors implement it already:
/// an I/O time-out is `timeout`, a refused or broken connection
/// `unavailable`, anything else `execution_failed`; so are `serde_json`'s,
/// tokio's time-outs (`timeout`) and task failures.
#[diagnostic::on_unimplemented(
    message = "`?` cannot turn `{Self}` into a ToolError: the error does not say its kind",
    note = "implement `module_sdk::ToolErrorKind for {Self}` (an empty impl means `execution_failed`), wrap it in your module's error type, or convert it with `ToolError::from_error(&e)` or a `ToolError` constructor"
)]
pub trait ToolErrorKind: std::error::Error {
    /// The contract's `error_kind` for this error; `execution_failed` unless
    /// the type says otherwise.
    fn kind(&self) -> ErrorKind {
        ErrorKind::ExecutionFailed
    }
}

impl<E: ToolErrorKind + 'static> From<E> for ToolError {
    fn from(error: E) -> Self {
        Self::new(error.kind(), error_chain(&error))
    }
}

impl ToolErrorKind for std::io::Error {
    fn kind(&self) -> ErrorKind {
        use std::io::ErrorKind as Io;
        match std::io::Error::kind(self) {
            Io::TimedOut => ErrorKind::Timeout,
            Io::ConnectionRefused
            | Io::ConnectionReset
            | Io::ConnectionAborted
            | Io::NotConnected
            | Io::HostUnreachable
            | Io::NetworkUnreachable => ErrorKind::Unavailable,
            _ => ErrorKind::ExecutionFailed,
        }
    }
}

impl ToolErrorKind for tokio::time::error::Elapsed {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Timeout
    }
}

impl ToolErrorKind for serde_json::Error {}
impl ToolErrorKind for tokio::task::JoinError {}
impl ToolErrorKind for std::fmt::Error {}
impl ToolErrorKind for std::num::ParseIntError {}
impl ToolErrorKind for std::num::ParseFloatError {}
impl ToolErrorKind for std::num::TryFromIntError {}
impl ToolErrorKind for std::str::Utf8Error {}
impl ToolErrorKind for std::string::FromUtf8Error {}
impl ToolErrorKind for std::net::AddrParseError {}
impl ToolErrorKind for std::time::SystemTimeError {}

/// An error and its causes on one line, `outer: cause: cause`, skipping a
/// cause whose text the message already quotes. Clients such as reqwest
/// name only the outermost layer ("error sending request") and keep what
/// really happened in the chain.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// A module definition that breaks the contract, found before it serves.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModuleError {
    /// The manifest the definition makes breaks a rule of the contract (the
    /// same check an orchestrator applies); the message says how to fix it.
    #[error("{0}: {hint}", hint = author_hint(.0))]
    Contract(#[from] ManifestError),
    /// A tool's argument schema could not be compiled into a validator.
    #[error("the input schema of tool `{0}` is not a valid JSON Schema: {1}")]
    InvalidSchema(String, String),
    /// A tool's timeout is longer than [`MAX_TIMEOUT`](crate::MAX_TIMEOUT).
    #[error("tool `{tool}` has a timeout of {seconds} s; the longest allowed is {max} s (one day)", max = crate::MAX_TIMEOUT.as_secs())]
    TimeoutTooLong {
        /// The tool's name.
        tool: String,
        /// The timeout it asked for, in seconds.
        seconds: f64,
    },
}

/// What a tool author changes in the Rust code to fix `error`.
fn author_hint(error: &ManifestError) -> &'static str {
    match error {
        ManifestError::BadModuleName(_) | ManifestError::BadToolName { .. } => {
            "use 1 to 40 lowercase letters, digits or `_`, starting with a letter"
        }
        ManifestError::MissingDescription(_) => "add a doc comment (or pass a non-empty description)",
        ManifestError::NoTools(_) => "register at least one with `.tool(...)`",
        ManifestError::DuplicateTool(_) => "register the second one under a different name with `.name(\"...\")`",
        ManifestError::BadSchema { .. } => "a tool's arguments must be a struct (a JSON object)",
        ManifestError::BadTimeout { .. } => "use a positive, finite timeout",
        ManifestError::ParametersDisagree(_) | ManifestError::DuplicateParameter { .. } => {
            "the SDK derives both from one type; please report this"
        }
        ManifestError::SchemaOverBudget { .. } => "make the arguments' types smaller or less deeply nested",
        ManifestError::BadPattern { .. } => "use a shorter `pattern` without lookaround or backreferences",
        ManifestError::ProviderNameTooLong { .. } => {
            "shorten the module's name or the tool's (`.name(\"...\")`): together at most 62 characters"
        }
    }
}

/// Why a module server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The module definition is invalid.
    #[error(transparent)]
    Module(#[from] ModuleError),
    /// A setting from the environment is not usable.
    #[error("environment variable {name}={value:?} is not valid: {reason}")]
    Config {
        /// The variable's name.
        name: &'static str,
        /// The value found.
        value: String,
        /// What was expected instead.
        reason: String,
    },
    /// The listening socket could not be bound or the server failed.
    #[error("could not serve on {address}: {source}")]
    Io {
        /// The address the server tried to use.
        address: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("outer: {0}")]
    struct Quoting(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("note {0} is not there")]
    struct Missing(u32);

    impl ToolErrorKind for Missing {
        fn kind(&self) -> ErrorKind {
            ErrorKind::NotFound
        }
    }

    fn find(id: u32) -> Result<(), ToolError> {
        Err(Missing(id))?
    }

    fn read() -> Result<(), ToolError> {
        Err(Outer(std::io::Error::new(std::io::ErrorKind::TimedOut, "socket")))?
    }

    /// Its kind is its cause's.
    impl ToolErrorKind for Outer {
        fn kind(&self) -> ErrorKind {
            ToolErrorKind::kind(&self.0)
        }
    }

    #[test]
    fn question_mark_keeps_the_kind_and_the_cause_chain() {
        let missing = find(7).unwrap_err();
        assert_eq!((missing.kind(), missing.message()), (ErrorKind::NotFound, "note 7 is not there"));
        let timed_out = read().unwrap_err();
        assert_eq!((timed_out.kind(), timed_out.message()), (ErrorKind::Timeout, "outer: socket"));
        assert_eq!(ToolError::from(std::io::Error::other("disk full")).kind(), ErrorKind::ExecutionFailed);
        let refused = ToolError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(refused.kind(), ErrorKind::Unavailable);
        let foreign = ToolError::from_error(&Outer(std::io::Error::other("inner")));
        assert_eq!((foreign.kind(), foreign.message()), (ErrorKind::ExecutionFailed, "outer: inner"));
    }

    #[test]
    fn causes_are_chained_once() {
        assert_eq!(error_chain(&Outer(std::io::Error::other("inner"))), "outer: inner");
        assert_eq!(error_chain(&Quoting(std::io::Error::other("inner"))), "outer: inner");
    }
}
