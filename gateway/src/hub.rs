//! Routes events from NATS to this gateway's connections.
//!
//! Each user with at least one connection here has one NATS subscription
//! on `sb.user.<tenant>.<user>`: NATS interest is the routing table (F5),
//! so a message reaches exactly the gateways where its recipients are
//! connected. Connections of one user share the subscription; the last one
//! to leave drops it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::ws::Utf8Bytes;
use futures::StreamExt;
use serde::Deserialize;
use switchboard_backbone::envelope::{Event, decode_event};
use switchboard_backbone::subject::user_events;
use switchboard_protocol::{DeviceId, ServerFrame, TenantId, UserId};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::presence::Presence;

/// What a connection's writer receives.
#[derive(Debug)]
pub enum Outbound {
    Frame(Utf8Bytes),
    /// A WebSocket ping, to notice dead peers.
    Ping,
    /// Close the connection: it cannot keep up.
    Close(&'static str),
}

/// How the hub reaches one connection.
#[derive(Clone)]
struct Conn {
    id: u64,
    device: DeviceId,
    tx: mpsc::Sender<Outbound>,
    /// Set once the connection is being closed for not reading.
    closing: Arc<AtomicBool>,
}

type Conns = Arc<Mutex<Vec<Conn>>>;

struct UserEntry {
    conns: Conns,
    task: JoinHandle<()>,
}

pub struct Hub {
    client: async_nats::Client,
    /// Told when a user's first connection here joins and the last leaves.
    presence: Arc<Presence>,
    users: tokio::sync::Mutex<HashMap<(TenantId, UserId), UserEntry>>,
    next_id: AtomicU64,
}

/// A connection's place in the hub; give it back with [`Hub::leave`].
pub struct Registration {
    key: (TenantId, UserId),
    id: u64,
}

#[derive(Debug, thiserror::Error)]
#[error("subscribing to the user's events failed: {0}")]
pub struct JoinError(String);

impl Hub {
    pub(crate) fn new(client: async_nats::Client, presence: Arc<Presence>) -> Self {
        Self {
            client,
            presence,
            users: tokio::sync::Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
        }
    }

    pub(crate) fn presence(&self) -> &Presence {
        &self.presence
    }

    /// Connections currently registered.
    pub async fn connection_count(&self) -> usize {
        let users = self.users.lock().await;
        users
            .values()
            .map(|e| e.conns.lock().map(|c| c.len()).unwrap_or(0))
            .sum()
    }

    /// Starts delivering the user's events to `tx`. The subscription is
    /// in place when this returns, so nothing published after is missed.
    pub async fn join(
        &self,
        tenant: &TenantId,
        user: &UserId,
        device: &DeviceId,
        tx: mpsc::Sender<Outbound>,
    ) -> Result<Registration, JoinError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let conn = Conn {
            id,
            device: device.clone(),
            tx,
            closing: Arc::new(AtomicBool::new(false)),
        };
        let key = (tenant.clone(), user.clone());
        let mut users = self.users.lock().await;
        if let Some(entry) = users.get(&key) {
            if let Ok(mut conns) = entry.conns.lock() {
                conns.push(conn);
            }
        } else {
            let subject = user_events(tenant, user);
            let subscriber = self
                .client
                .subscribe(subject)
                .await
                .map_err(|e| JoinError(e.to_string()))?;
            // The subscription is registered with the server once the
            // client has written it; flush so the caller may rely on it.
            self.client
                .flush()
                .await
                .map_err(|e| JoinError(e.to_string()))?;
            let conns: Conns = Arc::new(Mutex::new(vec![conn]));
            let task = tokio::spawn(dispatch(subscriber, user.clone(), conns.clone()));
            users.insert(key.clone(), UserEntry { conns, task });
            self.presence.online(tenant, user).await;
        }
        Ok(Registration { key, id })
    }

    pub async fn leave(&self, registration: Registration) {
        let mut users = self.users.lock().await;
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
            // Dropping the subscriber with the task unsubscribes.
            entry.task.abort();
            let (tenant, user) = &registration.key;
            self.presence.offline(tenant, user).await;
        }
    }
}

/// The fields of a `message` frame an `ack` needs.
#[derive(Deserialize)]
struct AckFields<'a> {
    #[serde(borrow)]
    message: AckMessage<'a>,
}

#[derive(Deserialize)]
struct AckMessage<'a> {
    message_id: &'a str,
    conversation_id: &'a str,
    seq: u64,
    #[serde(borrow)]
    client_msg_id: std::borrow::Cow<'a, str>,
}

/// The `ack` frame for a stored message, from its `message` frame.
fn ack_from_message_frame(frame: &[u8]) -> Option<Utf8Bytes> {
    let fields: AckFields<'_> = serde_json::from_slice(frame).ok()?;
    let m = fields.message;
    let quoted = |s: &str| serde_json::to_string(s).ok();
    let ack = format!(
        r#"{{"type":"ack","client_msg_id":{},"conversation_id":{},"message_id":{},"seq":{},"status":"sent"}}"#,
        quoted(&m.client_msg_id)?,
        quoted(m.conversation_id)?,
        quoted(m.message_id)?,
        m.seq
    );
    Some(Utf8Bytes::from(ack))
}

fn deliver(conn: &Conn, out: Outbound) {
    if let Err(mpsc::error::TrySendError::Full(_)) = conn.tx.try_send(out) {
        // The client reads too slowly. Closing it is safe: it reconnects
        // and replays what it missed with `pull_backlog`. Once is enough.
        if conn.closing.swap(true, Ordering::Relaxed) {
            return;
        }
        tracing::warn!(
            conn = conn.id,
            "outbound queue full; closing the connection"
        );
        let tx = conn.tx.clone();
        tokio::spawn(async move {
            let _ = tx.send(Outbound::Close("client too slow")).await;
        });
    }
}

async fn dispatch(mut subscriber: async_nats::Subscriber, user: UserId, conns: Conns) {
    while let Some(msg) = subscriber.next().await {
        let event = match decode_event(&msg) {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(error = %e, "dropping an undecodable event");
                continue;
            }
        };
        let targets: Vec<Conn> = match conns.lock() {
            Ok(c) => c.clone(),
            Err(_) => return,
        };
        match event {
            Event::Message {
                frame,
                origin_user,
                origin_device,
            } => {
                // Only the sending device of the sending user gets the
                // ack; the same device id under another user is another device.
                let from_this_user = origin_user == user.as_str();
                let Ok(text) = Utf8Bytes::try_from(frame) else {
                    tracing::warn!("dropping a message event that is not UTF-8");
                    continue;
                };
                let mut ack = None;
                for conn in &targets {
                    if from_this_user && conn.device.as_str() == origin_device {
                        let ack =
                            ack.get_or_insert_with(|| ack_from_message_frame(text.as_bytes()));
                        if let Some(frame) = ack {
                            deliver(conn, Outbound::Frame(frame.clone()));
                        }
                    } else {
                        deliver(conn, Outbound::Frame(text.clone()));
                    }
                }
            }
            Event::Frame(frame) => {
                let Ok(text) = Utf8Bytes::try_from(frame) else {
                    continue;
                };
                for conn in &targets {
                    deliver(conn, Outbound::Frame(text.clone()));
                }
            }
            Event::Rejected(r) => {
                let frame = ServerFrame::Error {
                    code: r.code,
                    message: r.message,
                    request_type: Some(r.request_type),
                    client_msg_id: r.client_msg_id.map(|id| id.as_str().to_owned()),
                    conversation_id: Some(r.conversation_id.as_str().to_owned()),
                };
                let text = Utf8Bytes::from(frame.to_json());
                for conn in targets.iter().filter(|c| c.device == r.device) {
                    deliver(conn, Outbound::Frame(text.clone()));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_the_ack_from_the_message_frame() {
        let frame = br#"{"type":"message","message":{"message_id":"42","conversation_id":"c","seq":7,"sender_id":"a","sender_device":"d","client_msg_id":"q\"1","content":{"kind":"text","text":"x"},"created_at":"2026-01-01T00:00:00.000Z","edited_at":null,"deleted_at":null}}"#;
        let ack = ack_from_message_frame(frame).unwrap();
        assert!(ack.starts_with(r#"{"type":"ack","#), "{}", ack.as_str());
        let v: serde_json::Value = serde_json::from_str(&ack).unwrap();
        assert_eq!(v["type"], "ack");
        assert_eq!(v["client_msg_id"], "q\"1");
        assert_eq!(v["message_id"], "42");
        assert_eq!(v["seq"], 7);
        assert_eq!(v["status"], "sent");
    }
}
