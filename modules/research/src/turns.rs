//! Work that only so many calls may do at once (reading page bodies,
//! laying pages out): a call waits its turn, until a deadline.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// At most `count` turns held at once; a turn ends when it is dropped.
#[derive(Debug, Clone)]
pub struct Turns {
    semaphore: Arc<Semaphore>,
    count: usize,
}

impl Turns {
    /// `count` turns (at least one).
    pub fn new(count: usize) -> Self {
        let count = count.max(1);
        Self { semaphore: Arc::new(Semaphore::new(count)), count }
    }

    /// How many turns there are.
    pub fn count(&self) -> usize {
        self.count
    }

    /// A turn, waiting for one until `deadline`; a free turn is taken even
    /// when the deadline has passed. `None` when none came in time.
    pub async fn wait_until(&self, deadline: Instant) -> Option<OwnedSemaphorePermit> {
        tokio::time::timeout_at(deadline.into(), self.semaphore.clone().acquire_owned()).await.ok()?.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_turn_waits_for_one_to_end_and_gives_up_at_its_deadline() {
        let turns = Turns::new(1);
        let held = turns.wait_until(Instant::now()).await.expect("a free turn is taken at once, deadline or not");
        assert!(turns.wait_until(Instant::now() + Duration::from_millis(50)).await.is_none(), "none free in time");
        let waiting = tokio::spawn({
            let turns = turns.clone();
            async move { turns.wait_until(Instant::now() + Duration::from_secs(30)).await.is_some() }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(held);
        assert!(waiting.await.unwrap(), "the waiting call got the turn given back");
        assert_eq!(Turns::new(0).count(), 1);
    }
}
