//! What can go wrong on the backbone: [`BackboneError`], whose cause is
//! a shared, type-erased [`Cause`].

/// The underlying error of a [`BackboneError`]: shared, so that the error
/// stays `Clone` (an id failure is handed to every waiter), and type-erased,
/// because the NATS client has one error type per call.
pub type Cause = std::sync::Arc<dyn std::error::Error + Send + Sync>;

/// Erases `e` into a [`Cause`]. Takes anything a `Box<dyn Error>` can be
/// made of, so that both a typed error and `async_nats::Error` (already a
/// box) fit.
pub fn cause(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Cause {
    std::sync::Arc::from(e.into())
}

/// What went wrong on the backbone. The Display of each variant carries its
/// source's text as well (logs and the messages clients get are built from
/// it and must not change), and the source is kept for who walks the chain.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BackboneError {
    /// A NATS call failed; `context` says which and on what.
    #[error("NATS: {context}: {source}")]
    Nats {
        context: String,
        #[source]
        source: Cause,
    },
    /// A definition file shipped with this crate does not parse.
    #[error("backbone definition: {name}: {source}")]
    Definition {
        name: String,
        #[source]
        source: Cause,
    },
    /// A stream or bucket this process may not define is missing.
    #[error(
        "backbone definition: {what} is not defined ({source}); start a process allowed to define the backbone (a worker) first"
    )]
    NotDefined {
        what: String,
        #[source]
        source: Cause,
    },
    /// An ingest stream of an earlier release (the single `SB_INGEST`, or
    /// a work-queue `SB_INGEST_<p>`) still holds commands.
    #[error(
        "backbone definition: the stream {stream} of an earlier release still holds {messages} commands; \
         keep the earlier workers running until it is empty (stop the gateways first), \
         then start this release"
    )]
    LegacyStreamNotEmpty { stream: String, messages: u64 },
    /// A payload that does not encode or decode.
    #[error("encoding: {source}")]
    Encoding {
        #[source]
        source: Cause,
    },
    /// A delivery to a gateway whose framing is broken: the message says
    /// how; there is no underlying error.
    #[error("encoding: delivery: {0}")]
    MalformedDelivery(&'static str),
    /// An event whose kind header this release does not know.
    #[error("encoding: unknown event kind {kind:?}")]
    UnknownEvent { kind: Option<String> },
    /// Every Snowflake node id is leased: the message says so, there is
    /// no underlying error.
    #[error("exhausted: {0}")]
    Exhausted(String),
    /// The leased node id does not make a generator.
    #[error("exhausted: {source}")]
    NodeId {
        #[source]
        source: switchboard_protocol::snowflake::SnowflakeError,
    },
    /// The process cannot serve now (its node id lease lapsed, a lock was
    /// poisoned): the message is the whole error, there is no source.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// NATS refused this process: wrong credentials, a TLS setup it does
    /// not accept, or a server list that does not parse. Retrying does
    /// not help; the configuration must change.
    /// `reason` says what was refused, with the error's text where there
    /// is one; that error is kept as `source` (none for an empty server
    /// list).
    #[error("NATS refused the connection ({servers}): {reason}")]
    Refused {
        servers: String,
        reason: String,
        #[source]
        source: Option<Cause>,
    },
}

impl BackboneError {
    /// A failed NATS call: `context` names it, `source` is the client's error.
    pub fn nats(
        context: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::Nats {
            context: context.into(),
            source: cause(source),
        }
    }

    /// A payload that does not encode or decode.
    pub fn encoding(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Encoding {
            source: cause(source),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    /// The text stays what it was when the variants held a string (logs
    /// and clients' messages are built from it), and the cause is kept.
    #[test]
    fn display_is_unchanged_and_the_source_is_kept() {
        let io = std::io::Error::other("connection reset");
        let e = BackboneError::nats("bucket sb_nodes", io);
        assert_eq!(e.to_string(), "NATS: bucket sb_nodes: connection reset");
        let source = e.source().map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("connection reset"));
        // Cloning shares the cause rather than dropping it.
        assert!(e.clone().source().is_some());

        let json = serde_json::from_str::<u8>("x").unwrap_err();
        let text = json.to_string();
        let e = BackboneError::encoding(json);
        assert_eq!(e.to_string(), format!("encoding: {text}"));
        assert!(e.source().is_some());
    }

    #[test]
    fn an_unknown_event_reads_as_before() {
        let e = BackboneError::UnknownEvent {
            kind: Some("x".to_owned()),
        };
        assert_eq!(e.to_string(), "encoding: unknown event kind Some(\"x\")");
    }
}
