//! Snowflake message ids (F1): 41 bits of milliseconds since
//! [`EPOCH_MS`], 10 bits of node id, 12 bits of per-millisecond sequence.
//!
//! The generator is pure: the caller passes the clock reading, so the
//! behaviour under a clock that jumps backwards is testable. Node ids are
//! not chosen here; the backbone leases them so that no two processes
//! share one.
//!
//! Clock going backwards: the generator never reuses a timestamp it has
//! already handed out. It keeps issuing ids from its last timestamp,
//! borrowing the next millisecond when a millisecond's 4,096 sequence
//! numbers are used up, until the wall clock catches up. Ids therefore stay
//! unique and increasing; during the jump their timestamps run slightly
//! ahead of the wall clock, which is harmless because nothing derives
//! deadlines from them.

use crate::ids::MessageId;

/// 2024-01-01T00:00:00Z in Unix milliseconds. 41 bits of milliseconds last
/// about 69 years from here.
pub const EPOCH_MS: u64 = 1_704_067_200_000;
pub const NODE_BITS: u32 = 10;
pub const SEQUENCE_BITS: u32 = 12;
pub const MAX_NODE_ID: u16 = (1 << NODE_BITS) - 1;
const MAX_SEQUENCE: u64 = (1 << SEQUENCE_BITS) - 1;
const TIMESTAMP_BITS: u32 = 41;
const MAX_TIMESTAMP: u64 = (1 << TIMESTAMP_BITS) - 1;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnowflakeError {
    #[error("node id {0} does not fit in {NODE_BITS} bits")]
    NodeOutOfRange(u16),
}

/// Issues unique, increasing ids for one node.
#[derive(Debug)]
pub struct SnowflakeGenerator {
    node: u16,
    /// Milliseconds since the epoch of the last id issued.
    last_ms: u64,
    /// Sequence number of the last id issued within `last_ms`.
    sequence: u64,
}

impl SnowflakeGenerator {
    pub fn new(node: u16) -> Result<Self, SnowflakeError> {
        if node > MAX_NODE_ID {
            return Err(SnowflakeError::NodeOutOfRange(node));
        }
        Ok(Self {
            node,
            last_ms: 0,
            sequence: 0,
        })
    }

    pub fn node(&self) -> u16 {
        self.node
    }

    /// The next id, given the current Unix time in milliseconds.
    pub fn next_id(&mut self, unix_ms: u64) -> MessageId {
        let now = unix_ms.saturating_sub(EPOCH_MS).min(MAX_TIMESTAMP);
        if now > self.last_ms {
            self.last_ms = now;
            self.sequence = 0;
        } else if self.sequence < MAX_SEQUENCE {
            // Same millisecond, or the clock went backwards: stay on the
            // last timestamp so ids keep increasing.
            self.sequence += 1;
        } else {
            // This millisecond is used up: borrow the next one.
            self.last_ms += 1;
            self.sequence = 0;
        }
        MessageId::from_u64(
            (self.last_ms << (NODE_BITS + SEQUENCE_BITS))
                | (u64::from(self.node) << SEQUENCE_BITS)
                | self.sequence,
        )
    }
}

/// The parts of a Snowflake id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parts {
    pub unix_ms: u64,
    pub node: u16,
    pub sequence: u16,
}

pub fn decompose(id: MessageId) -> Parts {
    let v = id.as_u64();
    Parts {
        unix_ms: (v >> (NODE_BITS + SEQUENCE_BITS)) + EPOCH_MS,
        node: ((v >> SEQUENCE_BITS) & u64::from(MAX_NODE_ID)) as u16,
        sequence: (v & MAX_SEQUENCE) as u16,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    const T0: u64 = EPOCH_MS + 1_000_000;

    #[test]
    fn layout_round_trips() {
        let mut g = SnowflakeGenerator::new(513).unwrap();
        let id = g.next_id(T0);
        assert_eq!(
            decompose(id),
            Parts {
                unix_ms: T0,
                node: 513,
                sequence: 0
            }
        );
    }

    #[test]
    fn refuses_node_ids_over_ten_bits() {
        assert!(SnowflakeGenerator::new(1024).is_err());
        assert!(SnowflakeGenerator::new(1023).is_ok());
    }

    #[test]
    fn ids_increase_within_a_millisecond_and_borrow_when_it_is_used_up() {
        let mut g = SnowflakeGenerator::new(1).unwrap();
        let mut last = g.next_id(T0);
        for _ in 0..10_000 {
            let id = g.next_id(T0);
            assert!(id > last);
            last = id;
        }
        assert!(decompose(last).unix_ms > T0, "borrowed later milliseconds");
    }

    #[test]
    fn a_clock_going_backwards_never_repeats_an_id() {
        let mut g = SnowflakeGenerator::new(7).unwrap();
        let mut seen = HashSet::new();
        let mut last = MessageId::from_u64(0);
        for t in [T0, T0 + 5, T0 - 1_000, T0 - 999, T0 + 5, T0 + 6, T0 + 2] {
            for _ in 0..3 {
                let id = g.next_id(t);
                assert!(id > last, "ids keep increasing");
                assert!(seen.insert(id));
                last = id;
            }
        }
    }

    #[test]
    fn different_nodes_never_collide() {
        let mut a = SnowflakeGenerator::new(1).unwrap();
        let mut b = SnowflakeGenerator::new(2).unwrap();
        let ids: HashSet<_> = (0..5_000)
            .flat_map(|i| [a.next_id(T0 + i / 10), b.next_id(T0 + i / 10)])
            .collect();
        assert_eq!(ids.len(), 10_000);
    }
}
