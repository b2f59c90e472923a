//! How a test runs: ids unique to the run, waiting for what other
//! processes change, and panic messages a truncated report keeps.

use std::sync::Once;

/// Has every panic print its message once more after the default hook's
/// report: with `RUST_BACKTRACE` set, a failing test's output ends with
/// the backtrace, and a report that keeps only the end of the output
/// (as CI's does) would lose which assertion failed. Only the message's
/// first lines are repeated: some carry whole process logs.
pub fn repeat_panic_messages_last() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            default(info);
            let message = info
                .payload()
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| info.payload().downcast_ref::<&str>().copied())
                .unwrap_or("(not a string)");
            let head: String = message.lines().take(6).collect::<Vec<_>>().join("\n");
            let head: String = head.chars().take(1500).collect();
            let place = info
                .location()
                .map(|l| format!("{}:{}", l.file(), l.line()))
                .unwrap_or_default();
            eprintln!("\nthe panic above, once more ({place}): {head}");
        }));
    });
}

/// A unique suffix for ids in one test run.
pub fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{prefix}{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Asks `ready` every 50 ms until it gives a value, and fails the test,
/// saying `what` did not happen, if it gives none within `within`. The one
/// polling loop of the tests: for state that other processes change
/// (a tenant reaching the gateways, a dead letter, a log line).
pub async fn eventually<T, Fut>(
    what: &str,
    within: std::time::Duration,
    mut ready: impl FnMut() -> Fut,
) -> T
where
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(value) = ready().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not within {within:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
