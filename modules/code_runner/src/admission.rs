//! Who may run now: at most N runs at once (later calls wait for a turn
//! until their own deadline), and at most M runs of one user. Each turn
//! has a slot number below N, unique among the runs going; slots are reused
//! in the order they were freed, so the slot whose run just ended (whose
//! killed processes may still be exiting) is taken last.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use module_sdk::ToolError;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The turns of the whole module and of each user.
#[derive(Debug)]
pub struct Admission {
    turns: Arc<Semaphore>,
    free_slots: Mutex<VecDeque<u32>>,
    per_user: Mutex<HashMap<String, u64>>,
    max_per_user: u64,
}

/// A run's turn (and its user's count), given back when dropped.
#[derive(Debug)]
pub struct Turn<'a> {
    admission: &'a Admission,
    user: String,
    permit: Option<OwnedSemaphorePermit>,
    slot: Option<u32>,
}

impl Admission {
    /// `runs` turns at once, `per_user` of them for one user.
    pub fn new(runs: usize, per_user: u64) -> Self {
        let slots = u32::try_from(runs).unwrap_or(u32::MAX);
        Self {
            turns: Arc::new(Semaphore::new(runs)),
            free_slots: Mutex::new((0..slots).collect()),
            per_user: Mutex::new(HashMap::new()),
            max_per_user: per_user,
        }
    }

    /// A turn for `user`, waiting at most `wait` for one; a user at the cap
    /// is refused at once.
    pub async fn enter(&self, user: &str, wait: Duration) -> Result<Turn<'_>, ToolError> {
        {
            let mut per_user = lock(&self.per_user);
            let running = per_user.entry(user.to_owned()).or_insert(0);
            if *running >= self.max_per_user {
                return Err(ToolError::unavailable(format!(
                    "this user already has {running} runs going, the most allowed (CODE_MAX_RUNS_PER_USER); wait for one to finish"
                )));
            }
            *running += 1;
        }
        // Counted from here on: dropping the turn, even without a permit, gives the count back.
        let mut turn = Turn { admission: self, user: user.to_owned(), permit: None, slot: None };
        match tokio::time::timeout(wait, self.turns.clone().acquire_owned()).await {
            Ok(Ok(permit)) => {
                turn.permit = Some(permit);
                // A permit means a free slot: there are as many slots as permits.
                turn.slot = lock(&self.free_slots).pop_front();
                Ok(turn)
            }
            Ok(Err(_)) | Err(_) => Err(ToolError::unavailable(format!(
                "every sandbox stayed busy for {} s (CODE_MAX_CONCURRENT_RUNS runs at once, CODE_QUEUE_WAIT_SECONDS); try again later",
                wait.as_secs_f64()
            ))),
        }
    }
}

impl Turn<'_> {
    /// This run's slot, below the number of runs at once.
    pub fn slot(&self) -> u32 {
        self.slot.unwrap_or(0)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            lock(&self.admission.free_slots).push_back(slot);
        }
        let mut per_user = lock(&self.admission.per_user);
        if let Some(running) = per_user.get_mut(&self.user) {
            *running = running.saturating_sub(1);
            if *running == 0 {
                per_user.remove(&self.user);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn per_user_cap_and_queue_deadline() {
        let admission = Admission::new(2, 1);
        let first = admission.enter("ann", Duration::ZERO).await.unwrap();
        assert_eq!(first.slot(), 0);
        assert!(admission.enter("ann", Duration::ZERO).await.unwrap_err().message().contains("CODE_MAX_RUNS_PER_USER"));
        let second = admission.enter("bob", Duration::ZERO).await.unwrap();
        let busy = admission.enter("cid", Duration::from_millis(10)).await.unwrap_err();
        assert!(busy.message().contains("CODE_QUEUE_WAIT_SECONDS"), "{}", busy.message());
        drop(first);
        assert!(admission.per_user.lock().unwrap().get("cid").is_none(), "a refused call gave its count back");
        let again = admission.enter("ann", Duration::ZERO).await.unwrap();
        assert_eq!((second.slot(), again.slot()), (1, 0), "slots are unique among the runs going");
        drop((second, again));
        assert!(admission.per_user.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn the_slot_freed_last_is_reused_last() {
        let admission = Admission::new(3, 3);
        let first = admission.enter("ann", Duration::ZERO).await.unwrap();
        assert_eq!(first.slot(), 0);
        drop(first);
        let next = admission.enter("ann", Duration::ZERO).await.unwrap();
        assert_eq!(next.slot(), 1, "a slot whose run just ended waits behind the slots freed before it");
        let after = admission.enter("ann", Duration::ZERO).await.unwrap();
        let last = admission.enter("ann", Duration::ZERO).await.unwrap();
        assert_eq!((after.slot(), last.slot()), (2, 0));
    }
}
