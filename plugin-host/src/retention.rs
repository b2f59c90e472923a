//! What a tenant keeps stored in `sb_plugin_code`, decided on plain data
//! (`deploy.rs` reads the bucket and the store, and acts).
//!
//! - Each hook keeps the newest `max_versions_per_hook` versions of its
//!   rollback history ([`kept_versions`] of [`deploy_stack`]), and its
//!   shadow.
//! - A stored component no kept version uses is deleted once it is older
//!   than `prune_grace` (a younger one may belong to a deploy whose record
//!   is not written yet); until then it awaits pruning ([`plan`]).
//! - `max_bytes_per_tenant` bounds everything the tenant has stored: kept
//!   components, and those awaiting pruning. A deploy is refused when the
//!   components stored after it ([`Plan::bytes_with`]) would be over it.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::record::{Activation, VersionRecord};

/// The versions a rollback can return to, oldest first, from a key's
/// history (oldest first; `None` for a removal): each deploy pushes, each
/// rollback pops, a removal starts over.
pub(crate) fn deploy_stack<'a>(
    history: impl IntoIterator<Item = Option<&'a VersionRecord>>,
) -> Vec<VersionRecord> {
    let mut stack = Vec::new();
    for record in history {
        match record {
            Some(r) if r.activation == Activation::Deploy => stack.push(r.clone()),
            Some(_) => {
                stack.pop();
            }
            None => stack.clear(),
        }
    }
    stack
}

/// The versions of a rollback stack that are kept: the newest `max` (at
/// least the active one).
pub(crate) fn kept_versions(stack: &[VersionRecord], max: usize) -> &[VersionRecord] {
    &stack[stack.len().saturating_sub(max.max(1))..]
}

/// One of the tenant's objects in the code store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stored {
    pub name: String,
    pub digest: String,
    pub size: u64,
    /// How long ago it was stored; `None` when the store does not say
    /// (then it is treated as old).
    pub age: Option<Duration>,
}

/// What the tenant's stored components come to.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Objects to delete now: unkept and older than the grace.
    pub prune: Vec<String>,
    /// Bytes stored once those are deleted: kept components, and unkept
    /// ones still within their grace.
    pub bytes: u64,
    /// Digests stored, whatever becomes of them.
    pub stored: BTreeSet<String>,
    /// When the next unkept component can be deleted, if any waits.
    pub next_prune_in: Option<Duration>,
}

impl Plan {
    /// Bytes stored after adding a component of `digest` and `size`: the
    /// same when it is stored already.
    pub(crate) fn bytes_with(&self, digest: &str, size: u64) -> u64 {
        if self.stored.contains(digest) {
            self.bytes
        } else {
            self.bytes.saturating_add(size)
        }
    }
}

/// Which of `stored` go and what the rest weigh, when `kept` are the
/// digests kept versions use.
pub(crate) fn plan(stored: &[Stored], kept: &BTreeSet<String>, grace: Duration) -> Plan {
    let mut plan = Plan::default();
    for object in stored {
        plan.stored.insert(object.digest.clone());
        let age = object.age.unwrap_or(Duration::MAX);
        if kept.contains(&object.digest) {
            plan.bytes = plan.bytes.saturating_add(object.size);
        } else if age >= grace {
            plan.prune.push(object.name.clone());
        } else {
            plan.bytes = plan.bytes.saturating_add(object.size);
            let wait = grace - age;
            plan.next_prune_in = Some(plan.next_prune_in.map_or(wait, |w| w.min(wait)));
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use switchboard_protocol::Timestamp;

    use super::*;
    use crate::record::OnFailure;

    fn record(digest: &str, activation: Activation) -> VersionRecord {
        VersionRecord {
            digest: digest.into(),
            size: 1,
            config: BTreeMap::new(),
            on_failure: OnFailure::Closed,
            activation,
            activated_at: Timestamp::from_unix_ms(0),
            activated_by: "admin".into(),
        }
    }

    fn digests(stack: &[VersionRecord]) -> Vec<&str> {
        stack.iter().map(|r| r.digest.as_str()).collect()
    }

    fn stack(history: &[Option<VersionRecord>]) -> Vec<VersionRecord> {
        deploy_stack(history.iter().map(Option::as_ref))
    }

    #[test]
    fn rollbacks_undo_deploys_one_by_one() {
        use Activation::*;
        let mut h = vec![
            Some(record("a", Deploy)),
            Some(record("b", Deploy)),
            Some(record("c", Deploy)),
        ];
        assert_eq!(digests(&stack(&h)), ["a", "b", "c"]);
        h.push(Some(record("b", Rollback)));
        assert_eq!(digests(&stack(&h)), ["a", "b"]);
        h.push(Some(record("a", Rollback)));
        assert_eq!(digests(&stack(&h)), ["a"]);
        h.push(Some(record("d", Deploy)));
        assert_eq!(digests(&stack(&h)), ["a", "d"]);
        h.push(None);
        assert!(stack(&h).is_empty(), "a removal starts over");
    }

    #[test]
    fn only_the_newest_versions_are_kept() {
        let h: Vec<_> = ["a", "b", "c", "d"]
            .iter()
            .map(|d| Some(record(d, Activation::Deploy)))
            .collect();
        let stack = stack(&h);
        assert_eq!(digests(kept_versions(&stack, 2)), ["c", "d"]);
        assert_eq!(digests(kept_versions(&stack, 4)), ["a", "b", "c", "d"]);
        assert_eq!(digests(kept_versions(&stack, 9)), ["a", "b", "c", "d"]);
        assert_eq!(
            digests(kept_versions(&stack, 0)),
            ["d"],
            "the active one always"
        );
        assert!(kept_versions(&[], 3).is_empty());
    }

    fn stored(digest: &str, size: u64, age_s: Option<u64>) -> Stored {
        Stored {
            name: format!("acme.{digest}"),
            digest: digest.into(),
            size,
            age: age_s.map(Duration::from_secs),
        }
    }

    #[test]
    fn components_awaiting_pruning_count_until_they_are_deleted() {
        let grace = Duration::from_secs(60);
        let kept: BTreeSet<String> = ["active", "shadow"].map(String::from).into();
        let objects = [
            stored("active", 7, Some(600)),
            stored("shadow", 7, Some(1)),
            // Replaced shadows: two within their grace, one past it, one
            // whose age the store does not tell.
            stored("old-shadow-1", 7, Some(10)),
            stored("old-shadow-2", 7, Some(50)),
            stored("old-shadow-3", 7, Some(61)),
            stored("unknown-age", 7, None),
        ];
        let p = plan(&objects, &kept, grace);
        assert_eq!(p.prune, ["acme.old-shadow-3", "acme.unknown-age"]);
        assert_eq!(p.bytes, 4 * 7, "kept and awaiting pruning");
        assert_eq!(
            p.next_prune_in,
            Some(Duration::from_secs(10)),
            "when the next one can go"
        );
        // A component stored already adds nothing; a new one its size.
        assert_eq!(p.bytes_with("old-shadow-1", 7), 28);
        assert_eq!(p.bytes_with("new", 7), 35);
        // Nothing waits when every unkept one is past its grace.
        let p = plan(&objects, &kept, Duration::ZERO);
        assert_eq!(p.bytes, 14);
        assert_eq!(p.next_prune_in, None);
        assert_eq!(p.prune.len(), 4);
    }
}
