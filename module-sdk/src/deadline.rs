//! Deadlines from durations that may be long: adding a `Duration` to an
//! `Instant` panics when the sum does not fit, so every deadline is made here.

use std::time::Duration;

use tokio::time::Instant;

/// How far ahead a deadline too far to represent is put: thirty years, as
/// tokio does for a timeout that does not fit.
const FAR_FUTURE: Duration = Duration::from_secs(30 * 365 * 86_400);

/// `start + wait`, or a time far in the future when that sum does not fit.
pub(crate) fn deadline_after(start: Instant, wait: Duration) -> Instant {
    start.checked_add(wait).unwrap_or_else(|| start + FAR_FUTURE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_too_long_to_add_is_a_far_deadline_not_a_panic() {
        let start = Instant::now();
        assert_eq!(deadline_after(start, Duration::from_secs(5)), start + Duration::from_secs(5));
        assert_eq!(deadline_after(start, Duration::MAX), start + FAR_FUTURE);
    }
}
