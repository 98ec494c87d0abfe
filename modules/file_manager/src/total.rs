//! The bytes all users' records take together, held under
//! `STORE_MAX_BYTES`: per-user quotas alone let the number of users (each
//! orchestrator identity, or any id a service identity names) fill the
//! disk.
//!
//! Counted from the records' sizes on disk when the store opens, then kept
//! up to date by each write (which reserves its bytes before writing) and
//! each deletion. A user's directory is counted only while it exists, and
//! it goes with the user's last record, so users who no longer store
//! anything take nothing. Each record and each user's directory is counted in
//! whole [`BLOCK`]s, as a file system allocates them: otherwise a great
//! many users with one empty file each would take some thirty times the
//! bytes counted.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// The unit of space counted: a common file system block.
pub const BLOCK: u64 = 4096;

/// The bytes counted for a file of `bytes` bytes (a directory: one block).
pub fn charge(bytes: u64) -> u64 {
    bytes.div_ceil(BLOCK).max(1).saturating_mul(BLOCK)
}

/// The store's bytes in use and their limit.
#[derive(Debug)]
pub struct StoredBytes {
    used: Mutex<u64>,
    limit: u64,
}

/// A reservation would pass the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full {
    /// Bytes in use.
    pub used: u64,
    /// The limit.
    pub limit: u64,
}

/// Bytes reserved for a write; given back when dropped unless kept.
#[derive(Debug)]
#[must_use]
pub struct Reservation<'a> {
    total: &'a StoredBytes,
    bytes: u64,
}

impl StoredBytes {
    /// `used` bytes in use, of at most `limit`.
    pub fn new(used: u64, limit: u64) -> Self {
        Self { used: Mutex::new(used), limit }
    }

    /// Reserves `bytes`, or says how full the store is.
    pub fn reserve(&self, bytes: u64) -> Result<Reservation<'_>, Full> {
        let mut used = self.used();
        if used.saturating_add(bytes) > self.limit {
            return Err(Full { used: *used, limit: self.limit });
        }
        *used += bytes;
        Ok(Reservation { total: self, bytes })
    }

    /// Gives back the `bytes` of a removed record.
    pub fn release(&self, bytes: u64) {
        let mut used = self.used();
        *used = used.saturating_sub(bytes);
    }

    fn used(&self) -> MutexGuard<'_, u64> {
        self.used.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Reservation<'_> {
    /// Keeps the bytes in use: the write happened.
    pub fn keep(self) {
        std::mem::forget(self);
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        self.total.release(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn space_is_counted_in_whole_blocks() {
        assert_eq!([0, 1, BLOCK, BLOCK + 1].map(charge), [BLOCK, BLOCK, BLOCK, 2 * BLOCK]);
    }

    #[test]
    fn reservations_hold_the_limit_and_are_given_back_unless_kept() {
        let total = StoredBytes::new(40, 100);
        assert_eq!(total.reserve(61).unwrap_err(), Full { used: 40, limit: 100 });
        let dropped = total.reserve(60).unwrap();
        assert_eq!(total.reserve(1).unwrap_err(), Full { used: 100, limit: 100 });
        drop(dropped);
        total.reserve(30).unwrap().keep();
        assert_eq!(total.reserve(31).unwrap_err(), Full { used: 70, limit: 100 });
        total.release(70);
        total.reserve(100).unwrap().keep();
        assert_eq!(total.reserve(u64::MAX).unwrap_err(), Full { used: 100, limit: 100 });
    }
}
