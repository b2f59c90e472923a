//! What the commit thread knows beyond the last committed snapshot.
//!
//! The commit thread is the store's only writer, so anything it read or wrote
//! stays true until it changes it itself. The cache keeps conversation
//! state, member lists and rows, device lists, device cursors, the day
//! buckets and the speakers already recorded, so appends do not read them again. It is
//! write-through: every write the commit thread makes updates it, so within a
//! group of jobs (one write batch, not yet committed) later jobs see the
//! effects of earlier ones. `None` entries record a known absence.
//!
//! A batch that is thrown away or fails to commit may have changed entries
//! it never wrote: the commit thread then clears the cache and reads again.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use switchboard_protocol::{ConversationKind, Message, MessageVersion};

use super::rows::{MemberRow, StateRow};

/// Past this many entries the cache starts over (a bound, not a policy).
const MAX_ENTRIES: usize = 200_000;

#[derive(Default)]
pub(super) struct RowCache {
    /// conversation key → state row.
    pub states: HashMap<Vec<u8>, Option<StateRow>>,
    /// conversation key → member ids.
    pub members: HashMap<Vec<u8>, Vec<String>>,
    /// conversation key → kind.
    pub kinds: HashMap<Vec<u8>, ConversationKind>,
    /// member key → member row.
    pub member_rows: HashMap<Vec<u8>, Option<MemberRow>>,
    /// tenant+user key → device ids.
    pub devices: HashMap<Vec<u8>, Vec<String>>,
    /// device cursor key → delivered seq.
    pub cursors: HashMap<Vec<u8>, u64>,
    /// bucket keys already recorded.
    pub days: HashSet<Vec<u8>>,
    /// speaker keys already recorded.
    pub speakers: HashSet<Vec<u8>>,
}

impl RowCache {
    pub fn clear(&mut self) {
        *self = Self::default();
    }

    /// Starts over when it has grown past its bound. Only between groups.
    pub fn trim(&mut self) {
        let entries = self.states.len()
            + self.members.len()
            + self.kinds.len()
            + self.member_rows.len()
            + self.devices.len()
            + self.cursors.len()
            + self.days.len()
            + self.speakers.len();
        if entries > MAX_ENTRIES {
            self.clear();
        }
    }
}

/// What the current group wrote that the cache does not track.
#[derive(Default)]
pub(super) struct Pending {
    /// Inbox keys inserted (and not removed) in this group.
    pub inbox: BTreeSet<Vec<u8>>,
    /// Idempotency keys inserted in this group.
    pub sent: HashSet<Vec<u8>>,
    /// Messages written in this group, by message key (an edit may follow
    /// the send in the same group).
    pub messages: HashMap<Vec<u8>, Message>,
    /// Versions of messages edited in this group, by message key.
    pub versions: HashMap<Vec<u8>, Vec<(Vec<u8>, MessageVersion)>>,
    /// Unsolicited adds recorded in this group: tenant+user key → when.
    pub unsolicited: HashMap<Vec<u8>, Vec<i64>>,
    /// Member states written in this group, by member key (`None`: the
    /// row was removed).
    pub member_states: HashMap<Vec<u8>, Option<crate::MemberState>>,
    /// Reaction rows written (`true`) or removed (`false`) in this group.
    pub reactions: BTreeMap<Vec<u8>, bool>,
    /// Pins written (`Some`) or removed in this group.
    pub pins: BTreeMap<Vec<u8>, Option<crate::PinRow>>,
    /// Thread read marks written in this group.
    pub thread_marks: HashMap<Vec<u8>, u64>,
    /// Conversations with a bucket archived in this group: the snapshot
    /// still shows the removed rows, so later writes to them in the same
    /// group are refused (and retried after the commit).
    pub archived: HashSet<Vec<u8>>,
}
