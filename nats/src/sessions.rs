//! The session registry: events go to the gateways that hold their users'
//! connections (F5), several to a NATS message.
//!
//! `sb_presence` is the registry: a key per user and gateway while the
//! gateway holds a connection of the user ([`RoutingTable`]). A process
//! that publishes events (a writer, the presence notifier, a gateway's
//! receipts and typing) is a *router*: it looks up each recipient's
//! gateways in its own view of the registry and publishes, per gateway,
//! the events it has for that gateway's users as one delivery on
//! `sb.gw.<gateway>` ([`Deliveries`]). A user with no key is offline and
//! gets no event: what they missed waits in their inbox (I4).
//!
//! The race this must close: a connection is told it is live (`hello`)
//! once its user's key is written, but a router that has not yet applied
//! that write would route a message stored right after to nowhere, and
//! the client has already pulled its backlog. So every router keeps a key
//! `routers.<id>` in the registry and answers `sb.sessions.sync`: "tell me
//! when you have applied revision R". A gateway writes the user's key
//! (revision R), asks, and sends `hello` once every router its view knows
//! has answered ([`Sessions::sync`]). A router that starts later loads the
//! registry before it routes anything, so it cannot miss R either. A
//! router that died keeps its key until the bucket's TTL expires it; the
//! wait for it ends at the gateway's timeout, and the gateway then goes on
//! (a dead router publishes nothing).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::kv;
use bytes::Bytes;
use futures::StreamExt;
use switchboard_protocol::{TenantId, Timestamp, UserId};

use crate::admission::{Admission, AdmissionLimits};
use crate::envelope::{HEADER_EVENTS, push_delivery};
use crate::records::presence::{RoutingTable, router_key};
use crate::subject::{SESSIONS_SYNC, gateway_events};
use crate::{BackboneError, Cause, cause};

/// A delivery is published once it holds this many bytes, well under the
/// NATS server's default `max_payload` (1 MiB). An event larger than this
/// travels in a delivery of its own.
pub const DELIVERY_MAX_BYTES: usize = 256 * 1024;

/// How long a sync waits for a router that let an earlier one down, once
/// every other router has answered (`Sessions::sync`).
pub const SUSPECT_GRACE: Duration = Duration::from_millis(100);

/// How long a router waits to apply a revision it was asked about before
/// it gives up answering (the asking gateway has stopped waiting by then).
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

/// How long a starting router waits for its view of the registry to load
/// before it routes anyway (with a warning): NATS is then unwell, and
/// the process could not do much else.
const LOAD_WITHIN: Duration = Duration::from_secs(30);

/// This process's place in the session registry, and its view of it.
pub struct Sessions {
    client: async_nats::Client,
    bucket: kv::Store,
    view: Arc<RoutingTable>,
    /// Unique per process that routes (a gateway's or worker's id).
    router: String,
    /// Routers that let a sync down (`sync`).
    suspects: std::sync::Mutex<HashSet<String>>,
}

/// Why a gateway could not confirm that every router routes by a
/// revision of the registry.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("this process has not applied the registry's revision {revision} within {within:?}")]
    NotApplied { revision: u64, within: Duration },
    #[error(
        "{} routers did not confirm the registry's revision {revision} within {within:?}: {}",
        .missing.len(), .missing.join(", ")
    )]
    Unconfirmed {
        revision: u64,
        within: Duration,
        missing: Vec<String>,
    },
    #[error("asking the routers failed: {0}")]
    Nats(#[source] Cause),
}

impl Sessions {
    /// Joins the routers: answers sync requests (at most `limits` waiting
    /// at once), registers `router` in the registry and keeps its key
    /// alive, and returns once the view has loaded the registry (so that
    /// nothing is routed from a partial view).
    pub async fn start(
        client: async_nats::Client,
        bucket: kv::Store,
        router: String,
        limits: AdmissionLimits,
    ) -> Result<Arc<Self>, BackboneError> {
        let ttl = bucket
            .status()
            .await
            .map_err(|e| BackboneError::nats("reading the session registry's TTL", e))?
            .max_age();
        // Listening before the key is written: whoever sees the key may ask.
        let requests = client
            .subscribe(SESSIONS_SYNC)
            .await
            .map_err(|e| BackboneError::nats(format!("subscribing to {SESSIONS_SYNC}"), e))?;
        let sessions = Arc::new(Self {
            view: RoutingTable::watch(bucket.clone()),
            client,
            bucket,
            router,
            suspects: std::sync::Mutex::new(HashSet::new()),
        });
        let registered = sessions.register().await?;
        if !sessions.view.wait_applied(registered, LOAD_WITHIN).await {
            tracing::warn!(
                revision = registered,
                "the session registry did not load in time; routing from what has loaded"
            );
        }
        tokio::spawn(answer_syncs(
            requests,
            Arc::downgrade(&sessions),
            Admission::new(limits),
        ));
        let every = if ttl.is_zero() {
            Duration::from_secs(10)
        } else {
            (ttl / 3).max(Duration::from_millis(100))
        };
        tokio::spawn(refresh(Arc::downgrade(&sessions), every));
        Ok(sessions)
    }

    async fn register(&self) -> Result<u64, BackboneError> {
        let now = Timestamp::now().unix_ms().to_string();
        self.bucket
            .put(router_key(&self.router), now.into())
            .await
            .map_err(|e| BackboneError::nats("registering as a router of events", e))
    }

    /// Leaves the routers (graceful shutdown).
    pub async fn withdraw(&self) {
        if let Err(e) = self.bucket.delete(router_key(&self.router)).await {
            tracing::warn!(error = %e, "withdrawing from the routers failed; the key expires by itself");
        }
    }

    pub fn routing_table(&self) -> &Arc<RoutingTable> {
        &self.view
    }

    /// The registry bucket.
    pub fn bucket(&self) -> &kv::Store {
        &self.bucket
    }

    /// Events to publish together.
    pub fn deliveries(&self) -> Deliveries<'_> {
        Deliveries {
            sessions: self,
            pending: HashMap::new(),
            full: Vec::new(),
        }
    }

    /// Publishes one event to the gateways of `users`.
    pub async fn publish<'u>(
        &self,
        tenant: &TenantId,
        users: impl IntoIterator<Item = &'u UserId>,
        event: &(HeaderMap, Bytes),
    ) -> Result<(), async_nats::PublishError> {
        let mut deliveries = self.deliveries();
        deliveries.add(tenant, users, event);
        deliveries.publish().await
    }

    /// Returns once every router has applied the registry's `revision`,
    /// or fails after `within`.
    ///
    /// A router that let a sync down is a suspect: most likely dead, its
    /// key living on until the TTL. Later syncs do not wait `within` for
    /// it again, only [`SUSPECT_GRACE`] once every other router has
    /// answered; a suspect that answers is one no more. Without this,
    /// every first connection would wait `within` for as long as a dead
    /// router's key lives.
    pub async fn sync(&self, revision: u64, within: Duration) -> Result<(), SyncError> {
        let deadline = tokio::time::Instant::now() + within;
        if !self.view.wait_applied(revision, within).await {
            return Err(SyncError::NotApplied { revision, within });
        }
        let routers: HashSet<String> = self
            .view
            .routers()
            .into_iter()
            .filter(|r| *r != self.router)
            .collect();
        if routers.is_empty() {
            return Ok(());
        }
        let (mut suspects, mut waiting): (HashSet<String>, HashSet<String>) = {
            let mut known = self
                .suspects
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            // A suspect whose key has expired is gone for good.
            known.retain(|r| routers.contains(r));
            routers.into_iter().partition(|r| known.contains(r))
        };
        let inbox = self.client.new_inbox();
        let mut answers = self
            .client
            .subscribe(inbox.clone())
            .await
            .map_err(|e| SyncError::Nats(cause(e)))?;
        self.client
            .publish_with_reply(SESSIONS_SYNC, inbox, revision.to_string().into())
            .await
            .map_err(|e| SyncError::Nats(cause(e)))?;
        // An answer crosses its router off, and clears it of suspicion.
        let take = |answer: &async_nats::Message,
                    waiting: &mut HashSet<String>,
                    suspects: &mut HashSet<String>| {
            if let Ok(router) = std::str::from_utf8(&answer.payload) {
                waiting.remove(router);
                if suspects.remove(router)
                    && let Ok(mut known) = self.suspects.lock()
                {
                    known.remove(router);
                }
            }
        };
        // Only suspects to hear from: nobody else to wait for first.
        let nobody_else = waiting.is_empty();
        let confirmations = async {
            while let Some(answer) = answers.next().await {
                take(&answer, &mut waiting, &mut suspects);
                if waiting.is_empty() {
                    return true;
                }
            }
            false
        };
        let all_others = nobody_else
            || tokio::time::timeout_at(deadline, confirmations)
                .await
                .unwrap_or(false);
        if all_others && !suspects.is_empty() {
            let grace = async {
                while let Some(answer) = answers.next().await {
                    take(&answer, &mut waiting, &mut suspects);
                    if suspects.is_empty() {
                        return;
                    }
                }
            };
            let _ = tokio::time::timeout(SUSPECT_GRACE, grace).await;
        }
        if waiting.is_empty() {
            return Ok(());
        }
        if let Ok(mut known) = self.suspects.lock() {
            known.extend(waiting.iter().cloned());
        }
        Err(SyncError::Unconfirmed {
            revision,
            within,
            missing: waiting.into_iter().collect(),
        })
    }
}

/// Answers each sync request once this process's view has applied the
/// revision asked about. A request for a revision not yet applied waits
/// in a task of its own, and only `admission` allows so many: past it the
/// request is dropped unanswered (its asker stops waiting at its own
/// timeout), so a flood of requests for revisions that never come costs a
/// bounded number of waiting tasks, not one per request.
async fn answer_syncs(
    mut requests: async_nats::Subscriber,
    sessions: Weak<Sessions>,
    admission: Admission,
) {
    while let Some(request) = requests.next().await {
        let Some(s) = sessions.upgrade() else {
            return;
        };
        let revision = std::str::from_utf8(&request.payload)
            .ok()
            .and_then(|r| r.parse::<u64>().ok());
        let (Some(reply), Some(revision)) = (request.reply, revision) else {
            continue;
        };
        if s.view.applied() >= revision {
            if let Err(e) = s.client.publish(reply, s.router.clone().into()).await {
                tracing::warn!(error = %e, "answering a registry sync failed");
            }
            continue;
        }
        let admitted = match admission.admit(&reply) {
            Ok(admitted) => admitted,
            Err(refused) => {
                tracing::debug!(%refused, "a registry sync was dropped");
                continue;
            }
        };
        tokio::spawn(async move {
            let _admitted = admitted;
            if s.view.wait_applied(revision, ANSWER_WITHIN).await
                && let Err(e) = s.client.publish(reply, s.router.clone().into()).await
            {
                tracing::warn!(error = %e, "answering a registry sync failed");
            }
        });
    }
}

/// Keeps the router's key alive.
async fn refresh(sessions: Weak<Sessions>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(s) = sessions.upgrade() else {
            return;
        };
        if let Err(e) = s.register().await {
            tracing::warn!(error = %e, "refreshing the router's key failed");
        }
    }
}

/// One gateway's delivery being filled.
#[derive(Default)]
struct Delivery {
    payload: Vec<u8>,
    events: usize,
}

/// Events on their way to gateways, gathered per gateway.
pub struct Deliveries<'a> {
    sessions: &'a Sessions,
    /// Per gateway, the delivery being filled.
    pending: HashMap<Arc<str>, Delivery>,
    /// Deliveries that filled up, in the order they did.
    full: Vec<(Arc<str>, Delivery)>,
}

impl Deliveries<'_> {
    /// Adds an event for `users` of `tenant`: once to each gateway that
    /// holds any of them, addressed to those it holds.
    pub fn add<'u>(
        &mut self,
        tenant: &TenantId,
        users: impl IntoIterator<Item = &'u UserId>,
        event: &(HeaderMap, Bytes),
    ) {
        for (gateway, to) in self.sessions.view.gateways_of(tenant, users) {
            let delivery = self.pending.entry(gateway.clone()).or_default();
            if let Err(e) = push_delivery(&mut delivery.payload, tenant, to, event) {
                tracing::warn!(error = %e, "an event could not be addressed");
                continue;
            }
            delivery.events += 1;
            if delivery.payload.len() >= DELIVERY_MAX_BYTES
                && let Some(full) = self.pending.remove(&gateway)
            {
                self.full.push((gateway, full));
            }
        }
    }

    /// Whether no event was addressed to any gateway.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.full.is_empty()
    }

    /// Publishes every delivery (core NATS, at most once). Tries each; the
    /// error is the last failure.
    pub async fn publish(self) -> Result<(), async_nats::PublishError> {
        let mut result = Ok(());
        let client = &self.sessions.client;
        for (gateway, delivery) in self.full.into_iter().chain(self.pending) {
            let mut headers = HeaderMap::new();
            headers.insert(HEADER_EVENTS, delivery.events.to_string().as_str());
            if let Err(e) = client
                .publish_with_headers(gateway_events(&gateway), headers, delivery.payload.into())
                .await
            {
                result = Err(e);
            }
        }
        result
    }
}
