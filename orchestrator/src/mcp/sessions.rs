//! The sessions of `/mcp`: rmcp's [`LocalSessionManager`], counted and
//! bound to the identity that opened them.
//!
//! - Every session rmcp creates is counted, whatever protocol version the
//!   `initialize` that opens it names (rmcp opens one for every
//!   `initialize`), and none it does not: the count is taken where rmcp
//!   creates and closes them. Past `MCP_MAX_SESSIONS` the creation is
//!   refused and the request answered `429`.
//! - A session is its opener's (the MCP specification asks servers to bind
//!   session ids to the user): the `/mcp` route answers a request naming it
//!   from any other identity as one naming a session that does not exist,
//!   `404`, so a session id that leaks lets no one else use, end or even
//!   see that session.

use std::collections::HashMap;
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
    /// Who sent the `/mcp` request rmcp is handling on this task: the
    /// identity a session it creates belongs to, and whether the budget
    /// refused one.
    static OPENER: Arc<Opener>;
}

/// The identity of a request that may open a session.
struct Opener {
    identity: String,
    refused: AtomicBool,
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

/// rmcp's in-process sessions, at most `MCP_MAX_SESSIONS`, each bound to
/// the identity (its [`name`](crate::identity::Identity::name)) that opened it.
pub struct FleetSessions {
    local: LocalSessionManager,
    /// The sessions rmcp keeps, and who opened each.
    owners: Mutex<HashMap<SessionId, String>>,
    max_sessions: usize,
}

impl FleetSessions {
    /// No session yet; at most `max_sessions` at once.
    pub fn new(max_sessions: usize) -> Self {
        Self { local: LocalSessionManager::default(), owners: Mutex::default(), max_sessions }
    }

    /// Runs `serve` (rmcp handling one request of `identity`), so a session
    /// it opens is `identity`'s; `Err(Full)` when the budget refused one.
    pub async fn opening<R>(&self, identity: &str, serve: impl Future<Output = R>) -> Result<R, SessionsError> {
        let opener = Arc::new(Opener { identity: identity.to_owned(), refused: AtomicBool::new(false) });
        let served = OPENER.scope(Arc::clone(&opener), serve).await;
        match opener.refused.load(Ordering::Relaxed) {
            true => Err(SessionsError::Full(self.max_sessions)),
            false => Ok(served),
        }
    }

    /// Whether `id` names an open session that `identity` opened.
    pub async fn owned_by(&self, id: &str, identity: &str) -> bool {
        self.owners.lock().await.get(id).is_some_and(|owner| owner == identity)
    }
}

impl SessionManager for FleetSessions {
    type Error = SessionsError;
    type Transport = SessionTransport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let opener = OPENER.try_with(Arc::clone).map_err(|_| SessionsError::NoOpener)?;
        // Held while rmcp creates the session, so concurrent `initialize`s cannot pass the budget together.
        let mut owners = self.owners.lock().await;
        if owners.len() >= self.max_sessions {
            opener.refused.store(true, Ordering::Relaxed);
            return Err(SessionsError::Full(self.max_sessions));
        }
        let (id, transport) = self.local.create_session().await?;
        owners.insert(id.clone(), opener.identity.clone());
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
        self.owners.lock().await.remove(id);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sessions_are_counted_until_they_end_and_are_their_openers() {
        let sessions = FleetSessions::new(1);
        let (id, _transport) = sessions.opening("ada", sessions.create_session()).await.unwrap().unwrap();
        assert!(sessions.owned_by(&id, "ada").await);
        assert!(!sessions.owned_by(&id, "bob").await, "bound to its opener");
        let refused = sessions.opening("bob", sessions.create_session()).await;
        assert!(matches!(refused, Err(SessionsError::Full(1))), "MCP_MAX_SESSIONS is 1");
        sessions.close_session(&id).await.unwrap();
        assert!(!sessions.owned_by(&id, "ada").await, "ended");
        let (id, _transport) = sessions.opening("bob", sessions.create_session()).await.unwrap().unwrap();
        assert!(sessions.owned_by(&id, "bob").await, "the ended session no longer counts");
        assert!(matches!(sessions.create_session().await, Err(SessionsError::NoOpener)));
    }
}
