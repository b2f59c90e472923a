//! The schema: `deploy/scylla/schema.cql`, compiled in and applied at
//! start-up, so that the file operators read and the tables the store
//! creates cannot drift apart.

use futures::StreamExt;
use scylla::client::session::Session;
use switchboard_store::{StoreError, StoreResult};

use crate::config::ScyllaConfig;
use crate::cql::{BigInt, Clock, Int, Read, Text, Write, unavailable};

/// Index rows written at once while filling an index from older rows.
const FILL_AT_ONCE: usize = 32;

/// The schema file, the single source of truth.
pub const SCHEMA_CQL: &str = include_str!("../../deploy/scylla/schema.cql");

/// The version `SCHEMA_CQL` describes. A later schema change bumps it and
/// adds the statements that take a keyspace from the previous version to
/// the new one to [`MIGRATIONS`].
pub const SCHEMA_VERSION: i32 = 11;

/// `(version, statements)`: what takes a keyspace at `version - 1` to
/// `version`. Tables that are new in a version also appear (as `CREATE
/// TABLE IF NOT EXISTS`) in the schema file, so a new keyspace gets them
/// at once.
const MIGRATIONS: &[(i32, &[&str])] = &[
    (
        // Media references per message, so that a deleted message's blob
        // can be collected (issue 26). Version 1's `media_refs` stays,
        // read only.
        2,
        &[
            "CREATE TABLE IF NOT EXISTS media_message_refs (tenant text, blob_ref text, \
           conversation_id text, seq bigint, \
           PRIMARY KEY ((tenant, blob_ref), conversation_id, seq))",
        ],
    ),
    (
        // v1.1: member states, reactions, pins, threads, mentions. New
        // tables only: they start empty, which is what a conversation made
        // before them holds.
        3,
        &[
            "CREATE TABLE IF NOT EXISTS member_states (tenant text, conversation_id text, \
           user_id text, state text, PRIMARY KEY ((tenant, conversation_id), user_id))",
            "CREATE TABLE IF NOT EXISTS reactions (tenant text, conversation_id text, day int, \
           seq bigint, user_id text, emoji text, reacted_at bigint, \
           PRIMARY KEY ((tenant, conversation_id, day), seq, user_id, emoji))",
            "CREATE TABLE IF NOT EXISTS pins (tenant text, conversation_id text, \
           message_id bigint, pinned_by text, pinned_at bigint, \
           PRIMARY KEY ((tenant, conversation_id), message_id))",
            "CREATE TABLE IF NOT EXISTS thread_replies (tenant text, conversation_id text, \
           root_seq bigint, seq bigint, PRIMARY KEY ((tenant, conversation_id, root_seq), seq))",
            "CREATE TABLE IF NOT EXISTS thread_marks (tenant text, user_id text, \
           conversation_id text, root_seq bigint, read_seq bigint, \
           PRIMARY KEY ((tenant, user_id, conversation_id), root_seq))",
            "CREATE TABLE IF NOT EXISTS mentions (tenant text, user_id text, \
           conversation_id text, seq bigint, \
           PRIMARY KEY ((tenant, user_id, conversation_id), seq))",
        ],
    ),
    (
        // v1.2: policies, bans, blocks. New tables only, empty for every
        // conversation and user made before them.
        4,
        &[
            "CREATE TABLE IF NOT EXISTS conversation_policies (tenant text, \
           conversation_id text, policy text, PRIMARY KEY ((tenant, conversation_id)))",
            "CREATE TABLE IF NOT EXISTS bans (tenant text, conversation_id text, user_id text, \
           ban text, PRIMARY KEY ((tenant, conversation_id), user_id))",
            "CREATE TABLE IF NOT EXISTS blocks (tenant text, user_id text, blocked_id text, \
           blocked_at bigint, PRIMARY KEY ((tenant, user_id), blocked_id))",
            "CREATE TABLE IF NOT EXISTS reports (tenant text, report_id bigint, status text, \
           report text, PRIMARY KEY ((tenant), report_id)) \
           WITH CLUSTERING ORDER BY (report_id DESC)",
            "CREATE TABLE IF NOT EXISTS open_reports (tenant text, report_id bigint, \
           PRIMARY KEY ((tenant), report_id)) WITH CLUSTERING ORDER BY (report_id DESC)",
            "CREATE TABLE IF NOT EXISTS message_expiries (tenant text, conversation_id text, \
           expires_at bigint, seq bigint, \
           PRIMARY KEY ((tenant, conversation_id), expires_at, seq))",
        ],
    ),
    (
        // v1.2 erasure: the conversations a user ever joined, left ones
        // included. It starts empty; memberships from before it are read
        // from `user_conversations`, which an erasure reads as well.
        5,
        &[
            "CREATE TABLE IF NOT EXISTS joined (tenant text, user_id text, \
           conversation_id text, PRIMARY KEY ((tenant, user_id), conversation_id))",
        ],
    ),
    (
        // The writer fence (`fence.rs`): a new table, empty; the first
        // claim of each partition creates its row.
        6,
        &[
            "CREATE TABLE IF NOT EXISTS writer_fences (partition int, epoch bigint, \
           pending blob, last_ts bigint, PRIMARY KEY (partition))",
        ],
    ),
    (
        // The per-sender index (`senders.rs`), filled from the live
        // messages' idempotency keys once the tables exist
        // (`index_past_senders`).
        7,
        &[
            "CREATE TABLE IF NOT EXISTS sent_by (tenant text, sender_id text, \
           conversation_id text, seq bigint, day int, \
           PRIMARY KEY ((tenant, sender_id, conversation_id), seq)) \
           WITH CLUSTERING ORDER BY (seq DESC)",
            "CREATE TABLE IF NOT EXISTS unindexed_buckets (tenant text, conversation_id text, \
           day int, PRIMARY KEY ((tenant, conversation_id), day))",
        ],
    ),
    (
        // v1.3 profiles: a new table, empty; a user without a row has the
        // empty profile.
        8,
        &[
            "CREATE TABLE IF NOT EXISTS profiles (tenant text, user_id text, profile text, \
           PRIMARY KEY ((tenant, user_id)))",
        ],
    ),
    (
        // Unread counts that count what a member would (issue 43): a row
        // per message that counts. Unused since version 11 (its rows cost
        // every send a write), kept while processes of an earlier release
        // may still write it.
        9,
        &[
            "CREATE TABLE IF NOT EXISTS counted (tenant text, conversation_id text, seq bigint, \
           sender_id text, PRIMARY KEY ((tenant, conversation_id), seq))",
        ],
    ),
    (
        // v1.3 open channels: the directory and invites. New tables, empty:
        // no conversation was public before them.
        10,
        &[
            "CREATE TABLE IF NOT EXISTS directory (tenant text, conversation_id text, \
           listing text, PRIMARY KEY ((tenant), conversation_id))",
            "CREATE TABLE IF NOT EXISTS invites (tenant text, conversation_id text, code text, \
           invite text, PRIMARY KEY ((tenant, conversation_id), code))",
            "CREATE TABLE IF NOT EXISTS invite_codes (tenant text, code text, \
           conversation_id text, PRIMARY KEY ((tenant, code)))",
        ],
    ),
    (
        // Unread counts from the exceptions (issue 43): a row per message
        // that does not count, filled from the live messages once the
        // table exists (`index_uncounted`).
        11,
        &[
            "CREATE TABLE IF NOT EXISTS uncounted (tenant text, conversation_id text, \
           seq bigint, PRIMARY KEY ((tenant, conversation_id), seq))",
        ],
    ),
];

/// Fills the tables of `version` from older rows, once they are made:
/// the per-sender index (7) and the unread counts' index (11).
async fn fill(session: &Session, clock: &Clock, version: i32) -> StoreResult<()> {
    match version {
        7 => index_past_senders(session, clock).await,
        11 => index_uncounted(session, clock).await,
        _ => Ok(()),
    }
}

/// The row of `schema_version` this store owns.
const COMPONENT: &str = "store";

/// One statement of the schema file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ddl {
    /// `CREATE KEYSPACE`: replaced by one built from the configuration.
    Keyspace,
    /// `USE`: replaced by the configured keyspace.
    Use,
    /// Anything else (`CREATE TABLE IF NOT EXISTS ...`), run as written.
    Other(String),
}

/// The statements of a schema file: comment lines dropped, split on `;`.
pub(crate) fn statements(file: &str) -> Vec<Ddl> {
    let text: String = file
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .map(|l| format!("{l}\n"))
        .collect();
    text.split(';')
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|s| !s.is_empty())
        .map(|s| {
            let upper = s.to_ascii_uppercase();
            if upper.starts_with("CREATE KEYSPACE") {
                Ddl::Keyspace
            } else if upper.starts_with("USE ") {
                Ddl::Use
            } else {
                Ddl::Other(s)
            }
        })
        .collect()
}

/// Creates the keyspace and every table when missing, makes the keyspace
/// the session's, and brings an older schema to [`SCHEMA_VERSION`].
/// Refuses a keyspace whose schema is newer than this build.
pub(crate) async fn create(session: &Session, config: &ScyllaConfig) -> StoreResult<()> {
    let keyspace = format!(
        "CREATE KEYSPACE IF NOT EXISTS {} WITH replication = {} AND durable_writes = true",
        config.keyspace,
        config.replication_cql()
    );
    ddl(session, &keyspace).await?;
    use_keyspace(session, config).await?;
    for statement in statements(SCHEMA_CQL) {
        if let Ddl::Other(cql) = statement {
            ddl(session, &cql).await?;
        }
    }
    Ok(())
}

/// Makes the keyspace the session's, on every node's connections. A node
/// that joined the cluster after the keyspace was created may not know
/// it yet (its schema arrives by gossip): the session then waits for the
/// nodes to agree on the schema and tries again, a few times.
pub(crate) async fn use_keyspace(session: &Session, config: &ScyllaConfig) -> StoreResult<()> {
    const ATTEMPTS: u32 = 10;
    let mut attempt = 1;
    loop {
        match session.use_keyspace(config.keyspace.clone(), false).await {
            Ok(()) => return Ok(()),
            Err(e) if attempt < ATTEMPTS => {
                tracing::warn!(error = %e, attempt, "a node does not know the keyspace yet; waiting for schema agreement");
                if let Err(e) = session.await_schema_agreement().await {
                    tracing::warn!(error = %e, "the nodes did not agree on the schema");
                }
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                attempt += 1;
            }
            Err(e) => return Err(unavailable(e)),
        }
    }
}

async fn ddl(session: &Session, cql: &str) -> StoreResult<()> {
    // The driver waits for schema agreement after each change, so the
    // next statement (or the prepares) see the table on every node.
    session
        .query_unpaged(cql, ())
        .await
        .map_err(|e| unavailable(format!("{cql:?}: {e}")))?;
    tracing::debug!(cql, "scylla schema statement applied");
    Ok(())
}

/// Reads the keyspace's schema version, runs the migrations it lacks and
/// records the new version. A keyspace without a version was just created
/// from the current file. Runs before the store's statements are prepared
/// (a keyspace missing a table could not prepare them), so its two
/// statements are sent unprepared.
pub(crate) async fn migrate(
    session: &Session,
    clock: &Clock,
    create_schema: bool,
) -> StoreResult<()> {
    let stored = session
        .query_unpaged(
            "SELECT version FROM schema_version WHERE component = ?",
            (COMPONENT,),
        )
        .await
        .map_err(unavailable)?
        .into_rows_result()
        .map_err(|e| StoreError::Corrupt(format!("schema_version: {e}")))?
        .maybe_first_row::<(i32,)>()
        .map_err(|e| StoreError::Corrupt(format!("schema_version: {e}")))?
        .map(|(v,)| v);
    match stored {
        Some(v) if v == SCHEMA_VERSION => Ok(()),
        Some(v) if v > SCHEMA_VERSION => Err(StoreError::Corrupt(format!(
            "the keyspace has schema version {v}, this build knows up to {SCHEMA_VERSION}"
        ))),
        _ if !create_schema => Err(StoreError::Unavailable(format!(
            "the keyspace has schema version {}, not {SCHEMA_VERSION}, and create_schema is \
             off: apply deploy/scylla/schema.cql and its migrations",
            stored.map_or_else(|| "none".to_owned(), |v| v.to_string())
        ))),
        _ => {
            let from = stored.unwrap_or(SCHEMA_VERSION);
            for (version, steps) in MIGRATIONS {
                if *version > from && *version <= SCHEMA_VERSION {
                    for cql in *steps {
                        ddl(session, cql).await?;
                    }
                    fill(session, clock, *version).await?;
                    record(session, clock, *version).await?;
                }
            }
            record(session, clock, SCHEMA_VERSION).await
        }
    }
}

/// Fills the per-sender index (`senders.rs`) of a keyspace from before
/// version 7: a row per live message, from its idempotency key, and the
/// buckets archived by then listed in `unindexed_buckets` (the archive
/// layer reads them whole to find a sender's messages). Safe to repeat
/// (a migration interrupted before it recorded the version runs again):
/// every row is the same on each run.
async fn index_past_senders(session: &Session, clock: &Clock) -> StoreResult<()> {
    let keys: Read<(), (String, String, String, i64, i32)> = Read::prepare(
        session,
        "SELECT tenant, conversation_id, sender_id, seq, day FROM sent",
    )
    .await?;
    let insert: Write<(Text, Text, Text, BigInt, Int, BigInt)> = Write::prepare(
        session,
        "INSERT INTO sent_by (tenant, sender_id, conversation_id, seq, day) \
         VALUES (?, ?, ?, ?, ?) USING TIMESTAMP ?",
    )
    .await?;
    let mut written = 0usize;
    let mut rows = keys
        .stream(session, ())
        .await?
        .map(|row| {
            let insert = &insert;
            async move {
                let (t, c, sender, seq, day) = row?;
                insert
                    .run(session, (t, sender, c, seq, day, clock.next()))
                    .await
            }
        })
        .buffer_unordered(FILL_AT_ONCE);
    while let Some(done) = rows.next().await {
        done?;
        written += 1;
    }
    let buckets: Read<(), (String, String, i32, Option<String>)> = Read::prepare(
        session,
        "SELECT tenant, conversation_id, day, archive_object FROM buckets",
    )
    .await?;
    let mark: Write<(Text, Text, Int, BigInt)> = Write::prepare(
        session,
        "INSERT INTO unindexed_buckets (tenant, conversation_id, day) VALUES (?, ?, ?) \
         USING TIMESTAMP ?",
    )
    .await?;
    let mut marked = 0usize;
    let mut rows = buckets.stream(session, ()).await?;
    while let Some(row) = rows.next().await {
        let (t, c, day, object) = row?;
        if object.is_some() {
            mark.run(session, (t, c, day, clock.next())).await?;
            marked += 1;
        }
    }
    tracing::info!(
        rows = written,
        archived_buckets = marked,
        "the per-sender index is filled"
    );
    Ok(())
}

/// Fills the unread counts' index (`uncounted`) of a keyspace from before
/// version 11 from its live messages: without it, their system messages
/// and thread replies would count. Messages archived or expired before
/// the upgrade are not looked for: they count as every message did
/// before unread counts were exact. Safe to repeat, like
/// [`index_past_senders`].
async fn index_uncounted(session: &Session, clock: &Clock) -> StoreResult<()> {
    let messages: Read<(), (String, String, i64, String)> = Read::prepare(
        session,
        "SELECT tenant, conversation_id, seq, body FROM messages",
    )
    .await?;
    let insert: Write<(Text, Text, BigInt, BigInt)> = Write::prepare(
        session,
        "INSERT INTO uncounted (tenant, conversation_id, seq) VALUES (?, ?, ?) \
         USING TIMESTAMP ?",
    )
    .await?;
    let mut written = 0usize;
    let mut rows = messages
        .stream(session, ())
        .await?
        .map(|row| {
            let insert = &insert;
            async move {
                let (t, c, seq, body) = row?;
                let m: switchboard_protocol::Message = crate::rows::decode(&body)?;
                if switchboard_store::rules::unread::counts(&m) {
                    return Ok(false);
                }
                insert
                    .run(session, (t, c, seq, clock.next()))
                    .await
                    .map(|()| true)
            }
        })
        .buffer_unordered(FILL_AT_ONCE);
    while let Some(done) = rows.next().await {
        if done? {
            written += 1;
        }
    }
    tracing::info!(rows = written, "the unread counts' index is filled");
    Ok(())
}

async fn record(session: &Session, clock: &Clock, version: i32) -> StoreResult<()> {
    let now = switchboard_protocol::Timestamp::now().unix_ms();
    session
        .query_unpaged(
            "INSERT INTO schema_version (component, version, applied_at) VALUES (?, ?, ?) \
             USING TIMESTAMP ?",
            (COMPONENT, version, now, clock.next()),
        )
        .await
        .map_err(unavailable)?;
    tracing::info!(version, "scylla schema version recorded");
    Ok(())
}

/// A table of the schema file, for the statement checks.
#[cfg(test)]
pub(crate) struct Table {
    pub name: String,
    pub columns: std::collections::HashMap<String, String>,
    pub partition_key: Vec<String>,
    pub clustering: Vec<String>,
}

/// Every table of the schema file.
#[cfg(test)]
pub(crate) fn tables() -> std::collections::HashMap<String, Table> {
    let mut out = std::collections::HashMap::new();
    for ddl in statements(SCHEMA_CQL) {
        let Ddl::Other(cql) = ddl else { continue };
        let table = table(&cql);
        out.insert(table.name.clone(), table);
    }
    out
}

/// The table one `CREATE TABLE IF NOT EXISTS` statement (on one line)
/// makes.
#[cfg(test)]
#[allow(clippy::expect_used)]
fn table(cql: &str) -> Table {
    let rest = cql
        .strip_prefix("CREATE TABLE IF NOT EXISTS ")
        .expect("only tables besides the keyspace");
    let (name, rest) = rest.split_once(" (").expect("columns");
    // The column list ends at the parenthesis that closes the first.
    let mut depth = 1;
    let end = rest
        .char_indices()
        .find(|(_, ch)| {
            match ch {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            depth == 0
        })
        .map(|(i, _)| i)
        .expect("end of columns");
    let body = &rest[..end];
    let (columns, key) = body.split_once("PRIMARY KEY (").expect("primary key");
    let columns = columns
        .split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(|c| {
            let (n, t) = c.split_once(' ').expect("name type");
            (n.to_owned(), t.to_owned())
        })
        .collect();
    let key = key.trim();
    let key = key.strip_suffix(')').expect("end of primary key");
    let (partition_key, clustering) = match key.strip_prefix('(') {
        Some(k) => {
            let (pk, rest) = k.split_once(')').expect("partition key");
            (
                pk.split(',').map(|s| s.trim().to_owned()).collect(),
                rest.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect(),
            )
        }
        None => {
            let mut parts = key.split(',').map(|s| s.trim().to_owned());
            let pk = vec![parts.next().expect("a key")];
            (pk, parts.collect())
        }
    };
    Table {
        name: name.to_owned(),
        columns,
        partition_key,
        clustering,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn the_schema_file_is_a_keyspace_a_use_and_the_tables() {
        let ddl = statements(SCHEMA_CQL);
        assert_eq!(ddl[0], Ddl::Keyspace);
        assert_eq!(ddl[1], Ddl::Use);
        let tables = tables();
        let mut names: Vec<&str> = tables.keys().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            vec![
                "bans",
                "blocks",
                "buckets",
                "conversation_policies",
                "conversations",
                "counted",
                "device_cursors",
                "devices",
                "directory",
                "inbox",
                "invite_codes",
                "invites",
                "joined",
                "media_message_refs",
                "media_refs",
                "member_marks",
                "member_states",
                "members",
                "mentions",
                "message_expiries",
                "message_index",
                "message_versions",
                "messages",
                "open_reports",
                "pins",
                "profiles",
                "reactions",
                "reports",
                "schema_version",
                "sent",
                "sent_by",
                "speakers",
                "thread_marks",
                "thread_replies",
                "uncounted",
                "unindexed_buckets",
                "unsolicited_adds",
                "user_conversations",
                "writer_fences",
            ]
        );
        assert_eq!(ddl.len(), 2 + names.len(), "nothing else in the file");
        for d in &ddl[2..] {
            let Ddl::Other(cql) = d else { panic!("{d:?}") };
            assert!(cql.starts_with("CREATE TABLE IF NOT EXISTS "), "{cql}");
        }
        let messages = &tables["messages"];
        assert_eq!(
            messages.partition_key,
            vec!["tenant", "conversation_id", "day"]
        );
        assert_eq!(messages.clustering, vec!["seq"]);
        // The stored format of a message row (its body is pinned in
        // `rows.rs`).
        let mut columns: Vec<(&str, &str)> = messages
            .columns
            .iter()
            .map(|(n, t)| (n.as_str(), t.as_str()))
            .collect();
        columns.sort_unstable();
        assert_eq!(
            columns,
            vec![
                ("body", "text"),
                ("conversation_id", "text"),
                ("day", "int"),
                ("seq", "bigint"),
                ("tenant", "text"),
            ]
        );
        assert_eq!(tables["schema_version"].partition_key, vec!["component"]);
        for t in tables.values() {
            for c in t.columns.values() {
                assert!(
                    ["text", "bigint", "int", "tinyint", "blob"].contains(&c.as_str()),
                    "{c}"
                );
            }
        }
    }

    /// A keyspace migrated from an older version ends up with the tables
    /// a new one gets from the file.
    #[test]
    fn the_migrations_make_the_tables_of_the_file() {
        let tables = tables();
        let versions: Vec<i32> = MIGRATIONS.iter().map(|(v, _)| *v).collect();
        assert_eq!(versions, (2..=SCHEMA_VERSION).collect::<Vec<_>>());
        for (version, steps) in MIGRATIONS {
            for cql in *steps {
                let cql = cql.split_whitespace().collect::<Vec<_>>().join(" ");
                let made = table(&cql);
                let Some(file) = tables.get(&made.name) else {
                    panic!("version {version} makes {}, not in the file", made.name);
                };
                assert_eq!(made.columns, file.columns, "{}", made.name);
                assert_eq!(made.partition_key, file.partition_key, "{}", made.name);
                assert_eq!(made.clustering, file.clustering, "{}", made.name);
            }
        }
    }

    #[test]
    fn comments_and_blank_lines_are_not_statements() {
        let ddl = statements(
            "-- a; comment\n\nCREATE TABLE IF NOT EXISTS t (a int, PRIMARY KEY (a));\n-- end;\n",
        );
        assert_eq!(
            ddl,
            vec![Ddl::Other(
                "CREATE TABLE IF NOT EXISTS t (a int, PRIMARY KEY (a))".into()
            )]
        );
    }
}
