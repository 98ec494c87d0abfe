//! A won claim on an approval's decision, given up unless the decision
//! comes to its end: awaited when it is refused or fails, and on drop when
//! the deciding task stops midway (a panic, a cancellation), so a claim in
//! memory, which has no lease, does not hold the approval until it is
//! dropped. A decider that wins it then finds the approval as it stands
//! (`pending`, or `running` once its call was recorded to run).

use std::sync::Arc;

use futures::FutureExt;

use super::store::{ApprovalStore, ClaimToken};

/// The claim of approval `id`, won with `token`, until it is given up
/// ([`Self::give_up`], or on drop while still held) or kept ([`Self::keep`]).
pub(super) struct HeldClaim {
    store: Arc<dyn ApprovalStore>,
    id: String,
    token: ClaimToken,
    /// Whether it is still to be given up on drop (not given up, nor kept).
    held: bool,
}

impl HeldClaim {
    /// The claim of `id` won in `store` with `token`.
    pub(super) fn new(store: Arc<dyn ApprovalStore>, id: &str, token: ClaimToken) -> Self {
        Self { store, id: id.to_owned(), token, held: true }
    }

    /// The token the claim was won with.
    pub(super) fn token(&self) -> &ClaimToken {
        &self.token
    }

    /// Keeps the claim once the decision is recorded: it is left to lapse
    /// (in Redis) or to go with the approval (in memory), and a decider that
    /// wins it anyway finds the approval decided.
    pub(super) fn keep(mut self) {
        self.held = false;
    }

    /// Gives the claim up (if it still holds the token), so the approval can
    /// be decided again, or is refused as it stands rather than as being
    /// decided; a store that fails is logged (a claim in Redis lapses anyway).
    pub(super) async fn give_up(mut self) {
        release(Arc::clone(&self.store), self.id.clone(), self.token.clone()).await;
        self.held = false;
    }
}

/// Gives up the claim of `id` in `store` if it still holds `token`, logging a failure.
async fn release(store: Arc<dyn ApprovalStore>, id: String, token: ClaimToken) {
    if let Err(error) = store.release(&id, &token).await {
        tracing::error!(approval = %id, %error, "the claim of an undecided approval could not be given up");
    }
}

impl Drop for HeldClaim {
    /// Gives the claim up when the decision stopped midway: at once if the
    /// store answers at once (memory), otherwise in a task of its own.
    fn drop(&mut self) {
        if !self.held {
            return;
        }
        tracing::warn!(approval = %self.id, "deciding an approval stopped before its end; its claim is given up");
        let mut releasing = release(Arc::clone(&self.store), self.id.clone(), self.token.clone()).boxed();
        if (&mut releasing).now_or_never().is_some() {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(releasing)),
            Err(_) => {
                tracing::error!(approval = %self.id, "the claim of an undecided approval could not be given up: no runtime left; it lapses with its lease")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approvals::store::tests::{approval, put};
    use crate::approvals::store::{Claim, MemoryStore};
    use std::time::Duration;

    #[tokio::test]
    async fn a_claim_dropped_undecided_is_given_up_and_a_kept_one_is_not() {
        let store: Arc<dyn ApprovalStore> = Arc::new(MemoryStore::default());
        let live = approval("live", Duration::from_secs(60));
        put(store.as_ref(), &live, live.expires_at).await;
        let lease = Duration::from_secs(60);
        let Claim::Won(token) = store.claim(&live, lease).await.unwrap() else { panic!("the first claim wins") };
        drop(HeldClaim::new(Arc::clone(&store), "live", token));
        let Claim::Won(token) = store.claim(&live, lease).await.unwrap() else { panic!("a dropped claim is given up") };
        HeldClaim::new(Arc::clone(&store), "live", token).keep();
        assert_eq!(store.claim(&live, lease).await.unwrap(), Claim::Taken, "a kept claim holds");
    }
}
