//! A client that behaves like a well-written app: it resends a message
//! with the same `client_msg_id` until it gets an `ack`, reconnecting
//! (to the next gateway) whenever its connection fails. Chaos tests use it
//! to tell what the platform acked from what it merely received.

use std::time::Duration;
use switchboard_protocol::SendAck;

use switchboard_client::WsClient;
use switchboard_protocol::{
    ClientFrame, ClientMsgId, Content, ConversationId, ErrorCode, MessageId, ServerFrame,
};
use tokio::time::Instant;

pub struct Session {
    urls: Vec<String>,
    next_url: usize,
    token: String,
    ws: Option<WsClient>,
    /// How long to wait for an ack before resending.
    pub resend_after: Duration,
}

/// What the server acked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acked {
    pub message_id: MessageId,
    pub seq: u64,
}

impl Session {
    pub fn new(urls: Vec<String>, token: String) -> Self {
        Self {
            urls,
            next_url: 0,
            token,
            ws: None,
            resend_after: Duration::from_secs(3),
        }
    }

    async fn connection(&mut self) -> &mut WsClient {
        loop {
            if self.ws.is_some() {
                break;
            }
            let url = &self.urls[self.next_url % self.urls.len()];
            match crate::connect_ws(url, &self.token).await {
                Ok(ws) => self.ws = Some(ws),
                Err(_) => {
                    self.next_url += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        self.ws.as_mut().expect("connected above")
    }

    fn drop_connection(&mut self) {
        self.ws = None;
        self.next_url += 1;
    }

    /// Sends until acked or `within` passes. Panics on a refusal that a
    /// retry cannot fix (say, `not_a_member`).
    pub async fn send(
        &mut self,
        conversation: &str,
        client_msg_id: &str,
        text: &str,
        within: Duration,
    ) -> Option<Acked> {
        let deadline = Instant::now() + within;
        let frame = ClientFrame::send_message(
            ClientMsgId::new(client_msg_id).unwrap(),
            ConversationId::new(conversation).unwrap(),
            Content::Text {
                text: text.to_owned(),
            },
        );
        while Instant::now() < deadline {
            let resend_after = self.resend_after;
            let ws = self.connection().await;
            if ws.send(&frame).await.is_err() {
                self.drop_connection();
                continue;
            }
            let wait_until = (Instant::now() + resend_after).min(deadline);
            loop {
                let left = wait_until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break; // resend
                }
                let ws = self.ws.as_mut().expect("connected");
                match ws.next_frame_within(left).await {
                    Ok(ServerFrame::Ack(SendAck {
                        client_msg_id: id,
                        message_id: Some(message_id),
                        seq: Some(seq),
                        ..
                    })) if id.as_str() == client_msg_id => {
                        return Some(Acked { message_id, seq });
                    }
                    Ok(ServerFrame::Error {
                        code,
                        client_msg_id: Some(id),
                        message,
                        ..
                    }) if id == client_msg_id => {
                        assert!(
                            matches!(code, ErrorCode::Unavailable | ErrorCode::RateLimited),
                            "send {client_msg_id} refused for good: {code} {message}"
                        );
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        break; // resend
                    }
                    Ok(_) => continue,
                    Err(switchboard_client::WsError::Timeout(_)) => break,
                    Err(_) => {
                        self.drop_connection();
                        break;
                    }
                }
            }
        }
        None
    }
}
