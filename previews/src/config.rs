//! The stage's settings, the deployment's (`[previews]`).

use switchboard_outbound::FetchConfig;

/// The stage's settings (`[previews]`).
#[derive(Debug, Clone)]
pub struct PreviewsConfig {
    /// How a fetch is bounded in time and which private networks it may
    /// reach.
    pub fetch: FetchConfig,
    /// Bytes of a page read at most (its head is at the start).
    pub max_page_bytes: usize,
    /// The largest image kept; a larger one leaves the card without.
    pub max_image_bytes: usize,
    /// Jobs in progress at once in this process.
    pub concurrency: usize,
    /// Jobs of one tenant in progress at once in this process.
    pub tenant_concurrency: usize,
    /// Ingest partitions, to address the writer's command.
    pub partitions: u16,
}
