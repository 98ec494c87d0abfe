//! The event streams `/mcp` keeps open: a 2025-11-25 session's `GET /mcp`
//! and a 2026-07-28 client's `subscriptions/listen`. Each holds one of the
//! `MAX_CONNECTIONS` connections for as long as its client keeps it, so
//! they are counted: at most `MCP_MAX_STREAMS` at once, and
//! `MCP_MAX_STREAMS_PER_IDENTITY` for one identity, so streams can never
//! take every connection, nor one identity every stream. Development mode
//! trusts every caller as the one identity `development`, so there only
//! `MCP_MAX_STREAMS` applies (as `MCP_MAX_SESSIONS` to its sessions).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::identity::Identity;

/// Why a stream was not opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamRefused {
    /// `MCP_MAX_STREAMS` streams are open.
    #[error(
        "this orchestrator already keeps MCP_MAX_STREAMS ({0}) MCP event streams open (GET /mcp and subscriptions/listen); try again later"
    )]
    Full(usize),
    /// The identity has `MCP_MAX_STREAMS_PER_IDENTITY` streams open.
    #[error(
        "this identity already keeps MCP_MAX_STREAMS_PER_IDENTITY ({0}) MCP event streams open (GET /mcp and subscriptions/listen); close one first"
    )]
    IdentityFull(usize),
}

/// The open event streams of `/mcp`, in all and per identity.
#[derive(Debug)]
pub struct StreamBudget {
    max_streams: usize,
    max_per_identity: usize,
    open: Mutex<OpenStreams>,
}

/// The streams open now.
#[derive(Debug, Default)]
struct OpenStreams {
    total: usize,
    /// Per identity name of those with their own share
    /// ([`Identity::has_own_share`]); an identity with none has no entry.
    per_identity: HashMap<String, usize>,
}

impl StreamBudget {
    /// No stream open; at most `max_streams`, `max_per_identity` per identity.
    pub fn new(max_streams: usize, max_per_identity: usize) -> Arc<Self> {
        Arc::new(Self { max_streams, max_per_identity, open: Mutex::default() })
    }

    fn lock(&self) -> MutexGuard<'_, OpenStreams> {
        // Nothing panics while holding the lock; a poisoned lock still holds consistent counts.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A stream for `identity`, counted until the permit is dropped;
    /// refused past either budget.
    pub fn open(self: &Arc<Self>, identity: &Identity) -> Result<StreamPermit, StreamRefused> {
        let mut open = self.lock();
        if open.total >= self.max_streams {
            return Err(StreamRefused::Full(self.max_streams));
        }
        if identity.has_own_share() {
            let held = open.per_identity.entry(identity.name.clone()).or_default();
            if *held >= self.max_per_identity {
                return Err(StreamRefused::IdentityFull(self.max_per_identity));
            }
            *held += 1;
        }
        open.total += 1;
        Ok(StreamPermit { budget: Arc::clone(self), identity: identity.name.clone() })
    }
}

/// One open stream, counted until dropped (the stream ended or its client went away).
#[derive(Debug)]
pub struct StreamPermit {
    budget: Arc<StreamBudget>,
    identity: String,
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        let mut open = self.budget.lock();
        open.total -= 1;
        if let Some(held) = open.per_identity.get_mut(&self.identity) {
            *held -= 1;
            if *held == 0 {
                open.per_identity.remove(&self.identity);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_counted_in_all_and_per_identity_until_dropped() {
        let budget = StreamBudget::new(3, 2);
        let [ada, bob, carol] = ["ada", "bob", "carol"].map(Identity::user_key);
        let adas = [budget.open(&ada).unwrap(), budget.open(&ada).unwrap()];
        assert_eq!(budget.open(&ada).unwrap_err(), StreamRefused::IdentityFull(2));
        let bobs = budget.open(&bob).unwrap();
        assert_eq!(budget.open(&carol).unwrap_err(), StreamRefused::Full(3));
        drop(bobs);
        let carols = budget.open(&carol).unwrap();
        drop(adas);
        assert_eq!(budget.lock().per_identity.len(), 1, "an identity without streams is forgotten");
        assert!(budget.open(&ada).is_ok());
        drop(carols);
        assert_eq!(budget.lock().total, 0);
    }

    #[test]
    fn development_mode_has_only_the_total() {
        let budget = StreamBudget::new(3, 1);
        let development = Identity::development();
        let streams = [(); 3].map(|()| budget.open(&development).unwrap());
        assert_eq!(budget.open(&development).unwrap_err(), StreamRefused::Full(3));
        assert!(budget.lock().per_identity.is_empty(), "development mode is not counted per identity");
        drop(streams);
        assert_eq!(budget.lock().total, 0);
    }
}
