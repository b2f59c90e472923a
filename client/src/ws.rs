//! A WebSocket connection speaking docs/protocol.md's frames.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use switchboard_protocol::{ClientFrame, ServerFrame};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream, connect_async_with_config};

#[derive(Debug, thiserror::Error)]
pub enum WsError {
    #[error("websocket: {0}")]
    Socket(#[from] Box<tokio_tungstenite::tungstenite::Error>),
    #[error("server refused the connection with HTTP {status}: {body}")]
    Refused { status: u16, body: String },
    #[error("connection closed")]
    Closed,
    /// The server closed with a code: 1012 (the gateway restarts:
    /// reconnect), 1013 (too slow a reader), 1009 (frame too large).
    #[error("connection closed by the server ({code}: {reason})")]
    ClosedBy { code: u16, reason: String },
    #[error("no frame within {0:?}")]
    Timeout(Duration),
    /// A frame that does not encode (`text` empty) or parse; `error` is
    /// serde's, kept as the source.
    #[error("frame does not parse ({error}): {text}")]
    BadFrame {
        #[source]
        error: serde_json::Error,
        text: String,
    },
}

fn closed(frame: Option<tokio_tungstenite::tungstenite::protocol::CloseFrame>) -> WsError {
    match frame {
        Some(f) => WsError::ClosedBy {
            code: u16::from(f.code),
            reason: f.reason.as_str().to_owned(),
        },
        None => WsError::Closed,
    }
}

/// Looks at every text frame the server sends before it is returned
/// (the integration tests check each against the frames' JSON Schema).
pub type FrameCheck = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

pub struct WsClient {
    socket: WebSocketStream<MaybeTlsStream<TcpStream>>,
    check: Option<FrameCheck>,
}

impl WsClient {
    /// Connects to `base` (`ws://host:port`) with a token in the query.
    pub async fn connect(base: &str, token: &str) -> Result<Self, WsError> {
        let url = format!("{}/v1/ws?token={token}", base.trim_end_matches('/'));
        let request = url
            .into_client_request()
            .map_err(|e| WsError::Socket(Box::new(e)))?;
        // No Nagle delay: frames are small and latency matters.
        match connect_async_with_config(request, None, true).await {
            Ok((socket, _)) => Ok(Self {
                socket,
                check: None,
            }),
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                let status = response.status().as_u16();
                let body = response
                    .body()
                    .as_ref()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .unwrap_or_default();
                Err(WsError::Refused { status, body })
            }
            Err(e) => Err(WsError::Socket(Box::new(e))),
        }
    }

    pub async fn send(&mut self, frame: &ClientFrame) -> Result<(), WsError> {
        let text = serde_json::to_string(frame).map_err(|error| WsError::BadFrame {
            error,
            text: String::new(),
        })?;
        self.send_text(text).await
    }

    /// Sends any text, valid or not (for testing the server's answers).
    pub async fn send_text(&mut self, text: impl Into<String>) -> Result<(), WsError> {
        self.socket
            .send(Message::text(text.into()))
            .await
            .map_err(|e| WsError::Socket(Box::new(e)))
    }

    pub async fn send_binary(&mut self, bytes: Vec<u8>) -> Result<(), WsError> {
        self.socket
            .send(Message::binary(bytes))
            .await
            .map_err(|e| WsError::Socket(Box::new(e)))
    }

    /// Runs `check` on every text frame received from now on, this
    /// client's halves included.
    pub fn with_frame_check(mut self, check: FrameCheck) -> Self {
        self.check = Some(check);
        self
    }

    /// The next text frame as JSON text.
    pub async fn next_text(&mut self) -> Result<String, WsError> {
        loop {
            match self.socket.next().await {
                Some(Ok(Message::Text(t))) => {
                    if let Some(check) = &self.check {
                        check(t.as_str());
                    }
                    return Ok(t.as_str().to_owned());
                }
                Some(Ok(Message::Close(frame))) => return Err(closed(frame)),
                None => return Err(WsError::Closed),
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(WsError::Socket(Box::new(e))),
            }
        }
    }

    /// The next frame, parsed.
    pub async fn next_frame(&mut self) -> Result<ServerFrame, WsError> {
        let text = self.next_text().await?;
        serde_json::from_str(&text).map_err(|error| WsError::BadFrame { error, text })
    }

    /// The next frame, or `Timeout`.
    pub async fn next_frame_within(&mut self, wait: Duration) -> Result<ServerFrame, WsError> {
        tokio::time::timeout(wait, self.next_frame())
            .await
            .map_err(|_| WsError::Timeout(wait))?
    }

    /// Splits into a sending and a receiving half, for clients that do
    /// both at once (the load generator).
    pub fn split(self) -> (WsSender, WsReceiver) {
        let (sink, stream) = self.socket.split();
        (
            WsSender { sink },
            WsReceiver {
                stream,
                check: self.check,
            },
        )
    }

    pub async fn close(mut self) {
        let _ = self.socket.close(None).await;
    }
}

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// The sending half of a [`WsClient`].
pub struct WsSender {
    sink: futures::stream::SplitSink<Socket, Message>,
}

impl WsSender {
    /// Queues a text frame without flushing; call [`WsSender::flush`].
    pub async fn feed_text(&mut self, text: String) -> Result<(), WsError> {
        self.sink
            .feed(Message::text(text))
            .await
            .map_err(|e| WsError::Socket(Box::new(e)))
    }

    pub async fn flush(&mut self) -> Result<(), WsError> {
        self.sink
            .flush()
            .await
            .map_err(|e| WsError::Socket(Box::new(e)))
    }
}

/// The receiving half of a [`WsClient`].
pub struct WsReceiver {
    stream: futures::stream::SplitStream<Socket>,
    check: Option<FrameCheck>,
}

impl WsReceiver {
    /// The next text frame.
    pub async fn next_text(&mut self) -> Result<String, WsError> {
        loop {
            match self.stream.next().await {
                Some(Ok(Message::Text(t))) => {
                    if let Some(check) = &self.check {
                        check(t.as_str());
                    }
                    return Ok(t.as_str().to_owned());
                }
                Some(Ok(Message::Close(frame))) => return Err(closed(frame)),
                None => return Err(WsError::Closed),
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(WsError::Socket(Box::new(e))),
            }
        }
    }
}
