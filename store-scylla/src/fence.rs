//! The writer fence: a writer that lost its partition commits nothing
//! after its successor started, however long it was stopped and whatever
//! its clock says.
//!
//! The lease (`worker/src/fence.rs`) keeps a paused writer from *starting*
//! a commit after its lease ran out. It cannot stop a commit that passed
//! its check just before the pause, nor a batch that sat in a socket or in
//! a stopped coordinator while the successor wrote, and Scylla does not
//! serialise a commit's reads with its writes. Across partitions a batch
//! cannot be conditional (an LWT batch must stay in one partition), so
//! the fence is a decision point followed by an idempotent write:
//!
//! - **Claim.** A starting writer bumps the partition's `epoch` in
//!   `writer_fences` by a compare-and-set (a Paxos lightweight
//!   transaction). From then on, no earlier claim can decide anything.
//! - **Decide.** Every commit first writes its rows, serialised with their
//!   write timestamps, into the partition's `pending` cell, conditional on
//!   `epoch` being the writer's own (`IF epoch = ?`), and `last_ts`, the
//!   commit's last write timestamp. Refused: the commit is `Fenced`, and
//!   nothing of it is written. Applied: the commit is decided, and its
//!   batch is sent (again until it lands, as every commit), UNLOGGED:
//!   `pending` is its batch log. Should the writer stop with the batch
//!   half written, the next claim writes it whole (below). Cassandra's
//!   own batch log would cost a write to two more nodes first, and hold
//!   every commit while one of those is gone but not yet convicted.
//! - **Finish.** After its claim, a writer reads `pending` (a SERIAL read,
//!   which also completes a half-done Paxos round) and writes it again,
//!   with the recorded timestamps: the one commit its predecessor may have
//!   decided without finishing is whole before the new writer reads a
//!   conversation. It then raises its clock past `last_ts`, so its own
//!   writes win over every decided one even if its host's clock is behind.
//!
//! Why it holds: a row of a commit lands only after that commit was
//! decided (the decision precedes the batch), and a decision needs the
//! current epoch, so every commit ever written was decided before the
//! claim that ended its writer's epoch, and is no later than the `pending`
//! that claim finishes (a writer decides one commit at a time). Its late
//! copies (a resend, a stopped coordinator, the batch log) carry the same
//! cells with the same timestamps as the finished copy, older than every
//! write of the successor, so they change nothing the successor wrote.
//! What a split commit writes ahead of its decision (inbox entries only,
//! `commit.rs`) is harmless undecided, as before.
//!
//! A decided commit older than [`FINISH_WITHIN`] is not written again: its
//! batch landed long ago or came from a writer gone for a day, and an old
//! copy could bring back inbox entries that were acked since.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use scylla::client::session::Session;
use scylla::serialize::SerializationError;
use scylla::serialize::row::{RowSerializationContext, SerializeRow};
use scylla::serialize::writers::RowWriter;
use scylla::statement::batch::{Batch, BatchType};
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::{Consistency, SerialConsistency};
use scylla::value::{CqlValue, Row};
use switchboard_store::{StoreError, StoreResult, WriterClaim};

use crate::cql::{corrupt, outcome_unknown, unavailable};
use crate::metrics::{self, Request};

/// How old a decided commit may be and still be finished by a claim.
pub(crate) const FINISH_WITHIN: Duration = Duration::from_secs(24 * 3600);

/// How many times a claim tries when other claims keep winning.
const CLAIM_ATTEMPTS: usize = 10;

/// The fence's statements: the only lightweight transactions of the store.
pub(crate) struct FenceStatements {
    read: PreparedStatement,
    create: PreparedStatement,
    claim: PreparedStatement,
    decide: PreparedStatement,
}

impl FenceStatements {
    /// `local`: a deployment with a local datacenter runs its Paxos rounds
    /// there (LOCAL_SERIAL); writers then live in that datacenter only.
    pub(crate) async fn prepare(session: &Session, local: bool) -> StoreResult<Self> {
        let (read_cl, serial) = if local {
            (Consistency::LocalSerial, SerialConsistency::LocalSerial)
        } else {
            (Consistency::Serial, SerialConsistency::Serial)
        };
        let prepare = |cql: &'static str| async move {
            let mut ps = session
                .prepare(cql)
                .await
                .map_err(|e| unavailable(format!("preparing {cql:?}: {e}")))?;
            ps.set_serial_consistency(Some(serial));
            // Each is repeated by the fence itself when its outcome is
            // unknown, with the same values (see `cas`).
            ps.set_is_idempotent(true);
            Ok::<_, StoreError>(ps)
        };
        let mut read =
            prepare("SELECT epoch, pending, last_ts FROM writer_fences WHERE partition = ?")
                .await?;
        read.set_consistency(read_cl);
        Ok(Self {
            read,
            create: prepare(
                "INSERT INTO writer_fences (partition, epoch, last_ts) VALUES (?, ?, ?) \
                 IF NOT EXISTS",
            )
            .await?,
            claim: prepare("UPDATE writer_fences SET epoch = ? WHERE partition = ? IF epoch = ?")
                .await?,
            decide: prepare(
                "UPDATE writer_fences SET pending = ?, last_ts = ? WHERE partition = ? \
                 IF epoch = ?",
            )
            .await?,
        })
    }
}

/// The fence row of a partition as a SERIAL read sees it.
struct FenceRow {
    epoch: i64,
    pending: Option<Vec<u8>>,
    last_ts: i64,
}

fn partition_db(p: u16) -> i32 {
    i32::from(p)
}

fn epoch_db(e: u64) -> StoreResult<i64> {
    i64::try_from(e).map_err(|_| StoreError::Corrupt(format!("writer epoch {e} out of range")))
}

async fn read(session: &Session, st: &FenceStatements, p: u16) -> StoreResult<Option<FenceRow>> {
    let started = Instant::now();
    let sent = session.execute_unpaged(&st.read, (partition_db(p),)).await;
    metrics::observe(Request::FenceRead, started, &sent);
    let rows = sent
        .map_err(unavailable)?
        .into_rows_result()
        .map_err(corrupt)?;
    let row = rows
        .maybe_first_row::<(Option<i64>, Option<Vec<u8>>, Option<i64>)>()
        .map_err(corrupt)?;
    Ok(row.map(|(epoch, pending, last_ts)| FenceRow {
        epoch: epoch.unwrap_or(0),
        pending,
        last_ts: last_ts.unwrap_or(0),
    }))
}

/// Runs a lightweight transaction until its outcome is known: whether it
/// applied. A repeat after an unknown outcome is safe for every fence
/// statement: one that had applied either applies again (the condition
/// still holds, the same values) or is refused because a later claim
/// moved the epoch, which then finishes what it had decided.
async fn cas(
    session: &Session,
    kind: Request,
    ps: &PreparedStatement,
    values: impl SerializeRow,
) -> StoreResult<bool> {
    let mut backoff = Duration::from_millis(20);
    let started = Instant::now();
    loop {
        let sent_at = Instant::now();
        let sent = session.execute_unpaged(ps, &values).await;
        metrics::observe(kind, sent_at, &sent);
        match sent {
            Ok(result) => {
                let rows = result.into_rows_result().map_err(corrupt)?;
                let row = rows.maybe_first_row::<Row>().map_err(corrupt)?;
                return Ok(matches!(
                    row.as_ref().and_then(|r| r.columns.first()),
                    Some(Some(CqlValue::Boolean(true)))
                ));
            }
            Err(e) if outcome_unknown(&e) => {
                tracing::warn!(error = %e, waited = ?started.elapsed(),
                    "a writer fence transaction may or may not have applied; sending it again");
                metrics::resent(kind);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
            Err(e) => return Err(unavailable(e)),
        }
    }
}

/// Claims `partition` with the next epoch, finishes the commit the last
/// writer decided, and returns the claim; the caller raises its clock to
/// the returned `last_ts`.
pub(crate) async fn claim(
    session: &Session,
    st: &FenceStatements,
    partition: u16,
) -> StoreResult<(WriterClaim, i64)> {
    let p = partition_db(partition);
    let mut epoch = None;
    for _ in 0..CLAIM_ATTEMPTS {
        let won = match read(session, st, partition).await? {
            None => cas(session, Request::FenceClaim, &st.create, (p, 1_i64, 0_i64))
                .await?
                .then_some(1),
            Some(row) => {
                let next = row.epoch.saturating_add(1);
                cas(
                    session,
                    Request::FenceClaim,
                    &st.claim,
                    (next, p, row.epoch),
                )
                .await?
                .then_some(next)
            }
        };
        if won.is_some() {
            epoch = won;
            break;
        }
    }
    let Some(epoch) = epoch else {
        return Err(StoreError::Unavailable(format!(
            "partition {partition}: {CLAIM_ATTEMPTS} claims lost to other writers in a row"
        )));
    };
    // Read after the claim: no earlier epoch can change `pending` now.
    let row = read(session, st, partition)
        .await?
        .ok_or_else(|| StoreError::Corrupt(format!("writer fence {partition} vanished")))?;
    if row.epoch != epoch {
        return Err(StoreError::Fenced(format!(
            "partition {partition} was claimed again (epoch {}) right after epoch {epoch}",
            row.epoch
        )));
    }
    if let Some(pending) = &row.pending {
        let age_micros = crate::cql::Clock::now_micros().saturating_sub(row.last_ts);
        let within = i64::try_from(FINISH_WITHIN.as_micros()).unwrap_or(i64::MAX);
        if age_micros <= within {
            let statements = decode(pending)?;
            tracing::info!(
                partition,
                epoch,
                statements = statements.len(),
                "finishing the last commit decided by the partition's previous writer"
            );
            replay(session, &statements).await?;
        }
    }
    let epoch = u64::try_from(epoch).unwrap_or(0);
    Ok((WriterClaim { partition, epoch }, row.last_ts))
}

/// Decides a commit: records its statements as the partition's `pending`,
/// if `claim` is still the partition's epoch. `Fenced` otherwise.
pub(crate) async fn decide(
    session: &Session,
    st: &FenceStatements,
    claim: WriterClaim,
    pending: Vec<u8>,
    last_ts: i64,
) -> StoreResult<()> {
    let applied = cas(
        session,
        Request::FenceDecide,
        &st.decide,
        (
            pending,
            last_ts,
            partition_db(claim.partition),
            epoch_db(claim.epoch)?,
        ),
    )
    .await?;
    if applied {
        Ok(())
    } else {
        Err(StoreError::Fenced(format!(
            "partition {} was claimed by a later writer than epoch {}",
            claim.partition, claim.epoch
        )))
    }
}

/// One statement of a decided commit: its CQL and its bound values, as
/// sent (the write timestamp among them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Recorded {
    pub(crate) cql: String,
    /// The values in the protocol's `[value]` form, one after another.
    pub(crate) cells: Vec<u8>,
    pub(crate) count: usize,
}

impl Recorded {
    /// `values` as the driver would send them with `ps`.
    pub(crate) fn of(
        ps: &PreparedStatement,
        values: &(dyn SerializeRow + Send + Sync),
    ) -> StoreResult<Self> {
        let specs = ps.get_variable_col_specs();
        let ctx = RowSerializationContext::from_specs(specs.as_slice());
        let mut cells = Vec::new();
        let mut writer = RowWriter::new(&mut cells);
        values
            .serialize(&ctx, &mut writer)
            .map_err(|e| StoreError::Corrupt(format!("recording a commit: {e}")))?;
        let count = writer.value_count();
        Ok(Self {
            cql: ps.get_statement().to_owned(),
            cells,
            count,
        })
    }
}

impl SerializeRow for Recorded {
    fn serialize(
        &self,
        _ctx: &RowSerializationContext<'_>,
        writer: &mut RowWriter,
    ) -> Result<(), SerializationError> {
        let mut rest = self.cells.as_slice();
        for _ in 0..self.count {
            let cell = writer.make_cell_writer();
            let (len, tail) = take_i32(rest).ok_or_else(bad_record)?;
            rest = tail;
            match len {
                -1 => {
                    cell.set_null();
                }
                -2 => {
                    cell.set_unset();
                }
                n => {
                    let n = usize::try_from(n).map_err(|_| bad_record())?;
                    let (value, tail) = (rest.get(..n), rest.get(n..));
                    cell.set_value(value.ok_or_else(bad_record)?)
                        .map_err(|_| bad_record())?;
                    rest = tail.ok_or_else(bad_record)?;
                }
            }
        }
        Ok(())
    }

    fn is_empty(&self) -> bool {
        self.count == 0
    }
}

fn bad_record() -> SerializationError {
    SerializationError::new(std::io::Error::other("a recorded commit does not decode"))
}

fn take_i32(b: &[u8]) -> Option<(i32, &[u8])> {
    let (head, tail) = (b.get(..4)?, b.get(4..)?);
    Some((i32::from_be_bytes(head.try_into().ok()?), tail))
}

fn take_u32(b: &[u8]) -> Option<(u32, &[u8])> {
    let (head, tail) = (b.get(..4)?, b.get(4..)?);
    Some((u32::from_be_bytes(head.try_into().ok()?), tail))
}

fn take_bytes(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let (n, tail) = take_u32(b)?;
    let n = usize::try_from(n).ok()?;
    Some((tail.get(..n)?, tail.get(n..)?))
}

fn put_u32(out: &mut Vec<u8>, n: usize) -> StoreResult<()> {
    let n =
        u32::try_from(n).map_err(|_| StoreError::Corrupt("a commit too large to record".into()))?;
    out.extend_from_slice(&n.to_be_bytes());
    Ok(())
}

/// Version of the `pending` encoding.
const FORMAT: u8 = 1;

/// `pending`: a format byte; the distinct CQL texts (count, then each as
/// length and UTF-8); the statements (count, then each as text index,
/// value count, and length and bytes of its cells). Integers are u32,
/// big-endian.
pub(crate) fn encode(statements: &[Recorded]) -> StoreResult<Vec<u8>> {
    let mut texts: Vec<&str> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for s in statements {
        if !index.contains_key(s.cql.as_str()) {
            index.insert(&s.cql, texts.len());
            texts.push(&s.cql);
        }
    }
    let mut out = vec![FORMAT];
    put_u32(&mut out, texts.len())?;
    for t in &texts {
        put_u32(&mut out, t.len())?;
        out.extend_from_slice(t.as_bytes());
    }
    put_u32(&mut out, statements.len())?;
    for s in statements {
        put_u32(&mut out, index.get(s.cql.as_str()).copied().unwrap_or(0))?;
        put_u32(&mut out, s.count)?;
        put_u32(&mut out, s.cells.len())?;
        out.extend_from_slice(&s.cells);
    }
    Ok(out)
}

pub(crate) fn decode(bytes: &[u8]) -> StoreResult<Vec<Recorded>> {
    let bad = || StoreError::Corrupt("writer_fences.pending does not decode".into());
    let (format, mut rest) = bytes.split_first().ok_or_else(bad)?;
    if *format != FORMAT {
        return Err(StoreError::Corrupt(format!(
            "writer_fences.pending has format {format}, this build reads {FORMAT}"
        )));
    }
    let (n, tail) = take_u32(rest).ok_or_else(bad)?;
    rest = tail;
    let mut texts = Vec::new();
    for _ in 0..n {
        let (t, tail) = take_bytes(rest).ok_or_else(bad)?;
        texts.push(String::from_utf8(t.to_vec()).map_err(|_| bad())?);
        rest = tail;
    }
    let (n, tail) = take_u32(rest).ok_or_else(bad)?;
    rest = tail;
    let mut out = Vec::new();
    for _ in 0..n {
        let (i, tail) = take_u32(rest).ok_or_else(bad)?;
        let (count, tail) = take_u32(tail).ok_or_else(bad)?;
        let (cells, tail) = take_bytes(tail).ok_or_else(bad)?;
        rest = tail;
        let cql = usize::try_from(i)
            .ok()
            .and_then(|i| texts.get(i))
            .ok_or_else(bad)?;
        out.push(Recorded {
            cql: cql.clone(),
            cells: cells.to_vec(),
            count: usize::try_from(count).map_err(|_| bad())?,
        });
    }
    if !rest.is_empty() {
        return Err(bad());
    }
    Ok(out)
}

/// Writes a decided commit again, in one UNLOGGED batch (`pending` stays
/// until the next decision: a claimer stopped half-way leaves it for the
/// claim after), with its recorded values and timestamps.
async fn replay(session: &Session, statements: &[Recorded]) -> StoreResult<()> {
    if statements.is_empty() {
        return Ok(());
    }
    let mut prepared: HashMap<&str, PreparedStatement> = HashMap::new();
    let mut batch = Batch::new(BatchType::Unlogged);
    batch.set_is_idempotent(true);
    for s in statements {
        let ps = match prepared.get(s.cql.as_str()) {
            Some(ps) => ps.clone(),
            None => {
                let ps = session
                    .prepare(s.cql.as_str())
                    .await
                    .map_err(|e| unavailable(format!("preparing {:?}: {e}", s.cql)))?;
                prepared.insert(&s.cql, ps.clone());
                ps
            }
        };
        batch.append_statement(ps);
    }
    let values: Vec<&Recorded> = statements.iter().collect();
    let mut backoff = Duration::from_millis(50);
    loop {
        let sent_at = Instant::now();
        let sent = session.batch(&batch, &values).await;
        metrics::observe(Request::Replay, sent_at, &sent);
        match sent {
            Ok(_) => return Ok(()),
            Err(e) if outcome_unknown(&e) => {
                tracing::warn!(error = %e, "finishing a decided commit: sending it again");
                metrics::resent(Request::Replay);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
            Err(e) => return Err(unavailable(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ScyllaStore;
    use crate::commit::Tx;
    use switchboard_store::{Mutation, rules};

    #[test]
    fn a_recorded_commit_reads_back_as_written() {
        let cells = |vals: &[Option<&[u8]>]| {
            let mut out = Vec::new();
            for v in vals {
                match v {
                    Some(b) => {
                        out.extend_from_slice(&i32::try_from(b.len()).unwrap().to_be_bytes());
                        out.extend_from_slice(b);
                    }
                    None => out.extend_from_slice(&(-1_i32).to_be_bytes()),
                }
            }
            out
        };
        let statements = vec![
            Recorded {
                cql: "INSERT INTO a (x, y) VALUES (?, ?) USING TIMESTAMP ?".into(),
                cells: cells(&[Some(b"one"), None, Some(&7_i64.to_be_bytes())]),
                count: 3,
            },
            Recorded {
                cql: "DELETE FROM b WHERE x = ?".into(),
                cells: cells(&[Some(b"")]),
                count: 1,
            },
            Recorded {
                cql: "INSERT INTO a (x, y) VALUES (?, ?) USING TIMESTAMP ?".into(),
                cells: cells(&[Some(b"two"), Some(b"2"), Some(&8_i64.to_be_bytes())]),
                count: 3,
            },
        ];
        let bytes = encode(&statements).unwrap();
        assert_eq!(decode(&bytes).unwrap(), statements);
        // The repeated text is stored once.
        assert_eq!(bytes.windows(6).filter(|w| w == b"INSERT").count(), 1);
    }

    #[test]
    fn a_damaged_record_is_corrupt_not_a_panic() {
        let statements = vec![Recorded {
            cql: "DELETE FROM b WHERE x = ?".into(),
            cells: vec![0, 0, 0, 1, 9],
            count: 1,
        }];
        let bytes = encode(&statements).unwrap();
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).is_err());
        let mut other = bytes;
        other[0] = 2;
        assert!(matches!(decode(&other), Err(StoreError::Corrupt(_))));
    }

    /// A fresh keyspace on the node named by `SWITCHBOARD_TEST_SCYLLA`
    /// (replication factor 1), or `None` where it is not set, except in
    /// CI, where that fails.
    fn on_a_node(what: &str) -> Option<(crate::ScyllaConfig, String)> {
        let Some(node) = std::env::var("SWITCHBOARD_TEST_SCYLLA")
            .ok()
            .filter(|v| !v.trim().is_empty())
        else {
            assert!(
                std::env::var_os("CI").is_none(),
                "SWITCHBOARD_TEST_SCYLLA is not set, and CI never skips it"
            );
            return None;
        };
        let keyspace = format!("sb_{what}_{:016x}", rand::random::<u64>());
        let config = crate::ScyllaConfig {
            nodes: vec![node.trim().to_owned()],
            keyspace: keyspace.clone(),
            replication: crate::Replication::Simple { factor: 1 },
            consistency: "one".into(),
            ..crate::ScyllaConfig::default()
        };
        Some((config, keyspace))
    }

    /// Drops a test's keyspace. Only tidying: a schema change can outlast
    /// the request timeout on a loaded node, which says nothing about the
    /// test.
    async fn drop_keyspace(store: &ScyllaStore, keyspace: &str) {
        let dropped = store
            .session()
            .query_unpaged(format!("DROP KEYSPACE IF EXISTS {keyspace}"), ())
            .await;
        if let Err(e) = dropped {
            eprintln!("could not drop keyspace {keyspace}: {e}");
        }
    }

    /// A writer stopped between deciding a commit and writing it: the next
    /// claim writes it, and the stopped writer's later commits are
    /// refused. On the node named by `SWITCHBOARD_TEST_SCYLLA` (the
    /// store's conformance suite has the rest of the fence).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_decided_commit_is_finished_by_the_next_claim() {
        use std::sync::Arc;
        use switchboard_store::Store;
        use switchboard_store::conformance::{check_seeded_conversation, key, text_message};

        let Some((config, keyspace)) = on_a_node("fence") else {
            return;
        };
        let first = Arc::new(ScyllaStore::connect(&config).await.unwrap());
        let second = ScyllaStore::connect(&config).await.unwrap();
        let (t, c) = ("fence", "c");
        switchboard_store::conformance::seed_conversation(first.as_ref(), t, c, &["a", "b"], 2)
            .await;

        let old = first.claim_writer(3).await.unwrap();
        let mut tx = Tx::for_commit(&first);
        let append = Mutation::Append {
            key: key(t, c),
            expected_last_seq: 2,
            messages: vec![text_message(c, 3, "a", "phone", "decided")],
            inbox: true,
        };
        rules::apply(&mut tx, &append).await.unwrap();
        tx.decide_only(old).await.unwrap();
        // Decided, not written.
        check_seeded_conversation(first.as_ref(), t, c, 2).await;

        let new = second.claim_writer(3).await.unwrap();
        assert!(new.epoch > old.epoch, "{new:?} {old:?}");
        check_seeded_conversation(&second, t, c, 3).await;

        let late = Mutation::Append {
            key: key(t, c),
            expected_last_seq: 3,
            messages: vec![text_message(c, 4, "a", "phone", "late")],
            inbox: true,
        };
        let refused = first.commit_as(old, vec![late.clone()]).await;
        assert!(matches!(refused, Err(StoreError::Fenced(_))), "{refused:?}");
        check_seeded_conversation(&second, t, c, 3).await;
        second.commit_as(new, vec![late]).await.unwrap();
        check_seeded_conversation(&second, t, c, 4).await;

        drop_keyspace(&second, &keyspace).await;
    }

    /// The host of the last writer had its clock a minute ahead: its
    /// write timestamps are in the new writer's future. The claim raises
    /// the new writer's clock past them, so that its commits are not lost
    /// to older ones (without it, the conversation's head keeps the old
    /// writer's `last_seq` and the new writer's next append is refused
    /// and planned again over its own acked message).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_new_writer_with_a_clock_behind_still_wins() {
        use switchboard_store::Store;
        use switchboard_store::conformance::{check_seeded_conversation, key, text_message};

        let Some((config, keyspace)) = on_a_node("skew") else {
            return;
        };
        let ahead = ScyllaStore::connect(&config).await.unwrap();
        let behind = ScyllaStore::connect(&config).await.unwrap();
        ahead
            .clock
            .observe(crate::cql::Clock::now_micros() + 60_000_000);
        let (t, c) = ("skew", "c");
        let append = |expected: u64, id: &str| Mutation::Append {
            key: key(t, c),
            expected_last_seq: expected,
            messages: vec![text_message(c, expected + 1, "a", "phone", id)],
            inbox: true,
        };
        let old = ahead.claim_writer(1).await.unwrap();
        let create = switchboard_store::conformance::create(
            t,
            c,
            switchboard_protocol::ConversationKind::Group,
            &["a", "b"],
            1_780_000_000_000,
        );
        ahead.commit_as(old, vec![create]).await.unwrap();
        ahead.commit_as(old, vec![append(0, "m1")]).await.unwrap();

        let new = behind.claim_writer(1).await.unwrap();
        behind.commit_as(new, vec![append(1, "m2")]).await.unwrap();
        check_seeded_conversation(&behind, t, c, 2).await;
        behind.commit_as(new, vec![append(2, "m3")]).await.unwrap();
        check_seeded_conversation(&behind, t, c, 3).await;

        drop_keyspace(&behind, &keyspace).await;
    }
}
