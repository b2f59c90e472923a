//! What the store checks of the server's own settings at connect.
//!
//! Cassandra refuses a batch larger than its `batch_size_fail_threshold`
//! (50 KiB by default; ScyllaDB's is 1 MiB), and a commit's LOGGED batch
//! can be up to `max_batch_bytes` (a group created with hundreds of
//! members, more when the commit's own rows exceed it). Such commits
//! would fail with `unavailable` long after start-up, so a server set
//! below the store's limit is named in the log at connect, with the fix.

use scylla::client::session::Session;

/// Reads the server's batch failure threshold where the server exposes
/// its settings as a table (Cassandra 4.0 and later: `system_views.
/// settings`), and warns when it is below `max_batch_bytes`. A server
/// without that table (ScyllaDB) is not checked.
pub(crate) async fn check_batch_threshold(session: &Session, max_batch_bytes: usize) {
    let Some(threshold) = batch_fail_threshold(session).await else {
        return;
    };
    if threshold < max_batch_bytes {
        tracing::warn!(
            server_batch_size_fail_threshold = threshold,
            max_batch_bytes,
            "the CQL server refuses batches larger than {threshold} bytes, below the store's \
             max_batch_bytes: large commits (groups created with many members) will fail with \
             `unavailable`. Raise batch_size_fail_threshold in cassandra.yaml (1024KiB, as \
             ScyllaDB's default) or lower [scylla] max_batch_bytes"
        );
    }
}

async fn batch_fail_threshold(session: &Session) -> Option<usize> {
    let result = session
        .query_unpaged(
            "SELECT value FROM system_views.settings WHERE name = 'batch_size_fail_threshold'",
            (),
        )
        .await
        .ok()?
        .into_rows_result()
        .ok()?;
    let (value,) = result.maybe_first_row::<(Option<String>,)>().ok()??;
    parse_size(&value?)
}

/// Cassandra's data sizes: a number and a unit (`50KiB`, `1MiB`, `512B`).
fn parse_size(text: &str) -> Option<usize> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let number: usize = number.parse().ok()?;
    let scale = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => return None,
    };
    number.checked_mul(scale)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn reads_cassandra_data_sizes() {
        assert_eq!(parse_size("50KiB"), Some(50 * 1024));
        assert_eq!(parse_size("1MiB"), Some(1 << 20));
        assert_eq!(parse_size("512B"), Some(512));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_size("5PiB"), None);
        assert_eq!(parse_size("99999999999999999999GiB"), None);
    }
}
