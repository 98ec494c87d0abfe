//! How many calls each module gets at once: a semaphore per module, so one
//! caller's burst of calls waits its turn instead of opening a connection
//! per call and starving every other caller of that module.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::NameMap;

/// A fixed number of call slots per configured module.
#[derive(Debug)]
pub struct CallSlots {
    per_module: NameMap<Arc<Semaphore>>,
}

impl CallSlots {
    /// `slots` call slots (at least one) for each of `modules`.
    pub fn new<'a>(modules: impl IntoIterator<Item = &'a String>, slots: usize) -> Self {
        let slots = slots.clamp(1, Semaphore::MAX_PERMITS);
        let per_module = modules.into_iter().map(|name| (name.clone(), Arc::new(Semaphore::new(slots)))).collect();
        Self { per_module }
    }

    /// Waits for a free slot of `module`; the call holds it until the permit
    /// drops. A module that is not configured has no slots to wait for.
    pub async fn acquire(&self, module: &str) -> Option<OwnedSemaphorePermit> {
        let semaphore = Arc::clone(self.per_module.get(module)?);
        semaphore.acquire_owned().await.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    #[tokio::test]
    async fn a_module_gets_its_slots_and_then_waits() {
        let modules = ["m".to_owned()];
        let slots = CallSlots::new(&modules, 2);
        let first = slots.acquire("m").await;
        let _second = slots.acquire("m").await;
        assert!(first.is_some());
        assert!(slots.acquire("m").now_or_never().is_none(), "a third call must wait for a slot");
        drop(first);
        assert!(slots.acquire("m").await.is_some());
        assert!(slots.acquire("other").await.is_none());
    }
}
