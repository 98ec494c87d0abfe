//! The sessions of `/mcp`: rmcp's [`LocalSessionManager`], counted and
//! bound to the identity that opened them.
//!
//! - Every session rmcp creates is counted, whatever protocol version the
//!   `initialize` that opens it names (rmcp opens one for every
//!   `initialize`), and none it does not: the count is taken where rmcp
//!   creates and closes them. Past `MCP_MAX_SESSIONS` in all, or
//!   `MCP_MAX_SESSIONS_PER_IDENTITY` of one identity's, the creation is
//!   refused and the request answered `429`, so one key cannot hold every
//!   session. Development mode trusts every caller as the one identity
//!   `development`, which a per-identity cap cannot tell apart, so there
//!   only `MCP_MAX_SESSIONS` applies.
//! - A session is its opener's (the MCP specification asks servers to bind
//!   session ids to the user): the `/mcp` route answers a request naming it
//!   from any other identity as one naming a session that does not exist,
//!   `404`, so a session id that leaks lets no one else use, end or even
//!   see that session.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, SessionTransport,
};
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId, SessionManager};

use crate::identity::{Identity, IdentityKind};

tokio::task_local! {
    /// Who sent the `/mcp` request rmcp is handling on this task: the
    /// identity a session it creates belongs to, and why the budget
    /// refused one, if it did.
    static OPENER: Arc<Opener>;
}

/// The identity of a request that may open a session.
struct Opener {
    identity: String,
    /// Whether its sessions count in `MCP_MAX_SESSIONS_PER_IDENTITY`.
    capped: bool,
    refused: Mutex<Option<SessionsRefused>>,
}

/// Why a session was not opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SessionsRefused {
    /// `MCP_MAX_SESSIONS` sessions are open.
    #[error(
        "this orchestrator already keeps MCP_MAX_SESSIONS ({0}) MCP sessions; try again later, or speak MCP 2026-07-28, which needs none"
    )]
    Full(usize),
    /// The identity has `MCP_MAX_SESSIONS_PER_IDENTITY` sessions open.
    #[error(
        "this identity already keeps MCP_MAX_SESSIONS_PER_IDENTITY ({0}) MCP sessions; end one first (DELETE /mcp), let one end after 5 idle minutes, or speak MCP 2026-07-28, which needs none"
    )]
    IdentityFull(usize),
}

/// Why a session was not created or used.
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    /// A budget refused it.
    #[error(transparent)]
    Refused(#[from] SessionsRefused),
    /// rmcp created a session outside [`FleetSessions::opening`].
    #[error("an MCP session was asked for outside an /mcp request")]
    NoOpener,
    /// rmcp's own session error.
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

/// The sessions open now, and those being created.
#[derive(Debug, Default)]
struct OpenSessions {
    /// Every session counted: those rmcp keeps and those it is creating.
    total: usize,
    /// The sessions counted per capped identity; one with none has no entry.
    per_identity: HashMap<String, usize>,
    /// The sessions rmcp keeps, and who opened each.
    owners: HashMap<SessionId, String>,
}

impl OpenSessions {
    /// Counts a session of `identity` (`capped`: also in its own budget).
    fn count(&mut self, identity: &str, capped: bool) {
        self.total += 1;
        if capped {
            *self.per_identity.entry(identity.to_owned()).or_default() += 1;
        }
    }

    /// No longer counts a session of `identity`.
    fn uncount(&mut self, identity: &str) {
        self.total -= 1;
        if let Some(held) = self.per_identity.get_mut(identity) {
            *held -= 1;
            if *held == 0 {
                self.per_identity.remove(identity);
            }
        }
    }
}

/// rmcp's in-process sessions, at most `MCP_MAX_SESSIONS` and
/// `MCP_MAX_SESSIONS_PER_IDENTITY` for one identity, each bound to the
/// identity (its [`name`](crate::identity::Identity::name)) that opened it.
pub struct FleetSessions {
    local: LocalSessionManager,
    open: Mutex<OpenSessions>,
    max_sessions: usize,
    max_per_identity: usize,
}

impl FleetSessions {
    /// No session yet; at most `max_sessions` at once, `max_per_identity` of one identity.
    pub fn new(max_sessions: usize, max_per_identity: usize) -> Self {
        Self { local: LocalSessionManager::default(), open: Mutex::default(), max_sessions, max_per_identity }
    }

    fn lock(&self) -> MutexGuard<'_, OpenSessions> {
        // Nothing panics while holding the lock; a poisoned lock still holds consistent counts.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `serve` (rmcp handling one request of `identity`), so a session
    /// it opens is `identity`'s; `Err` when a budget refused one.
    pub async fn opening<R>(&self, identity: &Identity, serve: impl Future<Output = R>) -> Result<R, SessionsRefused> {
        let opener = Arc::new(Opener {
            identity: identity.name.clone(),
            capped: identity.kind != IdentityKind::Development,
            refused: Mutex::new(None),
        });
        let served = OPENER.scope(Arc::clone(&opener), serve).await;
        match *opener.refused.lock().unwrap_or_else(PoisonError::into_inner) {
            Some(refused) => Err(refused),
            None => Ok(served),
        }
    }

    /// Whether `id` names an open session that `identity` opened.
    pub fn owned_by(&self, id: &str, identity: &str) -> bool {
        self.lock().owners.get(id).is_some_and(|owner| owner == identity)
    }

    /// Counts a session for `opener`, unless a budget refuses it.
    fn admit(&self, opener: &Opener) -> Result<(), SessionsRefused> {
        let mut open = self.lock();
        if open.total >= self.max_sessions {
            return Err(SessionsRefused::Full(self.max_sessions));
        }
        let held = open.per_identity.get(&opener.identity).copied().unwrap_or_default();
        if opener.capped && held >= self.max_per_identity {
            return Err(SessionsRefused::IdentityFull(self.max_per_identity));
        }
        open.count(&opener.identity, opener.capped);
        Ok(())
    }
}

impl SessionManager for FleetSessions {
    type Error = SessionsError;
    type Transport = SessionTransport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let opener = OPENER.try_with(Arc::clone).map_err(|_| SessionsError::NoOpener)?;
        // Counted before rmcp creates it, so concurrent `initialize`s cannot pass the budget together.
        if let Err(refused) = self.admit(&opener) {
            *opener.refused.lock().unwrap_or_else(PoisonError::into_inner) = Some(refused);
            return Err(refused.into());
        }
        match self.local.create_session().await {
            Ok((id, transport)) => {
                self.lock().owners.insert(id.clone(), opener.identity.clone());
                Ok((id, transport))
            }
            Err(error) => {
                self.lock().uncount(&opener.identity);
                Err(error.into())
            }
        }
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
        let mut open = self.lock();
        if let Some(owner) = open.owners.remove(id) {
            open.uncount(&owner);
        }
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
    use module_sdk::Permission;

    use super::*;
    use crate::identity::keys::KeyUser;

    fn key(name: &str) -> Identity {
        let user = KeyUser::Named(name.to_owned());
        Identity {
            name: format!("key:{name}"),
            kind: IdentityKind::ApiKey,
            user,
            permission: Permission::User,
            modules: None,
        }
    }

    #[tokio::test]
    async fn sessions_are_counted_until_they_end_and_are_their_openers() {
        let sessions = FleetSessions::new(1, 1);
        let (ada, bob) = (key("ada"), key("bob"));
        let (id, _transport) = sessions.opening(&ada, sessions.create_session()).await.unwrap().unwrap();
        assert!(sessions.owned_by(&id, &ada.name));
        assert!(!sessions.owned_by(&id, &bob.name), "bound to its opener");
        let refused = sessions.opening(&bob, sessions.create_session()).await;
        assert_eq!(refused.err(), Some(SessionsRefused::Full(1)), "MCP_MAX_SESSIONS is 1");
        sessions.close_session(&id).await.unwrap();
        assert!(!sessions.owned_by(&id, &ada.name), "ended");
        let (id, _transport) = sessions.opening(&bob, sessions.create_session()).await.unwrap().unwrap();
        assert!(sessions.owned_by(&id, &bob.name), "the ended session no longer counts");
        assert!(matches!(sessions.create_session().await, Err(SessionsError::NoOpener)));
    }

    #[tokio::test]
    async fn one_identity_keeps_its_share_and_development_mode_only_the_total() {
        let sessions = FleetSessions::new(4, 2);
        let (ada, bob, development) = (key("ada"), key("bob"), Identity::development());
        let open = |identity| sessions.opening(identity, sessions.create_session());
        let (first, _transport) = open(&ada).await.unwrap().unwrap();
        let _second = open(&ada).await.unwrap().unwrap();
        assert_eq!(open(&ada).await.err(), Some(SessionsRefused::IdentityFull(2)), "ada's share is taken");
        let _bob = open(&bob).await.unwrap().unwrap();
        sessions.close_session(&first).await.unwrap();
        let _third = open(&ada).await.unwrap().unwrap();
        // Development mode's one identity is every caller: only MCP_MAX_SESSIONS applies.
        let _development = open(&development).await.unwrap().unwrap();
        assert_eq!(open(&development).await.err(), Some(SessionsRefused::Full(4)));
        assert_eq!(sessions.lock().per_identity.len(), 2, "development mode is not counted per identity");
    }
}
