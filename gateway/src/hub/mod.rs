//! Routes events from NATS to this gateway's connections.
//!
//! Events for the users connected here arrive on this gateway's own
//! subject, `sb.gw.<gateway>`, several to a NATS message: the routers
//! (writers, the presence notifier, other gateways) address them from the
//! session registry, which holds a key per user and gateway while the
//! user has a connection here (`switchboard_nats::sessions`). One
//! subscription serves every connection; the hub hands each event to the
//! connections of the users it names.
//!
//! A user's first connection here writes the user's key, and is told it
//! is live only once every router has applied that write (`join`), so
//! that nothing stored after `hello` is routed past it.
//!
//! Conversations that fan out on read publish their messages once, on
//! `sb.conv.<tenant>.<conversation>`; the hub listens there while any
//! member is connected here, and hands each message to those members'
//! connections. It starts listening for a user when their first connection
//! joins (for every such conversation they belong to) and when the writer
//! says so (`listen` events: they joined one, or one crossed the
//! threshold), and stops when they leave. There, frames that supersede
//! each other (a message's reaction counts) are held for a short window
//! and only the latest of each goes out (`Held`).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use axum::extract::ws::Utf8Bytes;
use futures::StreamExt;
use switchboard_nats::envelope::{Delivered, Event, SessionsEnd, decode_delivery};
use switchboard_nats::sessions::Sessions;
use switchboard_nats::subject::conversation_events;
use switchboard_plugin_host::fanout::{FanOut, FanOutPolicy};
use switchboard_plugin_host::{Hook, Plugins};
use switchboard_protocol::{ConversationId, DeviceId, ServerFrame, TenantId, UserId};
use switchboard_store::Store;
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::blocks::BlockSet;
use crate::outbox::{Outbound, Outbox, close_code};
use crate::presence::Presence;

mod conns;
mod on_read;

use conns::{Conn, Conns, deliver, deliver_frame, deliver_message, deliver_span};
use on_read::{Listeners, dispatch_conversation};

struct UserEntry {
    conns: Conns,
    /// Turns true once every router routes this user's events here; a
    /// second connection of the user waits for it as the first does.
    routed: tokio::sync::watch::Receiver<bool>,
    /// Conversations the hub listens to for this user.
    listening: HashSet<ConversationId>,
    /// This presence of the user here, from the first connection to the
    /// last (the first connection's id).
    stint: u64,
    /// Whom the user blocks, shared by their connections here (v1.2).
    blocks: Arc<BlockSet>,
}

struct ConversationEntry {
    listeners: Listeners,
    task: JoinHandle<()>,
}

type UserKey = (TenantId, UserId);
type ConversationKey = (TenantId, ConversationId);

struct Inner {
    client: async_nats::Client,
    /// Told when a user's first connection here joins and the last leaves.
    presence: Arc<Presence>,
    /// The session registry, to wait for the routers (`join`).
    sessions: Arc<Sessions>,
    /// The longest a first connection waits for the routers.
    sync_within: std::time::Duration,
    coalesce_window: std::time::Duration,
    /// To find a newly connected user's conversations that fan out on read.
    store: Arc<dyn Store>,
    fanout: FanOutPolicy,
    plugins: Arc<Plugins>,
    users: tokio::sync::Mutex<HashMap<UserKey, UserEntry>>,
    conversations: tokio::sync::Mutex<HashMap<ConversationKey, ConversationEntry>>,
    next_id: AtomicU64,
}

pub struct Hub {
    inner: Arc<Inner>,
    /// Takes this gateway's deliveries; ends with the hub.
    dispatcher: JoinHandle<()>,
}

impl Drop for Hub {
    fn drop(&mut self) {
        self.dispatcher.abort();
    }
}

/// A connection's place in the hub; give it back with [`Hub::leave`].
pub struct Registration {
    key: UserKey,
    id: u64,
}

#[derive(Debug, thiserror::Error)]
#[error("subscribing to the user's events failed: {0}")]
pub struct JoinError(#[source] switchboard_nats::Cause);

/// Where the hub takes its events and whom it tells of its users.
pub struct HubParts {
    pub client: async_nats::Client,
    /// The subscription to this gateway's subject, `sb.gw.<gateway>`.
    pub deliveries: async_nats::Subscriber,
    pub presence: Arc<Presence>,
    pub sessions: Arc<Sessions>,
    pub sync_within: std::time::Duration,
    /// How long frames that supersede each other (reaction counts) are
    /// held on a conversation that fans out on read (`Held`); zero: none.
    pub coalesce_window: std::time::Duration,
}

impl Hub {
    pub fn new(
        parts: HubParts,
        store: Arc<dyn Store>,
        fanout: FanOutPolicy,
        plugins: Arc<Plugins>,
    ) -> Self {
        let inner = Arc::new(Inner {
            client: parts.client,
            presence: parts.presence,
            sessions: parts.sessions,
            sync_within: parts.sync_within,
            coalesce_window: parts.coalesce_window,
            store,
            fanout,
            plugins,
            users: tokio::sync::Mutex::new(HashMap::new()),
            conversations: tokio::sync::Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
        });
        let dispatcher = tokio::spawn(dispatch(parts.deliveries, Arc::downgrade(&inner)));
        Self { inner, dispatcher }
    }

    pub(crate) fn sessions(&self) -> &Arc<Sessions> {
        &self.inner.sessions
    }

    pub(crate) fn presence(&self) -> &Presence {
        &self.inner.presence
    }

    /// Connections currently registered.
    pub async fn connection_count(&self) -> usize {
        let users = self.inner.users.lock().await;
        users
            .values()
            .map(|e| e.conns.lock().map(|c| c.len()).unwrap_or(0))
            .sum()
    }

    /// Starts delivering the user's events to `tx`. The subscriptions are
    /// in place when this returns, so nothing published after is missed.
    pub(crate) async fn join(
        &self,
        tenant: &TenantId,
        user: &UserId,
        device: &DeviceId,
        tx: Outbox,
        answering: Arc<crate::answering::Answering>,
    ) -> Result<Registration, JoinError> {
        let inner = &self.inner;
        let id = inner.next_id.fetch_add(1, Ordering::Relaxed);
        let key = (tenant.clone(), user.clone());
        let mut users = inner.users.lock().await;
        let blocks = users
            .get(&key)
            .map_or_else(Default::default, |e| e.blocks.clone());
        let conn = Conn {
            id,
            device: device.clone(),
            tx,
            answering,
            blocks: blocks.clone(),
        };
        if let Some(entry) = users.get(&key) {
            if let Ok(mut conns) = entry.conns.lock() {
                conns.push(conn);
            }
            let mut routed = entry.routed.clone();
            drop(users);
            let registration = Registration { key, id };
            // The first connection's join ends either way. When it failed,
            // its sender is gone: this one is not routed here either.
            if routed.wait_for(|&r| r).await.is_err() {
                self.leave(registration).await;
                return Err(JoinError(switchboard_nats::cause(
                    "the user's first connection to this gateway could not join; retry",
                )));
            }
            return Ok(registration);
        }
        let (routed, routed_rx) = tokio::sync::watch::channel(false);
        users.insert(
            key.clone(),
            UserEntry {
                conns: Arc::new(Mutex::new(vec![conn])),
                routed: routed_rx,
                listening: HashSet::new(),
                stint: id,
                blocks: blocks.clone(),
            },
        );
        drop(users);
        let registration = Registration { key, id };
        match self.first_join(tenant, user, id, &blocks).await {
            Ok(()) => {
                routed.send_replace(true);
                Ok(registration)
            }
            Err(e) => {
                self.leave(registration).await;
                Err(e)
            }
        }
    }

    /// Listens to the user's conversations that fan out on read, writes
    /// the user's key in the registry, and waits for every router to have
    /// applied it.
    async fn first_join(
        &self,
        tenant: &TenantId,
        user: &UserId,
        stint: u64,
        blocks: &BlockSet,
    ) -> Result<(), JoinError> {
        let inner = &self.inner;
        // Events told from now on win over the list read below, which is
        // read once they are routed here: no change is missed.
        blocks.start_load();
        match inner.store.memberships(tenant, user).await {
            Ok(memberships) => {
                for (conversation, kind, members) in memberships {
                    let mode = inner
                        .plugins
                        .fan_out_mode(tenant, kind, members, &inner.fanout);
                    if mode == FanOut::Read {
                        listen(inner, tenant, user, &conversation).await?;
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot list the user's conversations; large ones will not be live")
            }
        }
        // The subscriptions are registered with the server once the client
        // has written them; flush so the caller may rely on them.
        inner
            .client
            .flush()
            .await
            .map_err(|e| JoinError(switchboard_nats::cause(e)))?;
        if let Some(revision) = inner.presence.online(tenant, user, stint).await
            && let Err(e) = inner.sessions.sync(revision, inner.sync_within).await
        {
            // Live anyway: a router that did not answer is dead (it
            // publishes nothing) or far behind (its events for this user
            // are lost until it catches up; the client's next `seq` gap
            // pulls them).
            tracing::warn!(error = %e, "not every router confirmed this user's registration");
        }
        match inner.store.blocks(tenant, user).await {
            Ok(list) => blocks.finish_load(list.into_iter().map(|b| b.user_id)),
            Err(e) => {
                blocks.finish_load([]);
                tracing::warn!(error = %e, "cannot read the user's blocks; their live messages go unflagged")
            }
        }
        Ok(())
    }

    pub async fn leave(&self, registration: Registration) {
        let inner = &self.inner;
        let mut users = inner.users.lock().await;
        let empty = match users.get(&registration.key) {
            Some(entry) => match entry.conns.lock() {
                Ok(mut conns) => {
                    conns.retain(|c| c.id != registration.id);
                    conns.is_empty()
                }
                Err(_) => true,
            },
            None => false,
        };
        if empty && let Some(entry) = users.remove(&registration.key) {
            drop(users);
            let (tenant, user) = &registration.key;
            for conversation in &entry.listening {
                unlisten(inner, tenant, user, conversation).await;
            }
            inner.presence.offline(tenant, user, entry.stint).await;
        }
    }
}

impl Hub {
    /// Follows the tenants' plugin changes: when a tenant's fan-out plugin
    /// changes, its users connected here listen to the conversations that
    /// now fan out on read, and stop listening to the others.
    pub fn follow_fan_out_changes(&self) {
        let inner = Arc::downgrade(&self.inner);
        let mut changes = self.inner.plugins.changes();
        tokio::spawn(async move {
            loop {
                let tenants: Vec<TenantId> = match changes.recv().await {
                    Ok((tenant, Hook::FanOut)) => vec![tenant],
                    Ok(_) => continue,
                    // Missed some: re-decide for every tenant connected here.
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        let Some(inner) = inner.upgrade() else { return };
                        let users = inner.users.lock().await;
                        let tenants: HashSet<TenantId> =
                            users.keys().map(|(t, _)| t.clone()).collect();
                        tenants.into_iter().collect()
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                };
                let Some(inner) = inner.upgrade() else { return };
                for tenant in tenants {
                    Box::pin(refresh_fan_out(&inner, &tenant)).await;
                }
            }
        });
    }
}

/// Re-decides, for every user of `tenant` connected here, which of their
/// conversations to listen to.
async fn refresh_fan_out(inner: &Arc<Inner>, tenant: &TenantId) {
    let users: Vec<(UserId, HashSet<ConversationId>)> = inner
        .users
        .lock()
        .await
        .iter()
        .filter(|((t, _), _)| t == tenant)
        .map(|((_, u), entry)| (u.clone(), entry.listening.clone()))
        .collect();
    for (user, listening) in users {
        let memberships = match inner.store.memberships(tenant, &user).await {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(error = %e, "cannot list the user's conversations after a fan-out change");
                continue;
            }
        };
        for (conversation, kind, members) in memberships {
            let read = inner
                .plugins
                .fan_out_mode(tenant, kind, members, &inner.fanout)
                == FanOut::Read;
            match (read, listening.contains(&conversation)) {
                (true, false) => {
                    if let Err(e) = listen(inner, tenant, &user, &conversation).await {
                        tracing::warn!(error = %e, "cannot listen to a conversation");
                    }
                }
                (false, true) => unlisten(inner, tenant, &user, &conversation).await,
                _ => {}
            }
        }
    }
    if let Err(e) = inner.client.flush().await {
        tracing::warn!(error = %e, "flushing subscriptions after a fan-out change");
    }
}

/// Listens to a conversation's subject for a user connected here.
async fn listen(
    inner: &Arc<Inner>,
    tenant: &TenantId,
    user: &UserId,
    conversation: &ConversationId,
) -> Result<(), JoinError> {
    let conns = {
        let mut users = inner.users.lock().await;
        let Some(entry) = users.get_mut(&(tenant.clone(), user.clone())) else {
            return Ok(()); // gone meanwhile
        };
        if !entry.listening.insert(conversation.clone()) {
            return Ok(());
        }
        entry.conns.clone()
    };
    let mut conversations = inner.conversations.lock().await;
    let key = (tenant.clone(), conversation.clone());
    if let Some(entry) = conversations.get(&key) {
        if let Ok(mut listeners) = entry.listeners.lock() {
            listeners.insert(user.clone(), conns);
        }
        return Ok(());
    }
    let subscriber = inner
        .client
        .subscribe(conversation_events(tenant, conversation))
        .await
        .map_err(|e| JoinError(switchboard_nats::cause(e)))?;
    let listeners: Listeners = Arc::new(Mutex::new(HashMap::from([(user.clone(), conns)])));
    let task = tokio::spawn(dispatch_conversation(
        subscriber,
        listeners.clone(),
        inner.coalesce_window,
    ));
    conversations.insert(key, ConversationEntry { listeners, task });
    Ok(())
}

async fn unlisten(
    inner: &Arc<Inner>,
    tenant: &TenantId,
    user: &UserId,
    conversation: &ConversationId,
) {
    if let Some(entry) = inner
        .users
        .lock()
        .await
        .get_mut(&(tenant.clone(), user.clone()))
    {
        entry.listening.remove(conversation);
    }
    let mut conversations = inner.conversations.lock().await;
    let key = (tenant.clone(), conversation.clone());
    let empty = match conversations.get(&key) {
        Some(entry) => match entry.listeners.lock() {
            Ok(mut listeners) => {
                listeners.remove(user);
                listeners.is_empty()
            }
            Err(_) => true,
        },
        None => false,
    };
    if empty && let Some(entry) = conversations.remove(&key) {
        entry.task.abort();
    }
}

/// An event of a delivery, with the connections here of the users it is for.
struct Handover {
    tenant: TenantId,
    targets: Vec<(UserId, Vec<Conn>)>,
    event: Event,
    traceparent: Option<String>,
}

/// Takes this gateway's deliveries and hands each event to the
/// connections of the users it names.
async fn dispatch(mut subscriber: async_nats::Subscriber, hub: Weak<Inner>) {
    while let Some(msg) = subscriber.next().await {
        let Some(inner) = hub.upgrade() else {
            return;
        };
        // Each event with its users' connections here, looked up at once.
        let mut events: Vec<Handover> = Vec::new();
        {
            let users = inner.users.lock().await;
            for delivered in decode_delivery(&msg.payload) {
                let Delivered {
                    mut tenant,
                    to,
                    event,
                    traceparent,
                } = match delivered {
                    Ok(d) => d,
                    Err(e) => {
                        tracing::warn!(error = %e, "dropping an undecodable event");
                        continue;
                    }
                };
                let mut targets = Vec::with_capacity(to.len());
                for user in to {
                    let key = (tenant, user);
                    if let Some(entry) = users.get(&key)
                        && let Ok(conns) = entry.conns.lock()
                    {
                        targets.push((key.1, conns.clone()));
                    }
                    tenant = key.0;
                }
                if !targets.is_empty() {
                    events.push(Handover {
                        tenant,
                        targets,
                        event,
                        traceparent,
                    });
                }
            }
        }
        for Handover {
            tenant,
            targets,
            event,
            traceparent,
        } in events
        {
            let span = deliver_span(traceparent.as_deref(), targets.len());
            async {
                for (user, conns) in targets {
                    Box::pin(hand_over(&inner, &tenant, &user, conns, &event)).await;
                }
            }
            .instrument(span)
            .await;
        }
    }
}

/// Hands one event to one user's connections here. Borrowed: an event
/// for several users here is not copied per user.
async fn hand_over(
    inner: &Arc<Inner>,
    tenant: &TenantId,
    user: &UserId,
    conns: Vec<Conn>,
    event: &Event,
) {
    match event {
        Event::Message {
            frame,
            origin_user,
            origin_device,
        } => {
            let from_this_user = *origin_user == user.as_str();
            let targets: Vec<(bool, Conn)> =
                conns.into_iter().map(|c| (from_this_user, c)).collect();
            deliver_message(&targets, frame.clone(), origin_user, origin_device);
        }
        Event::Frame(frame) => deliver_frame(conns.iter(), frame.clone()),
        Event::Blocks {
            frame,
            user_id,
            blocked,
        } => {
            if let Some(conn) = conns.first() {
                conn.blocks.set(user_id, *blocked);
            }
            deliver_frame(conns.iter(), frame.clone());
        }
        Event::Ack {
            frame,
            device,
            client_msg_id,
        } => {
            let Ok(text) = Utf8Bytes::try_from(frame.clone()) else {
                return;
            };
            for conn in conns.iter().filter(|c| c.device.as_str() == device) {
                conn.answering
                    .writer_answered(client_msg_id, Outbound::Frame(text.clone()));
            }
        }
        Event::EndSessions(why) => {
            let (code, reason) = match why {
                SessionsEnd::Erased => (close_code::ERASED, "the user was erased"),
            };
            tracing::info!(%tenant, %user, ?why, connections = conns.len(), "ending the user's sessions");
            for conn in &conns {
                conn.tx.close_now(code, reason);
            }
        }
        Event::Listen {
            conversation_id,
            listen: start,
        } => {
            if *start {
                if let Err(e) = listen(inner, tenant, user, conversation_id).await {
                    tracing::warn!(error = %e, "cannot listen to a conversation");
                }
            } else {
                unlisten(inner, tenant, user, conversation_id).await;
            }
        }
        Event::Rejected(r) => {
            let mut frame = ServerFrame::error_answering(
                r.code,
                r.message.clone(),
                Some(&r.request_type),
                r.client_msg_id.as_ref().map(|id| id.as_str()),
                Some(r.conversation_id.as_str()),
            );
            if let Some(id) = r.message_id {
                frame = frame.about_message(id);
            }
            frame = frame.retry_after(r.retry_after_ms);
            let text = Utf8Bytes::from(frame.to_json());
            for conn in conns.iter().filter(|c| c.device == r.device) {
                let out = Outbound::Frame(text.clone());
                match &r.client_msg_id {
                    // A send's refusal is its answer.
                    Some(id) => conn.answering.writer_answered(id, out),
                    None => deliver(conn, out),
                }
            }
        }
    }
}
