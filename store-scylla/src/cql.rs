//! Typed prepared statements, the calls that run them, and write
//! timestamps.
//!
//! Nothing here could be run against a server where this crate was
//! written, so statements carry their types: a [`Read`] names the CQL
//! types of its bind markers and the Rust row it returns, a [`Write`] the
//! CQL types of its bind markers. Call sites cannot bind a value of another
//! type (the [`Args`] bound), and a unit test (`statements.rs`) checks every
//! statement's markers and columns against `deploy/scylla/schema.cql`.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Instant;

use futures::StreamExt;
use futures::stream::BoxStream;
use scylla::client::session::Session;
use scylla::deserialize::row::DeserializeRow;
use scylla::deserialize::value::DeserializeValue;
use scylla::errors::{DbError, ExecutionError, RequestAttemptError};
use scylla::frame::response::result::{ColumnType, NativeType};
use scylla::response::query_result::ColumnSpecs;
use scylla::response::{PagingState, PagingStateResponse};
use scylla::serialize::row::SerializeRow;
use scylla::serialize::value::SerializeValue;
use scylla::statement::prepared::PreparedStatement;
use switchboard_store::{StoreError, StoreResult};

use crate::metrics::{self, Request};

/// A driver or network failure: the request may or may not have been
/// applied (a timed-out write can still land), and retrying is safe.
pub(crate) fn unavailable(e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("scylla: {e}"))
}

/// Whether a failed request may still have been applied, or was not sent
/// at all, so that sending it again is the way to a known outcome; a
/// refusal (invalid, unauthorized, a batch too large) is not.
pub(crate) fn outcome_unknown(e: &ExecutionError) -> bool {
    match e {
        ExecutionError::LastAttemptError(RequestAttemptError::DbError(db, _)) => matches!(
            db,
            DbError::WriteTimeout { .. }
                | DbError::Unavailable { .. }
                | DbError::Overloaded
                | DbError::IsBootstrapping
                | DbError::ServerError
                | DbError::WriteFailure { .. }
        ),
        ExecutionError::LastAttemptError(RequestAttemptError::BrokenConnectionError(_))
        | ExecutionError::LastAttemptError(RequestAttemptError::UnableToAllocStreamId)
        | ExecutionError::RequestTimeout(_)
        | ExecutionError::ConnectionPoolError(_)
        | ExecutionError::EmptyPlan => true,
        _ => false,
    }
}

/// Rows that do not have the shape the schema promises.
pub(crate) fn corrupt(e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("scylla row: {e}"))
}

/// A CQL type, named as in the schema.
pub(crate) trait Kind {
    const CQL: &'static str;
}

pub(crate) struct Text;
pub(crate) struct BigInt;
pub(crate) struct Int;
pub(crate) struct TinyInt;

impl Kind for Text {
    const CQL: &'static str = "text";
}
impl Kind for BigInt {
    const CQL: &'static str = "bigint";
}
impl Kind for Int {
    const CQL: &'static str = "int";
}
impl Kind for TinyInt {
    const CQL: &'static str = "tinyint";
}

/// A Rust value that binds to a marker of CQL type `K`.
pub(crate) trait Arg<K>: SerializeValue + Send + Sync {}

impl Arg<Text> for String {}
impl Arg<Text> for &str {}
impl Arg<Text> for &String {}
impl Arg<BigInt> for i64 {}
impl Arg<Int> for i32 {}
impl Arg<TinyInt> for i8 {}
/// `None` binds null.
impl<K, T: Arg<K>> Arg<K> for Option<T> {}

/// About how many bytes a value takes in a request, to size batches.
pub(crate) trait Size {
    fn size(&self) -> usize;
}

impl Size for String {
    fn size(&self) -> usize {
        self.len() + 4
    }
}
impl Size for i64 {
    fn size(&self) -> usize {
        12
    }
}
impl Size for i32 {
    fn size(&self) -> usize {
        8
    }
}
impl Size for i8 {
    fn size(&self) -> usize {
        5
    }
}
impl<T: Size> Size for Option<T> {
    fn size(&self) -> usize {
        self.as_ref().map_or(4, Size::size)
    }
}

/// The values of all markers of a statement whose marker types are `B`.
pub(crate) trait Args<B>: SerializeRow + Send + Sync {}

/// The CQL type names of a tuple of [`Kind`]s.
pub(crate) trait Kinds {
    fn names() -> Vec<&'static str>;
}

/// A Rust type a column of one CQL type deserializes to.
pub(crate) trait Col: for<'f, 'm> DeserializeValue<'f, 'm> {
    const CQL: &'static str;
}

impl Col for String {
    const CQL: &'static str = "text";
}
impl Col for i64 {
    const CQL: &'static str = "bigint";
}
impl Col for i32 {
    const CQL: &'static str = "int";
}
impl Col for i8 {
    const CQL: &'static str = "tinyint";
}
/// A column that may be null.
impl<T: Col> Col for Option<T> {
    const CQL: &'static str = T::CQL;
}

/// A row: a tuple of [`Col`]s.
pub(crate) trait Row: for<'f, 'm> DeserializeRow<'f, 'm> + Send + 'static {
    fn names() -> Vec<&'static str>;
}

/// A statement without markers (a full scan).
impl Args<()> for () {}
impl Kinds for () {
    fn names() -> Vec<&'static str> {
        Vec::new()
    }
}

macro_rules! tuples {
    ($(($($k:ident $a:ident),+))+) => {$(
        impl<$($k: Kind, $a: Arg<$k>),+> Args<($($k,)+)> for ($($a,)+) {}
        impl<$($k: Kind),+> Kinds for ($($k,)+) {
            fn names() -> Vec<&'static str> {
                vec![$($k::CQL),+]
            }
        }
        #[allow(non_snake_case)]
        impl<$($a: Size),+> Size for ($($a,)+) {
            fn size(&self) -> usize {
                let ($($a,)+) = self;
                0 $(+ $a.size())+
            }
        }
        impl<$($a: Col + Send + 'static),+> Row for ($($a,)+) {
            fn names() -> Vec<&'static str> {
                vec![$($a::CQL),+]
            }
        }
    )+};
}

tuples! {
    (K1 A1)
    (K1 A1, K2 A2)
    (K1 A1, K2 A2, K3 A3)
    (K1 A1, K2 A2, K3 A3, K4 A4)
    (K1 A1, K2 A2, K3 A3, K4 A4, K5 A5)
    (K1 A1, K2 A2, K3 A3, K4 A4, K5 A5, K6 A6)
    (K1 A1, K2 A2, K3 A3, K4 A4, K5 A5, K6 A6, K7 A7)
    (K1 A1, K2 A2, K3 A3, K4 A4, K5 A5, K6 A6, K7 A7, K8 A8)
    (K1 A1, K2 A2, K3 A3, K4 A4, K5 A5, K6 A6, K7 A7, K8 A8, K9 A9)
    (K1 A1, K2 A2, K3 A3, K4 A4, K5 A5, K6 A6, K7 A7, K8 A8, K9 A9, K10 A10)
}

/// What the schema test needs to know of one statement.
#[cfg(test)]
pub(crate) struct Shape {
    pub name: &'static str,
    pub cql: &'static str,
    pub binds: Vec<&'static str>,
    /// `None` for a write.
    pub columns: Option<Vec<&'static str>>,
}

/// A prepared SELECT with marker types `B`, returning rows `R`.
pub(crate) struct Read<B, R> {
    pub(crate) ps: PreparedStatement,
    _types: PhantomData<fn(B) -> R>,
}

/// A prepared INSERT, UPDATE or DELETE with marker types `B`.
pub(crate) struct Write<B> {
    pub(crate) ps: PreparedStatement,
    _types: PhantomData<fn(B)>,
}

/// The schema name of a column type this store uses.
fn type_name(t: &ColumnType<'_>) -> &'static str {
    match t {
        ColumnType::Native(NativeType::Text) => "text",
        ColumnType::Native(NativeType::BigInt) => "bigint",
        ColumnType::Native(NativeType::Int) => "int",
        ColumnType::Native(NativeType::TinyInt) => "tinyint",
        _ => "another type",
    }
}

/// Refuses to start when the server's idea of a statement's types is not
/// the store's: a keyspace created by another schema, or a mistake that
/// would otherwise fail on first use.
fn check_types(
    cql: &str,
    what: &str,
    expected: &[&'static str],
    found: ColumnSpecs<'_, '_>,
) -> StoreResult<()> {
    let found: Vec<&'static str> = found.iter().map(|c| type_name(c.typ())).collect();
    if found != expected {
        return Err(StoreError::Corrupt(format!(
            "the cluster gives {cql:?} {what} of types {found:?}, the store expects {expected:?}"
        )));
    }
    Ok(())
}

async fn prepare(
    session: &Session,
    cql: &str,
    binds: &[&'static str],
    columns: Option<&[&'static str]>,
) -> StoreResult<PreparedStatement> {
    let mut ps = session
        .prepare(cql)
        .await
        .map_err(|e| unavailable(format!("preparing {cql:?}: {e}")))?;
    check_types(cql, "markers", binds, ps.get_variable_col_specs())?;
    if let Some(columns) = columns {
        // Servers may leave result metadata out of a prepare answer; the
        // driver checks the rows' types then, on each read.
        let specs = ps.get_current_result_set_col_specs();
        if !specs.get().as_slice().is_empty() {
            check_types(cql, "columns", columns, specs.get())?;
        }
    }
    // Reads are naturally idempotent, and every write carries its own
    // timestamp (`USING TIMESTAMP ?`), so sending it twice writes the same
    // cells with the same timestamp: the driver may retry and speculate.
    ps.set_is_idempotent(true);
    Ok(ps)
}

impl<B: Kinds, R: Row> Read<B, R> {
    pub(crate) async fn prepare(session: &Session, cql: &str) -> StoreResult<Self> {
        Ok(Self {
            ps: prepare(session, cql, &B::names(), Some(&R::names())).await?,
            _types: PhantomData,
        })
    }

    #[cfg(test)]
    pub(crate) fn shape(name: &'static str, cql: &'static str) -> Shape {
        Shape {
            name,
            cql,
            binds: B::names(),
            columns: Some(R::names()),
        }
    }

    /// Every row, in one unpaged request: for point reads and partitions
    /// whose size the schema bounds.
    pub(crate) async fn all(&self, s: &Session, args: impl Args<B>) -> StoreResult<Vec<R>> {
        let started = Instant::now();
        let sent = s.execute_unpaged(&self.ps, args).await;
        metrics::observe(Request::Read, started, &sent);
        let result = sent
            .map_err(unavailable)?
            .into_rows_result()
            .map_err(corrupt)?;
        result
            .rows::<R>()
            .map_err(corrupt)?
            .map(|r| r.map_err(corrupt))
            .collect()
    }

    /// The first row, if any.
    pub(crate) async fn one(&self, s: &Session, args: impl Args<B>) -> StoreResult<Option<R>> {
        let started = Instant::now();
        let sent = s.execute_unpaged(&self.ps, args).await;
        metrics::observe(Request::Read, started, &sent);
        let result = sent
            .map_err(unavailable)?
            .into_rows_result()
            .map_err(corrupt)?;
        result.maybe_first_row::<R>().map_err(corrupt)
    }

    /// Every row, fetched page by page as the stream is read: for scans.
    /// Dropping the stream stops the fetching.
    pub(crate) async fn stream(
        &self,
        s: &Session,
        args: impl Args<B>,
    ) -> StoreResult<BoxStream<'static, StoreResult<R>>> {
        let started = Instant::now();
        let sent = s.execute_iter(self.ps.clone(), args).await;
        metrics::observe_pager(Request::Read, started, &sent);
        let pager = sent.map_err(unavailable)?;
        let rows = pager.rows_stream::<R>().map_err(corrupt)?;
        Ok(rows
            .map(|r| {
                r.map_err(|e| match e {
                    scylla::errors::NextRowError::RowDeserializationError(e) => corrupt(e),
                    other => unavailable(other),
                })
            })
            .boxed())
    }

    /// One page of at most `page_size` rows from `from`, and where the
    /// next page starts (`None` at the end): for resumable scans.
    pub(crate) async fn page(
        &self,
        s: &Session,
        args: impl Args<B>,
        from: PagingState,
        page_size: i32,
    ) -> StoreResult<(Vec<R>, Option<PagingState>)> {
        let mut ps = self.ps.clone();
        ps.set_page_size(page_size.max(1));
        let started = Instant::now();
        let sent = s.execute_single_page(&ps, args, from).await;
        metrics::observe(Request::Read, started, &sent);
        let (result, next) = sent.map_err(unavailable)?;
        let rows = result
            .into_rows_result()
            .map_err(corrupt)?
            .rows::<R>()
            .map_err(corrupt)?
            .map(|r| r.map_err(corrupt))
            .collect::<StoreResult<Vec<R>>>()?;
        let next = match next {
            PagingStateResponse::HasMorePages { state } => Some(state),
            PagingStateResponse::NoMorePages => None,
        };
        Ok((rows, next))
    }
}

impl<B: Kinds> Write<B> {
    pub(crate) async fn prepare(session: &Session, cql: &str) -> StoreResult<Self> {
        Ok(Self {
            ps: prepare(session, cql, &B::names(), None).await?,
            _types: PhantomData,
        })
    }

    #[cfg(test)]
    pub(crate) fn shape(name: &'static str, cql: &'static str) -> Shape {
        Shape {
            name,
            cql,
            binds: B::names(),
            columns: None,
        }
    }

    /// Runs the write alone (outside a commit's batch).
    pub(crate) async fn run(&self, s: &Session, args: impl Args<B>) -> StoreResult<()> {
        let started = Instant::now();
        let sent = s.execute_unpaged(&self.ps, args).await;
        metrics::observe(Request::Write, started, &sent);
        sent.map_err(unavailable).map(|_| ())
    }
}

/// Write timestamps, in microseconds: every write states its own.
///
/// Within a commit the statements get increasing timestamps in the order
/// the mutations produced them, so in a batch (where Scylla would give all
/// statements one timestamp, and a delete would win over an insert of the
/// same row) a later statement wins over an earlier one: mutations apply
/// in order. Across commits of this process the clock never goes back.
/// Across processes, writes are ordered by their hosts' clocks: the
/// cluster and its clients need synchronised clocks (NTP/chrony), as any
/// Scylla deployment does.
pub(crate) struct Clock {
    last: AtomicI64,
}

impl Clock {
    pub(crate) fn new() -> Self {
        Self {
            last: AtomicI64::new(0),
        }
    }

    pub(crate) fn now_micros() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    }

    /// `n` consecutive timestamps after every earlier one; the first is
    /// returned.
    pub(crate) fn reserve(&self, n: usize) -> i64 {
        let n = i64::try_from(n.max(1)).unwrap_or(i64::MAX / 2);
        let now = Self::now_micros();
        let mut current = self.last.load(Ordering::Relaxed);
        loop {
            let first = now.max(current.saturating_add(1));
            let last = first.saturating_add(n - 1);
            match self.last.compare_exchange_weak(
                current,
                last,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return first,
                Err(seen) => current = seen,
            }
        }
    }

    /// One timestamp after every earlier one.
    pub(crate) fn next(&self) -> i64 {
        self.reserve(1)
    }

    /// Records that timestamps up to `last` were handed out.
    pub(crate) fn observe(&self, last: i64) {
        self.last.fetch_max(last, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_never_repeats_or_goes_back() {
        let clock = Clock::new();
        let a = clock.reserve(10);
        let b = clock.next();
        assert!(b >= a + 10, "{a} {b}");
        let c = clock.reserve(3);
        assert!(c > b);
    }

    #[test]
    fn kinds_name_the_schema_types() {
        assert_eq!(
            <(Text, BigInt, Int, TinyInt)>::names(),
            vec!["text", "bigint", "int", "tinyint"]
        );
        assert_eq!(
            <(String, Option<i64>, i32, i8)>::names(),
            vec!["text", "bigint", "int", "tinyint"]
        );
    }
}
