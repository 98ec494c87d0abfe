//! The sessions of `/mcp`: rmcp's [`LocalSessionManager`], counted and
//! bound to the identity that opened them.
//!
//! - Every session rmcp creates is counted, whatever protocol version the
//!   `initialize` that opens it names (rmcp opens one for every
//!   `initialize`), and none it does not: the count is taken where rmcp
//!   creates and closes them. Past `MCP_MAX_SESSIONS` in all, or
//!   `MCP_MAX_SESSIONS_PER_IDENTITY` of one identity's, an `initialize` is
//!   answered `429`, so one key cannot hold every session. Development mode
//!   trusts every caller as the one identity `development`, which a
//!   per-identity cap cannot tell apart, so there only `MCP_MAX_SESSIONS`
//!   applies.
//! - The refusal comes before rmcp sees the request: the `/mcp` route
//!   reserves a [`SessionSlot`] for every message that may be an
//!   `initialize` ([`may_open_session`]), and rmcp creates sessions only
//!   in slots. rmcp logs every error of a session manager as an internal
//!   error, so a refusal made inside rmcp would cost an `ERROR` line each,
//!   a log flood any client could cause.
//! - A session is its opener's (the MCP specification asks servers to bind
//!   session ids to the user): bound to the opener's whole
//!   [`Grant`] (name, user, permission and modules), not only its name, as
//!   every JWT of one user has the one name `jwt:<user>`. The `/mcp` route
//!   answers a request naming it from any other grant, another identity or
//!   a token of the same user with other claims, as one naming a session
//!   that does not exist, `404`, so a session id that leaks lets no one
//!   else use, end or even see that session, nor replay (`Last-Event-ID`)
//!   the answers its opener was given.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, RequestId, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionHandle, LocalSessionManager, LocalSessionManagerError, SessionTransport,
};
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId, SessionManager};

use crate::identity::{Grant, Identity};
use crate::mcp::call_ids::{CallIds, KeptCallId};
use crate::mcp::cancel_on_drop::CancelOnDrop;
use crate::mcp::keep_alive::KeptAlive;

tokio::task_local! {
    /// The slot reserved for the session the `/mcp` request rmcp is
    /// handling on this task may open, if it may open one.
    static OPENER: Mutex<Option<SessionSlot>>;
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
    /// rmcp created a session for a request that has no [`SessionSlot`]
    /// (one [`may_open_session`] judged could not open one).
    #[error("an MCP session was asked for by a request that reserved none")]
    NoSlot,
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
    /// The sessions rmcp keeps, and the grant of who opened each.
    owners: HashMap<SessionId, Grant>,
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
/// `MCP_MAX_SESSIONS_PER_IDENTITY` for one identity (by its
/// [`name`](crate::identity::Identity::name)), each bound to the grant of
/// the identity that opened it.
pub struct FleetSessions {
    local: LocalSessionManager,
    open: Mutex<OpenSessions>,
    /// The JSON-RPC ids of the calls running, for a resume of their answers.
    calls: Arc<CallIds>,
    max_sessions: usize,
    max_per_identity: usize,
}

impl FleetSessions {
    /// No session yet; at most `max_sessions` at once, `max_per_identity` of
    /// one identity, each ended after `idle` without a message, a call
    /// running or a `GET` stream open.
    pub fn new(max_sessions: usize, max_per_identity: usize, idle: Duration) -> Self {
        let mut local = LocalSessionManager::default();
        local.session_config.keep_alive = Some(idle);
        // rmcp would keep the stream of every request its client cancelled
        // (up to 16 events each) for 60 s, with no bound on their number,
        // for a resume by `Last-Event-ID`: a session cancelling calls at a
        // high rate (closing their streams, see `CancelOnDrop`) would grow
        // memory by rate x 60 s x size. None is kept (an answered
        // request's stream rmcp drops at once).
        local.session_config.completed_cache_ttl = Duration::ZERO;
        Self { local, open: Mutex::default(), calls: Arc::default(), max_sessions, max_per_identity }
    }

    fn lock(&self) -> MutexGuard<'_, OpenSessions> {
        // Nothing panics while holding the lock; a poisoned lock still holds consistent counts.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A slot for a session of `identity`, counted until rmcp creates the
    /// session in it or it is dropped unused; refused past either budget.
    pub fn reserve(self: &Arc<Self>, identity: &Identity) -> Result<SessionSlot, SessionsRefused> {
        let capped = identity.has_own_share();
        let mut open = self.lock();
        if open.total >= self.max_sessions {
            return Err(SessionsRefused::Full(self.max_sessions));
        }
        let held = open.per_identity.get(&identity.name).copied().unwrap_or_default();
        if capped && held >= self.max_per_identity {
            return Err(SessionsRefused::IdentityFull(self.max_per_identity));
        }
        open.count(&identity.name, capped);
        Ok(SessionSlot { sessions: Arc::clone(self), grant: identity.grant(), used: false })
    }

    /// Runs `serve` (rmcp handling one request), so a session it opens
    /// takes `slot`; without a slot it can open none.
    pub async fn opening<R>(&self, slot: Option<SessionSlot>, serve: impl Future<Output = R>) -> R {
        OPENER.scope(Mutex::new(slot), serve).await
    }

    /// `stream`, the answer to `request` (if a request) of `session`, or its
    /// `GET` stream resumed (`common`): kept alive while open if either,
    /// cancelling the request when dropped before its answer.
    fn answer_stream<S: Stream<Item = ServerSseMessage> + Unpin>(
        &self,
        session: Option<LocalSessionHandle>,
        request: Option<(RequestId, KeptCallId)>,
        common: bool,
        stream: S,
    ) -> CancelOnDrop<KeptAlive<S>> {
        // A call runs without a message for as long as its tool takes, and a
        // `GET` stream waits for notifications: the session is not idle meanwhile.
        let kept_alive = common || request.is_some();
        let stream = KeptAlive::new(stream, session.clone().filter(|_| kept_alive), self.touch_every());
        let (request, kept) = request.unzip();
        CancelOnDrop::new(stream, session, request, kept)
    }

    /// How often a stream kept alive touches its session: half its idle time.
    fn touch_every(&self) -> Option<Duration> {
        self.local.session_config.keep_alive.map(|idle| idle / 2)
    }

    /// Whether `id` names an open session opened with `grant`.
    pub fn owned_by(&self, id: &str, grant: &Grant) -> bool {
        self.lock().owners.get(id).is_some_and(|owner| owner == grant)
    }
}

/// A session counted before rmcp creates it (see [`FleetSessions::reserve`]).
pub struct SessionSlot {
    sessions: Arc<FleetSessions>,
    /// The opener's grant, which the session is bound to.
    grant: Grant,
    /// Whether a session was created in it, which then counts until it ends.
    used: bool,
}

impl Drop for SessionSlot {
    fn drop(&mut self) {
        if !self.used {
            self.sessions.lock().uncount(self.grant.name());
        }
    }
}

/// Whether the JSON-RPC message `body` may be an `initialize`, the one
/// message rmcp opens a session for: its `method` read as rmcp reads it
/// (escapes and all), and a body that does not read as a message with a
/// plain `method` counted as one that may (rmcp may read it otherwise:
/// duplicate keys, say), so no `initialize` reaches rmcp without a slot.
/// A body holding neither the word nor any escape cannot be one: that is
/// told without parsing it (every stateless 2026-07-28 call comes here).
pub fn may_open_session(body: &[u8]) -> bool {
    if memchr::memchr(b'\\', body).is_none() && memchr::memmem::find(body, b"initialize").is_none() {
        return false;
    }
    #[derive(serde::Deserialize)]
    struct Message<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    match crate::json_body::read_json::<Message>(body) {
        Ok(message) => message.method.is_some_and(|method| method == "initialize"),
        Err(_) => true,
    }
}

impl SessionManager for FleetSessions {
    type Error = SessionsError;
    type Transport = SessionTransport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let slot = OPENER.try_with(|slot| slot.lock().unwrap_or_else(PoisonError::into_inner).take());
        let mut slot = slot.ok().flatten().ok_or(SessionsError::NoSlot)?;
        // Dropped unused (uncounted) if rmcp fails to create it.
        let (id, transport) = self.local.create_session().await?;
        self.lock().owners.insert(id.clone(), slot.grant.clone());
        slot.used = true;
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
        self.calls.end_session(id);
        let mut open = self.lock();
        if let Some(owner) = open.owners.remove(id) {
            open.uncount(owner.name());
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
        let request = match &message {
            ClientJsonRpcMessage::Request(request) => Some(request.id.clone()),
            _ => None,
        };
        // rmcp's `create_stream`, keeping the number of the request's answer stream.
        let session = self.local.sessions.read().await.get(id).cloned();
        let session = session.ok_or_else(|| LocalSessionManagerError::SessionNotFound(id.clone()))?;
        let mut receiver = session.establish_request_wise_channel().await.map_err(LocalSessionManagerError::from)?;
        let number = receiver.http_request_id;
        session.push_message(message, number).await.map_err(LocalSessionManagerError::from)?;
        let request = request.zip(number).map(|(request, number)| {
            let kept = self.calls.insert(id, number, request.clone());
            (request, kept)
        });
        let stream = futures::stream::poll_fn(move |cx| receiver.inner.poll_recv(cx));
        Ok(self.answer_stream(Some(session), request, false, stream))
    }

    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), Self::Error> {
        Ok(self.local.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        // A client holding `GET /mcp` open waits for the session's
        // notifications (`list_changed`): the session is not idle meanwhile.
        let session = self.local.sessions.read().await.get(id).cloned();
        let stream = self.local.create_standalone_stream(id).await?;
        Ok(KeptAlive::new(Box::pin(stream), session, self.touch_every()))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        // A call's answer resumed (`<index>/<stream number>`) is kept alive
        // and cancelled when dropped, as the stream it moves from was; the
        // `GET` stream resumed (`<index>`) is kept alive, as it was opened.
        let number = last_event_id.split_once('/').map(|(_, number)| number.parse().ok());
        let request = number.flatten().and_then(|number| self.calls.get(id, number));
        let session = self.local.sessions.read().await.get(id).cloned();
        let stream = self.local.resume(id, last_event_id).await?;
        Ok(self.answer_stream(session, request, number.is_none(), Box::pin(stream)))
    }
}

#[cfg(test)]
mod tests {
    use module_sdk::Permission;

    use super::*;

    fn key(name: &str) -> Identity {
        Identity::user_key(name)
    }

    /// A session opened in a slot of `identity`'s, or why none was.
    async fn open(sessions: &Arc<FleetSessions>, identity: &Identity) -> Result<SessionId, SessionsRefused> {
        let slot = sessions.reserve(identity)?;
        let (id, _transport) = sessions.opening(Some(slot), sessions.create_session()).await.unwrap();
        Ok(id)
    }

    #[tokio::test]
    async fn sessions_are_counted_until_they_end_and_are_their_openers() {
        let sessions = Arc::new(FleetSessions::new(1, 1, Duration::from_secs(300)));
        let (ada, bob) = (key("ada"), key("bob"));
        let id = open(&sessions, &ada).await.unwrap();
        assert!(sessions.owned_by(&id, &ada.grant()));
        assert!(!sessions.owned_by(&id, &bob.grant()), "bound to its opener");
        let narrower = Identity { permission: Permission::Guest, ..ada.clone() };
        assert!(!sessions.owned_by(&id, &narrower.grant()), "bound to its opener's grant, not only its name");
        assert_eq!(open(&sessions, &bob).await.err(), Some(SessionsRefused::Full(1)), "MCP_MAX_SESSIONS is 1");
        sessions.close_session(&id).await.unwrap();
        assert!(!sessions.owned_by(&id, &ada.grant()), "ended");
        let id = open(&sessions, &bob).await.unwrap();
        assert!(sessions.owned_by(&id, &bob.grant()), "the ended session no longer counts");
        assert!(matches!(sessions.create_session().await, Err(SessionsError::NoSlot)));
        assert!(matches!(sessions.opening(None, sessions.create_session()).await, Err(SessionsError::NoSlot)));
    }

    #[tokio::test]
    async fn a_slot_counts_until_used_or_dropped() {
        let sessions = Arc::new(FleetSessions::new(1, 1, Duration::from_secs(300)));
        let slot = sessions.reserve(&key("ada")).unwrap();
        assert_eq!(sessions.reserve(&key("bob")).err(), Some(SessionsRefused::Full(1)), "the slot counts");
        drop(slot);
        assert_eq!(sessions.lock().total, 0, "an unused slot no longer counts");
        assert!(open(&sessions, &key("bob")).await.is_ok());
    }

    #[tokio::test]
    async fn one_identity_keeps_its_share_and_development_mode_only_the_total() {
        let sessions = Arc::new(FleetSessions::new(4, 2, Duration::from_secs(300)));
        let (ada, bob, development) = (key("ada"), key("bob"), Identity::development());
        let first = open(&sessions, &ada).await.unwrap();
        // A grant of the same name (another JWT of one user) shares its share.
        open(&sessions, &Identity { modules: Some(Vec::new()), ..ada.clone() }).await.unwrap();
        assert_eq!(open(&sessions, &ada).await.err(), Some(SessionsRefused::IdentityFull(2)), "ada's share is taken");
        open(&sessions, &bob).await.unwrap();
        sessions.close_session(&first).await.unwrap();
        open(&sessions, &ada).await.unwrap();
        // Development mode's one identity is every caller: only MCP_MAX_SESSIONS applies.
        open(&sessions, &development).await.unwrap();
        assert_eq!(open(&sessions, &development).await.err(), Some(SessionsRefused::Full(4)));
        assert_eq!(sessions.lock().per_identity.len(), 2, "development mode is not counted per identity");
    }

    #[test]
    fn initializes_and_what_may_be_one_reserve_a_slot() {
        for body in [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"\u0069nitialize","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"initialize"}"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"initialize"}]"#,
            "not json, but initialize",
            r#"{"method":"\u0069nit"#,
        ] {
            assert!(may_open_session(body.as_bytes()), "{body}");
        }
        for body in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"a":"initialize"}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"a":"\n\u0041"}}"#,
            // Neither the word nor an escape: no reading makes it an initialize.
            "not json",
        ] {
            assert!(!may_open_session(body.as_bytes()), "{body}");
        }
    }
}
