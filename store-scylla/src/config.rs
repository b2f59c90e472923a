//! Settings of the Scylla store.

use std::collections::BTreeMap;
use std::time::Duration;

use scylla::statement::Consistency;
use serde::Deserialize;
use switchboard_store::{StoreError, StoreResult};

/// How to reach the cluster and how to use it.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScyllaConfig {
    /// Contact points, `host:port` (the driver discovers the other nodes).
    pub nodes: Vec<String>,
    /// The keyspace that holds every table (lower case, `[a-z_][a-z0-9_]*`).
    pub keyspace: String,
    /// The datacenter this process runs in: requests go to its replicas
    /// first and never leave it (`LOCAL_*` consistency counts it alone).
    pub local_dc: Option<String>,
    /// Replication of a keyspace this process creates. An existing
    /// keyspace keeps its own: changing it is an operator's `ALTER
    /// KEYSPACE` followed by a repair.
    pub replication: Replication,
    /// Consistency of every read and write: `local_quorum` (the default),
    /// `quorum`, `each_quorum`, `local_one`, `one`, `two`, `three`, `all`.
    pub consistency: String,
    pub username: Option<String>,
    pub password: Option<String>,
    /// How long an undelivered inbox entry lives (`USING TTL`); a device
    /// away longer catches up from history.
    pub inbox_ttl_secs: u32,
    /// Client-side limit of one request, retries included.
    pub request_timeout_ms: u64,
    /// A read or write (each is idempotent) unanswered after this long is
    /// sent to a second node as well, and the first answer wins: a node
    /// that stopped without closing its connections (a frozen VM, a long
    /// garbage-collection pause) then costs this long instead of
    /// `request_timeout_ms`. 0 turns it off.
    pub speculative_after_ms: u64,
    /// Create the keyspace and tables at start-up (idempotent). Off where
    /// an operator applies `deploy/scylla/schema.cql` instead.
    pub create_schema: bool,
    /// Whether `expire_inbox` also sweeps entries older than its cut-off.
    /// Off by default: the TTL expires entries by itself and a sweep is a
    /// scan of the whole inbox table. The conformance suite turns it on,
    /// because it checks that a sweep removes what it names.
    pub inbox_sweep: bool,
    /// A commit whose rows add up to more than this many bytes writes its
    /// inbox fan-out in separate batches ahead of the commit's own batch
    /// (see `commit.rs`). Keep it below the cluster's
    /// `batch_size_fail_threshold_in_kb`.
    pub max_batch_bytes: usize,
}

impl Default for ScyllaConfig {
    fn default() -> Self {
        Self {
            nodes: vec!["127.0.0.1:9042".into()],
            keyspace: "switchboard".into(),
            local_dc: None,
            replication: Replication::default(),
            consistency: "local_quorum".into(),
            username: None,
            password: None,
            inbox_ttl_secs: 30 * 24 * 3600,
            request_timeout_ms: 5_000,
            speculative_after_ms: 1_000,
            create_schema: true,
            inbox_sweep: false,
            max_batch_bytes: 256 * 1024,
        }
    }
}

/// Replication of the keyspace.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "strategy", rename_all = "snake_case", deny_unknown_fields)]
pub enum Replication {
    /// Production: a replication factor per datacenter, e.g.
    /// `{ strategy = "network_topology", datacenters = { eu = 3, us = 3 } }`.
    NetworkTopology { datacenters: BTreeMap<String, u32> },
    /// A single test node: `{ strategy = "simple", factor = 1 }`.
    Simple { factor: u32 },
}

impl Default for Replication {
    /// One replica in `datacenter1`, the name a lone node gets by default:
    /// enough for development, never for production.
    fn default() -> Self {
        Self::NetworkTopology {
            datacenters: BTreeMap::from([("datacenter1".to_owned(), 1)]),
        }
    }
}

fn invalid(what: String) -> StoreError {
    StoreError::Unavailable(format!("invalid scylla configuration: {what}"))
}

impl ScyllaConfig {
    /// The consistency level named by `consistency`.
    pub fn consistency_level(&self) -> StoreResult<Consistency> {
        parse_consistency(&self.consistency)
    }

    /// When a request is also sent to a second node; `None`: never.
    pub fn speculative_after(&self) -> Option<Duration> {
        (self.speculative_after_ms > 0).then(|| Duration::from_millis(self.speculative_after_ms))
    }

    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms.max(1))
    }

    /// Refuses what would make invalid or unsafe CQL: the keyspace and the
    /// datacenter names are spliced into DDL text, not bound.
    pub fn validate(&self) -> StoreResult<()> {
        if self.nodes.is_empty() {
            return Err(invalid("no nodes".into()));
        }
        if !is_identifier(&self.keyspace) {
            return Err(invalid(format!(
                "keyspace {:?} is not [a-z_][a-z0-9_]* of at most 48 characters",
                self.keyspace
            )));
        }
        self.consistency_level()?;
        match &self.replication {
            Replication::NetworkTopology { datacenters } => {
                if datacenters.is_empty() {
                    return Err(invalid("network_topology without datacenters".into()));
                }
                for (dc, rf) in datacenters {
                    if dc.is_empty() || dc.chars().any(|c| c == '\'' || c.is_control()) {
                        return Err(invalid(format!("datacenter name {dc:?}")));
                    }
                    if *rf == 0 {
                        return Err(invalid(format!("replication factor 0 for {dc:?}")));
                    }
                }
            }
            Replication::Simple { factor } => {
                if *factor == 0 {
                    return Err(invalid("replication factor 0".into()));
                }
            }
        }
        if self.inbox_ttl_secs == 0 {
            return Err(invalid("inbox_ttl_secs is 0".into()));
        }
        // Scylla refuses TTLs above 20 years.
        if self.inbox_ttl_secs > 20 * 365 * 24 * 3600 {
            return Err(invalid("inbox_ttl_secs above 20 years".into()));
        }
        if self.username.is_some() != self.password.is_some() {
            return Err(invalid("username and password go together".into()));
        }
        Ok(())
    }

    /// The replication map of `CREATE KEYSPACE`.
    pub(crate) fn replication_cql(&self) -> String {
        match &self.replication {
            Replication::NetworkTopology { datacenters } => {
                let dcs: Vec<String> = datacenters
                    .iter()
                    .map(|(dc, rf)| format!("'{dc}': {rf}"))
                    .collect();
                format!("{{'class': 'NetworkTopologyStrategy', {}}}", dcs.join(", "))
            }
            Replication::Simple { factor } => {
                format!("{{'class': 'SimpleStrategy', 'replication_factor': {factor}}}")
            }
        }
    }
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    name.len() <= 48
        && (first.is_ascii_lowercase() || first == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

pub(crate) fn parse_consistency(name: &str) -> StoreResult<Consistency> {
    Ok(match name.to_ascii_lowercase().as_str() {
        "local_quorum" => Consistency::LocalQuorum,
        "quorum" => Consistency::Quorum,
        "each_quorum" => Consistency::EachQuorum,
        "local_one" => Consistency::LocalOne,
        "one" => Consistency::One,
        "two" => Consistency::Two,
        "three" => Consistency::Three,
        "all" => Consistency::All,
        other => return Err(invalid(format!("unknown consistency {other:?}"))),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn defaults_are_valid_and_read_from_toml_like_json() {
        ScyllaConfig::default().validate().unwrap();
        let c: ScyllaConfig = serde_json::from_str(
            r#"{"nodes": ["10.0.0.1:9042"], "keyspace": "sb", "local_dc": "eu",
                "replication": {"strategy": "network_topology", "datacenters": {"eu": 3, "us": 3}},
                "consistency": "LOCAL_QUORUM", "inbox_ttl_secs": 60}"#,
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!(
            c.replication_cql(),
            "{'class': 'NetworkTopologyStrategy', 'eu': 3, 'us': 3}"
        );
        assert_eq!(c.consistency_level().unwrap(), Consistency::LocalQuorum);
        let s: ScyllaConfig =
            serde_json::from_str(r#"{"replication": {"strategy": "simple", "factor": 1}}"#)
                .unwrap();
        assert_eq!(
            s.replication_cql(),
            "{'class': 'SimpleStrategy', 'replication_factor': 1}"
        );
    }

    #[test]
    fn unsafe_names_are_refused() {
        for ks in ["", "Upper", "9lives", "a-b", "x; DROP", &"k".repeat(49)] {
            let c = ScyllaConfig {
                keyspace: ks.into(),
                ..ScyllaConfig::default()
            };
            assert!(c.validate().is_err(), "{ks:?}");
        }
        let c = ScyllaConfig {
            replication: Replication::NetworkTopology {
                datacenters: BTreeMap::from([("eu'}".to_owned(), 3)]),
            },
            ..ScyllaConfig::default()
        };
        assert!(c.validate().is_err());
        let c = ScyllaConfig {
            consistency: "serial".into(),
            ..ScyllaConfig::default()
        };
        assert!(c.validate().is_err());
    }
}
