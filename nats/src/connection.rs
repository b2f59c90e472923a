//! How a process reaches NATS: seed servers, credentials and TLS.
//!
//! Every Switchboard process and `switchboard tenant` connect through
//! [`connect`], so they all accept the same seed lists and the same
//! authentication (user and password, token, NKey seed, `.creds` file for
//! decentralised JWT auth) and TLS settings (a private CA, a client
//! certificate for mutual TLS).
//!
//! Start-up waits for NATS while no seed answers (a process outlives NATS
//! restarts), but gives up at once with [`BackboneError::Refused`] when a
//! server answers and refuses it: retrying with wrong credentials only
//! fills the server's log.

use std::path::PathBuf;
use std::sync::LazyLock;
use std::time::Duration;

use async_nats::{ConnectErrorKind, ConnectOptions, ServerAddr};
use tokio::sync::watch;

use crate::BackboneError;

/// Connections this process made to a NATS server, counting every
/// reconnect of every client. Never dropped, so its receivers never see
/// it closed.
static CONNECTS: LazyLock<watch::Sender<u64>> = LazyLock::new(|| watch::Sender::new(0));

/// A number that changes whenever a client of this process (re)connects.
///
/// Whatever was in flight on a connection that broke may be lost without
/// an answer: a request's reply, a JetStream delivery the consumer counts
/// as handed out. Work that waits on such things compares the epoch from
/// before with the one now, and starts over at once when it moved instead
/// of waiting for a timeout (`RemoteStore`, the partition writers, the
/// gateway's ingest queues).
pub fn connection_epoch() -> u64 {
    *CONNECTS.borrow()
}

/// Sees every (re)connect of a client of this process: its value is the
/// [`connection_epoch`].
pub fn connection_epochs() -> watch::Receiver<u64> {
    CONNECTS.subscribe()
}

/// Resolves once a client of this process has (re)connected since
/// [`connection_epoch`] returned `epoch`; at once if one already has.
pub async fn reconnected_since(epoch: u64) {
    let mut connects = connection_epochs();
    // The sender lives in a static: `wait_for` cannot see it closed.
    let _ = connects.wait_for(|now| *now != epoch).await;
}

/// How this process proves who it is to NATS.
#[derive(Clone, Default)]
pub enum NatsAuth {
    #[default]
    None,
    UserPassword {
        user: String,
        password: String,
    },
    Token(String),
    /// An NKey seed (`SU...`): the server knows the public key.
    NKey(String),
    /// The contents of a `.creds` file: a user JWT and its NKey seed.
    Credentials(String),
}

impl NatsAuth {
    /// The method's name, for logs and errors; never the secret.
    pub fn method(&self) -> &'static str {
        match self {
            Self::None => "none",
            Self::UserPassword { .. } => "user and password",
            Self::Token(_) => "token",
            Self::NKey(_) => "NKey",
            Self::Credentials(_) => "credentials file",
        }
    }
}

impl std::fmt::Debug for NatsAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::UserPassword { user, .. } => write!(f, "UserPassword({user}, <redacted>)"),
            other => write!(f, "{}", other.method()),
        }
    }
}

/// TLS towards NATS. A `tls://` URL, a CA file or a client certificate
/// turns it on; `required` makes it mandatory for every server.
#[derive(Debug, Clone, Default)]
pub struct NatsTls {
    /// A PEM file of CA certificates to trust besides the system's.
    pub ca_file: Option<PathBuf>,
    /// A client certificate and its key (PEM), for mutual TLS.
    pub client_cert: Option<(PathBuf, PathBuf)>,
    pub required: bool,
}

/// The prefix of a gateway's reply subjects (`_INBOX_GW.<id>.…`).
///
/// Replies travel on core NATS to whoever may subscribe to their subject.
/// With one prefix for every process, a gateway (which must read its own
/// replies) could read every worker's too: the writers' ingest deliveries,
/// store answers, JetStream API answers; and publish forged ones. The
/// shipped permissions (`nats/server/secure/accounts.conf`) let the
/// `gateway` user subscribe to this prefix only and publish replies only
/// to requests it was sent (`allow_responses`).
pub const GATEWAY_INBOX_PREFIX: &str = "_INBOX_GW";

/// How to reach NATS.
#[derive(Debug, Clone)]
pub struct NatsConfig {
    /// Seed servers; the client also learns the cluster's other servers
    /// from the one it reaches.
    pub servers: Vec<String>,
    /// Client name shown by `nats server report connections`.
    pub name: String,
    pub auth: NatsAuth,
    pub tls: NatsTls,
    /// The prefix of this process's reply subjects; `_INBOX` when none
    /// ([`GATEWAY_INBOX_PREFIX`] for gateways).
    pub inbox_prefix: Option<String>,
}

impl NatsConfig {
    /// Plain connection to `servers` (a comma-separated list), no auth.
    pub fn new(servers: &str, name: &str) -> Self {
        Self {
            servers: parse_servers(servers),
            name: name.to_owned(),
            auth: NatsAuth::None,
            tls: NatsTls::default(),
            inbox_prefix: None,
        }
    }

    /// The same, with replies on `prefix` rather than `_INBOX`.
    pub fn with_inbox_prefix(mut self, prefix: &str) -> Self {
        self.inbox_prefix = Some(prefix.to_owned());
        self
    }

    fn addresses(&self) -> Result<Vec<ServerAddr>, BackboneError> {
        if self.servers.is_empty() {
            return Err(self.refused("no NATS server given".into(), None));
        }
        self.servers
            .iter()
            .map(|s| {
                s.parse::<ServerAddr>().map_err(|e| {
                    let reason = format!("{s:?} is not a NATS server URL: {e}");
                    self.refused(reason, Some(crate::cause(e)))
                })
            })
            .collect()
    }

    fn refused(&self, reason: String, source: Option<crate::Cause>) -> BackboneError {
        BackboneError::Refused {
            servers: self.servers.join(","),
            reason,
            source,
        }
    }

    fn options(&self) -> Result<ConnectOptions, BackboneError> {
        let mut options = ConnectOptions::new()
            .name(&self.name)
            .max_reconnects(None)
            .connection_timeout(Duration::from_secs(5))
            .request_timeout(Some(Duration::from_secs(10)))
            .event_callback(|event| async move {
                match event {
                    async_nats::Event::Connected => {
                        CONNECTS.send_modify(|connects| *connects += 1);
                        tracing::info!("connected to NATS");
                    }
                    async_nats::Event::Disconnected => tracing::warn!("disconnected from NATS"),
                    // Slow consumers (messages dropped), server and client
                    // errors, lame duck mode: all worth an operator's look.
                    other => tracing::warn!(event = %other, "NATS client event"),
                }
            });
        options = match &self.auth {
            NatsAuth::None => options,
            NatsAuth::UserPassword { user, password } => {
                options.user_and_password(user.clone(), password.clone())
            }
            NatsAuth::Token(token) => options.token(token.clone()),
            NatsAuth::NKey(seed) => options.nkey(seed.clone()),
            NatsAuth::Credentials(creds) => options.credentials(creds).map_err(|e| {
                let reason = format!("the credentials file does not parse: {e}");
                self.refused(reason, Some(crate::cause(e)))
            })?,
        };
        if let Some(ca) = &self.tls.ca_file {
            options = options.add_root_certificates(ca.clone());
        }
        if let Some((cert, key)) = &self.tls.client_cert {
            options = options.add_client_certificate(cert.clone(), key.clone());
        }
        if self.tls.required {
            options = options.require_tls(true);
        }
        if let Some(prefix) = &self.inbox_prefix {
            options = options.custom_inbox_prefix(prefix.clone());
        }
        Ok(options)
    }
}

/// Splits a comma-separated seed list, ignoring blanks around entries.
pub fn parse_servers(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Connects, waiting for a seed to answer, and reconnecting forever
/// afterwards. Refuses at once (no retry) when a server rejects the
/// credentials or the TLS setup.
pub async fn connect(config: &NatsConfig) -> Result<async_nats::Client, BackboneError> {
    let addresses = config.addresses()?;
    let mut delay = Duration::from_millis(250);
    loop {
        let error = match config.options()?.connect(addresses.clone()).await {
            Ok(client) => return Ok(client),
            Err(e) => e,
        };
        let tls = tls_refusal(&error);
        match error.kind() {
            ConnectErrorKind::AuthorizationViolation | ConnectErrorKind::Authentication => {
                let reason = format!(
                    "authorization violation: the server did not accept this process's {} ({error})",
                    config.auth.method()
                );
                return Err(config.refused(reason, Some(crate::cause(error))));
            }
            ConnectErrorKind::Tls | ConnectErrorKind::ServerParse => {
                return Err(config.refused(error.to_string(), Some(crate::cause(error))));
            }
            // A TLS refusal arrives as an I/O error carrying the TLS
            // error: our certificate was not accepted, or theirs is not
            // trusted. Retrying would not change either.
            ConnectErrorKind::Io if tls.is_some() => {
                let reason = format!("TLS: {}", tls.unwrap_or_default());
                return Err(config.refused(reason, Some(crate::cause(error))));
            }
            ConnectErrorKind::Dns
            | ConnectErrorKind::TimedOut
            | ConnectErrorKind::Io
            | ConnectErrorKind::MaxReconnects => {
                tracing::warn!(servers = %config.servers.join(","), error = %error, ?delay, "no NATS server reachable yet; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// The TLS error somewhere in `error`'s sources, if there is one.
fn tls_refusal(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut source = Some(error);
    while let Some(e) = source {
        if let Some(tls) = e.downcast_ref::<async_nats::rustls::Error>() {
            return Some(tls.to_string());
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && let Some(tls) = io
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<async_nats::rustls::Error>())
        {
            return Some(tls.to_string());
        }
        source = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_lists_split_on_commas() {
        assert_eq!(
            parse_servers("nats://a:4222, nats://b:4222,,nats://c:4222 "),
            ["nats://a:4222", "nats://b:4222", "nats://c:4222"]
        );
        let config = NatsConfig::new("nats://a:4222,tls://b:4223", "t");
        assert_eq!(config.addresses().unwrap().len(), 2);
    }

    #[test]
    fn bad_seed_lists_are_refused_with_the_culprit() {
        let err = NatsConfig::new("nats://a:4222,nats://b:notaport", "t")
            .addresses()
            .unwrap_err()
            .to_string();
        assert!(err.contains("b:notaport"), "{err}");
        assert!(NatsConfig::new(" , ", "t").addresses().is_err());
    }

    #[test]
    fn secrets_stay_out_of_debug_output() {
        let auth = NatsAuth::UserPassword {
            user: "gw".into(),
            password: "hunter2-secret".into(),
        };
        assert!(!format!("{auth:?}").contains("hunter2"));
        assert!(!format!("{:?}", NatsAuth::Token("tok-secret".into())).contains("tok-secret"));
    }
}
