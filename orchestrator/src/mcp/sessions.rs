//! The sessions of `/mcp`: rmcp's [`LocalSessionManager`], counted.
//!
//! - Every session rmcp creates is counted, whatever protocol version the
//!   `initialize` that opens it names (rmcp opens one for every
//!   `initialize`), and none it does not: the count is taken where rmcp
//!   creates and closes them. Past `MCP_MAX_SESSIONS` the creation is
//!   refused and the request answered `429`.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, SessionTransport,
};
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId, SessionManager};
use tokio::sync::Mutex;

tokio::task_local! {
    /// Whether the budget refused a session to the `/mcp` request rmcp is
    /// handling on this task.
    static REFUSED: Arc<AtomicBool>;
}

/// Why a session was not created or used.
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    /// `MCP_MAX_SESSIONS` sessions are open.
    #[error(
        "this orchestrator already keeps MCP_MAX_SESSIONS ({0}) MCP sessions; try again later, or speak MCP 2026-07-28, which needs none"
    )]
    Full(usize),
    /// rmcp created a session outside [`FleetSessions::opening`].
    #[error("an MCP session was asked for outside an /mcp request")]
    NoOpener,
    /// rmcp's own session error.
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

/// rmcp's in-process sessions, at most `MCP_MAX_SESSIONS`.
pub struct FleetSessions {
    local: LocalSessionManager,
    /// The sessions rmcp keeps.
    open: Mutex<HashSet<SessionId>>,
    max_sessions: usize,
}

impl FleetSessions {
    /// No session yet; at most `max_sessions` at once.
    pub fn new(max_sessions: usize) -> Self {
        Self { local: LocalSessionManager::default(), open: Mutex::default(), max_sessions }
    }

    /// Runs `serve` (rmcp handling one request), telling whether it was
    /// refused a session: `Err(Full)` then.
    pub async fn opening<R>(&self, serve: impl Future<Output = R>) -> Result<R, SessionsError> {
        let refused = Arc::new(AtomicBool::new(false));
        let served = REFUSED.scope(Arc::clone(&refused), serve).await;
        match refused.load(Ordering::Relaxed) {
            true => Err(SessionsError::Full(self.max_sessions)),
            false => Ok(served),
        }
    }
}

impl SessionManager for FleetSessions {
    type Error = SessionsError;
    type Transport = SessionTransport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let refused = REFUSED.try_with(Arc::clone).map_err(|_| SessionsError::NoOpener)?;
        // Held while rmcp creates the session, so concurrent `initialize`s cannot pass the budget together.
        let mut open = self.open.lock().await;
        if open.len() >= self.max_sessions {
            refused.store(true, Ordering::Relaxed);
            return Err(SessionsError::Full(self.max_sessions));
        }
        let (id, transport) = self.local.create_session().await?;
        open.insert(id.clone());
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.local.initialize_session(id, message).await?)
    }

    /// Called for a `DELETE` and when rmcp's session ends on its own (idle,
    /// or its handshake failed): either way it no longer counts.
    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let closed = self.local.close_session(id).await;
        self.open.lock().await.remove(id);
        Ok(closed?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.local.has_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.local.create_stream(id, message).await?)
    }

    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), Self::Error> {
        Ok(self.local.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.local.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.local.resume(id, last_event_id).await?)
    }
}
