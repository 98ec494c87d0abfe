//! The JSON-RPC id of each call of a session, by the number rmcp gives the
//! call's answer stream (the `/<n>` of its event ids). A client resumes a
//! call's answer (`GET` with `Last-Event-ID`) by that number alone, and
//! rmcp then moves the answer to the new stream and ends the old one
//! normally; the new stream must be kept alive and cancel the call when
//! dropped as the old one did, which needs the call's JSON-RPC id. An id is
//! kept until the call's answer passes, its cancel is sent, or its session ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rmcp::model::RequestId;
use rmcp::transport::streamable_http_server::session::SessionId;

/// The JSON-RPC ids of the calls running in every session, by answer stream number.
#[derive(Debug, Default)]
pub struct CallIds(Mutex<HashMap<SessionId, HashMap<u64, RequestId>>>);

impl CallIds {
    fn lock(&self) -> MutexGuard<'_, HashMap<SessionId, HashMap<u64, RequestId>>> {
        // Nothing panics while holding the lock; a poisoned map is still whole.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `request` as the id of the call answered on stream `stream` of `session`, until forgotten.
    pub fn insert(self: &Arc<Self>, session: &SessionId, stream: u64, request: RequestId) -> KeptCallId {
        self.lock().entry(session.clone()).or_default().insert(stream, request);
        KeptCallId { ids: Arc::clone(self), session: session.clone(), stream }
    }

    /// The id of the call answered on stream `stream` of `session`, if it still runs.
    pub fn get(self: &Arc<Self>, session: &SessionId, stream: u64) -> Option<(RequestId, KeptCallId)> {
        let request = self.lock().get(session)?.get(&stream)?.clone();
        Some((request, KeptCallId { ids: Arc::clone(self), session: session.clone(), stream }))
    }

    /// Forgets every call of `session`, which has ended.
    pub fn end_session(&self, session: &SessionId) {
        self.lock().remove(session);
    }
}

/// A call's id kept in [`CallIds`], forgotten by [`KeptCallId::forget`] (not when dropped:
/// a stream that ends because its answer was resumed elsewhere leaves it kept).
#[derive(Debug)]
pub struct KeptCallId {
    ids: Arc<CallIds>,
    session: SessionId,
    stream: u64,
}

impl KeptCallId {
    /// The call has been answered or cancelled: its id is no longer needed.
    pub fn forget(self) {
        let mut ids = self.ids.lock();
        if let Some(calls) = ids.get_mut(&self.session) {
            calls.remove(&self.stream);
            if calls.is_empty() {
                ids.remove(&self.session);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_kept_until_forgotten_or_its_session_ends() {
        let ids = Arc::new(CallIds::default());
        let (ada, bob): (SessionId, SessionId) = ("ada".into(), "bob".into());
        let kept = ids.insert(&ada, 1, RequestId::Number(3));
        ids.insert(&bob, 1, RequestId::Number(4));
        drop(ids.insert(&ada, 2, RequestId::Number(5)));
        assert_eq!(ids.get(&ada, 2).map(|(id, _)| id), Some(RequestId::Number(5)), "kept when dropped");
        kept.forget();
        assert!(ids.get(&ada, 1).is_none(), "forgotten");
        ids.end_session(&bob);
        assert!(ids.get(&bob, 1).is_none(), "its session ended");
        let (_, kept) = ids.get(&ada, 2).unwrap();
        kept.forget();
        assert!(ids.lock().is_empty(), "nothing kept for a session without calls");
    }
}
