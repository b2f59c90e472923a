//! The store conformance suite: one set of checks every [`Store`](crate::Store) backend
//! must pass. [`conformance_tests!`](crate::conformance_tests) makes one
//! test of each check for a backend: the embedded store runs them in its
//! unit tests, the integration tests against the store served over NATS,
//! and `store-scylla` against a Scylla node when one is named.
//!
//! Test-support code, built only for tests and with the `conformance`
//! feature: it panics on the first broken expectation.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod archive;
mod channels;
mod commits;
mod edits;
mod erasure;
mod inbox;
mod media;
mod people;
mod reactions;
mod reads;
mod roles;
mod safety;
mod support;
mod threads;

pub use archive::*;
pub use channels::*;
pub use commits::*;
pub use edits::*;
pub use erasure::*;
pub use inbox::*;
pub use media::*;
pub use people::*;
pub use reactions::*;
pub use reads::*;
pub use roles::*;
pub use safety::*;
pub use support::*;
pub use threads::*;

/// One `#[tokio::test]` per conformance check, each on a store from
/// `$subject`: an async fn returning `Option<Subject>` (`None` skips the
/// check, for a backend whose server is not there). Every check uses
/// tenants of its own, so the subjects may share one database.
///
/// `conformance_tests!(subject)` is for a backend; it also checks that
/// reads through the archive tier (`archive::Tiered`) over it are
/// unchanged. `conformance_tests!(subject, served)` is for a store served
/// by a process that has an archive tier of its own (the store service):
/// the tier's check does not apply to it.
#[macro_export]
macro_rules! conformance_tests {
    ($subject:path) => {
        $crate::conformance_tests!($subject, served);
        $crate::conformance_tests!(@checks $subject;
            tiered_reads_are_unchanged,
            expiry_rewrites_archived_buckets,
        );
    };
    ($subject:path, served) => {
        $crate::conformance_tests!(@checks $subject;
            create_is_exclusive,
            appends_continue_seq_without_gaps,
            idempotency_keys_find_the_original,
            history_is_newest_first_and_bounded,
            reads_need_membership,
            inbox_is_per_device,
            marks_only_move_forward,
            conversation_list_is_most_recent_first,
            removing_a_member_takes_their_access_and_inbox,
            tenants_are_separate,
            edits_and_deletes,
            concurrent_commits_all_land,
            old_inbox_entries_expire,
            media_is_readable_by_members_of_conversations_that_reference_it,
            a_deleted_messages_media_is_referenced_no_more,
            link_previews_follow_their_links_and_reference_their_images,
            the_inbox_reads_on_after_a_cursor,
            old_buckets_move_to_the_archive,
            the_conversation_list_pages_in_order,
            a_conversation_that_moves_is_listed_once,
            speakers_decide_contacts_and_who_knows_whom,
            unsolicited_adds_are_recorded_within_their_limit,
            roles_follow_the_creator_what_was_given_and_who_is_left,
            a_members_own_settings_are_theirs_and_listed,
            reactions_are_idempotent_bounded_and_the_readers_own,
            votes_are_one_per_member_counted_once_and_the_readers_own,
            pins_are_bounded_listed_newest_first_and_unpinned,
            threads_count_their_replies_and_each_members_unread,
            mentions_are_counted_until_read_and_reach_those_without_inboxes,
            policies_bans_and_blocks_are_stored_and_shown,
            profiles_are_stored_replaced_and_erased,
            public_channels_are_listed_joined_and_invited_to,
            unread_counts_count_what_a_member_would,
            a_shadow_message_is_its_senders_alone,
            reports_are_listed_by_status_newest_first_and_counted,
            expired_messages_go_as_deletions_and_leave_the_inboxes,
            erasure_leaves_tombstones_and_nothing_of_the_user,
            a_senders_messages_are_listed_from_their_own_rows,
        );
    };
    (@checks $subject:path; $($check:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $check() {
                if let Some(subject) = $subject().await {
                    $crate::conformance::$check(&subject.store).await;
                    subject.finish().await;
                }
            }
        )*
    };
}
