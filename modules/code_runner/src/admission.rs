//! Who may run now: at most N runs at once (later calls wait for a turn
//! until their own deadline), and at most M runs of one user.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use module_sdk::ToolError;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The turns of the whole module and of each user.
#[derive(Debug)]
pub struct Admission {
    turns: Arc<Semaphore>,
    per_user: Mutex<HashMap<String, u64>>,
    max_per_user: u64,
}

/// A run's turn (and its user's count), given back when dropped.
#[derive(Debug)]
pub struct Turn<'a> {
    admission: &'a Admission,
    user: String,
    permit: Option<OwnedSemaphorePermit>,
}

impl Admission {
    /// `runs` turns at once, `per_user` of them for one user.
    pub fn new(runs: usize, per_user: u64) -> Self {
        Self { turns: Arc::new(Semaphore::new(runs)), per_user: Mutex::new(HashMap::new()), max_per_user: per_user }
    }

    /// A turn for `user`, waiting at most `wait` for one; a user at the cap
    /// is refused at once.
    pub async fn enter(&self, user: &str, wait: Duration) -> Result<Turn<'_>, ToolError> {
        {
            let mut per_user = self.per_user.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let running = per_user.entry(user.to_owned()).or_insert(0);
            if *running >= self.max_per_user {
                return Err(ToolError::unavailable(format!(
                    "this user already has {running} runs going, the most allowed (CODE_MAX_RUNS_PER_USER); wait for one to finish"
                )));
            }
            *running += 1;
        }
        // Counted from here on: dropping the turn, even without a permit, gives the count back.
        let mut turn = Turn { admission: self, user: user.to_owned(), permit: None };
        match tokio::time::timeout(wait, self.turns.clone().acquire_owned()).await {
            Ok(Ok(permit)) => {
                turn.permit = Some(permit);
                Ok(turn)
            }
            Ok(Err(_)) | Err(_) => Err(ToolError::unavailable(format!(
                "every sandbox stayed busy for {} s (CODE_MAX_CONCURRENT_RUNS runs at once, CODE_QUEUE_WAIT_SECONDS); try again later",
                wait.as_secs_f64()
            ))),
        }
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut per_user = self.admission.per_user.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
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
        assert!(admission.enter("ann", Duration::ZERO).await.unwrap_err().message().contains("CODE_MAX_RUNS_PER_USER"));
        let second = admission.enter("bob", Duration::ZERO).await.unwrap();
        let busy = admission.enter("cid", Duration::from_millis(10)).await.unwrap_err();
        assert!(busy.message().contains("CODE_QUEUE_WAIT_SECONDS"), "{}", busy.message());
        drop(first);
        assert!(admission.per_user.lock().unwrap().get("cid").is_none(), "a refused call gave its count back");
        let again = admission.enter("ann", Duration::ZERO).await.unwrap();
        drop((second, again));
        assert!(admission.per_user.lock().unwrap().is_empty());
    }
}
