//! A query's time: a [`Deadline`] set when the replica takes the query
//! (its wait for a turn counts), and [`Within`], a collector that walks
//! each segment's matches itself so that it can stop between any two
//! thousand of them once the deadline passes. A query whose caller has
//! given up (the gateway waits a little longer than the deadline) stops
//! computing instead of keeping a core busy for nothing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use tantivy::collector::{Collector, SegmentCollector};
use tantivy::query::Weight;
use tantivy::{DocSet, Score, SegmentOrdinal, SegmentReader, TERMINATED, TantivyError};

/// Matches walked between two looks at the clock.
const CHECK_EVERY: u32 = 1024;

#[derive(Debug)]
pub struct Deadline {
    at: Instant,
    passed: AtomicBool,
}

impl Deadline {
    pub fn new(at: Instant) -> Self {
        Self {
            at,
            passed: AtomicBool::new(false),
        }
    }

    /// Whether the query's time is up; remembered, so that a caller can
    /// tell a timeout from another failure afterwards.
    pub fn check(&self) -> Result<(), TantivyError> {
        if Instant::now() >= self.at {
            self.passed.store(true, Ordering::Relaxed);
            return Err(TantivyError::InternalError(
                "the query ran out of time".into(),
            ));
        }
        Ok(())
    }

    /// The time left (none once passed).
    pub fn remaining(&self) -> std::time::Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    pub fn passed(&self) -> bool {
        self.passed.load(Ordering::Relaxed)
    }
}

/// `inner`, stopped by `deadline`.
pub struct Within<'a, C> {
    pub inner: C,
    pub deadline: &'a Deadline,
}

impl<C: Collector> Collector for Within<'_, C> {
    type Fruit = C::Fruit;
    type Child = C::Child;

    fn for_segment(
        &self,
        ord: SegmentOrdinal,
        segment: &SegmentReader,
    ) -> tantivy::Result<C::Child> {
        self.deadline.check()?;
        self.inner.for_segment(ord, segment)
    }

    fn requires_scoring(&self) -> bool {
        self.inner.requires_scoring()
    }

    fn merge_fruits(
        &self,
        fruits: Vec<<C::Child as SegmentCollector>::Fruit>,
    ) -> tantivy::Result<C::Fruit> {
        self.inner.merge_fruits(fruits)
    }

    fn collect_segment(
        &self,
        weight: &dyn Weight,
        ord: SegmentOrdinal,
        reader: &SegmentReader,
    ) -> tantivy::Result<<C::Child as SegmentCollector>::Fruit> {
        let mut child = self.for_segment(ord, reader)?;
        let mut scorer = weight.scorer(reader, 1.0)?;
        let alive = reader.alive_bitset();
        let mut walked = 0u32;
        let mut doc = scorer.doc();
        while doc != TERMINATED {
            if alive.is_none_or(|a| a.is_alive(doc)) {
                let score: Score = scorer.score();
                child.collect(doc, score);
            }
            walked += 1;
            if walked.is_multiple_of(CHECK_EVERY) {
                self.deadline.check()?;
            }
            doc = scorer.advance();
        }
        Ok(child.harvest())
    }
}
