//! The typed reads on `dyn Store`: `store.history(…)` is
//! [`Store::read`] with a [`Read::History`] and its answer unpacked.
//! Made from the list in `reads.rs`.

use switchboard_protocol::channels::Invite;
use switchboard_protocol::profile::Profile;
use switchboard_protocol::reports::{Report, ReportStatus};
use switchboard_protocol::safety::{Ban, Block};
use switchboard_protocol::{
    ConversationId, ConversationKind, DeviceId, Message, MessageId, MessageVersion, TenantId,
    Timestamp, UserId,
};

use crate::reads::{Answer, Read, store_reads};
use crate::{
    ArchiveScan, ArchivedBucket, BucketContents, BucketKey, Consent, ConsentQuery,
    ConversationDetail, ConversationKey, ConversationScan, ConversationSummary, ExpiredScan,
    HistoryQuery, InboxCursor, ListQuery, Listing, MessageKey, PinRow, PolicyScan, SentBy, SentKey,
    SequencerState, Store, StoreError, StoreResult, ThreadEntry,
};

macro_rules! typed_reads {
    ($(
        $(#[doc = $doc:literal])*
        $variant:ident $method:ident ( $($arg:ident : [$($ty:tt)+]),* ) -> $ret:ty;
    )*) => {
        /// Each read, typed: [`Store::read`] with its answer unpacked.
        impl dyn Store {
            $(
                $(#[doc = $doc])*
                pub async fn $method(&self, $($arg: $($ty)+),*) -> StoreResult<$ret> {
                    match self.read(Read::$variant { $($arg: arg_owned!($arg; $($ty)+)),* }).await? {
                        Answer::$variant(answer) => Ok(answer),
                        other => Err(mismatched(stringify!($method), &other)),
                    }
                }
            )*
        }
    };
}

store_reads!(typed_reads);

/// A backend answered a read with another read's answer: a bug in it.
fn mismatched(read: &str, answer: &Answer) -> StoreError {
    let got = format!("{answer:?}");
    let got: String = got.chars().take(60).collect();
    StoreError::Corrupt(format!("the answer to {read} was {got}"))
}
