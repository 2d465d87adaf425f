//! The wall clock as Tickwork stamps runs: epoch milliseconds, comparable between the test and
//! the processes it starts on the same machine.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, from the wall clock.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

/// Sleeps until the wall clock reaches `at` (epoch ms); at once when it has.
///
/// For scenarios laid out on the wall clock (an outage from the tenth second of a schedule);
/// never to wait for something to have happened, which [`crate::wait`] does.
pub async fn sleep_until_ms(at: i64) {
    let wait = at - now_ms();
    if wait > 0 {
        tokio::time::sleep(Duration::from_millis(wait as u64)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_is_after_2024_and_does_not_go_back() {
        let a = now_ms();
        let b = now_ms();
        assert!(a > 1_704_067_200_000, "{a}");
        assert!(b >= a);
    }
}
