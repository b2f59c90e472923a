//! `[previews]` read into the link previews stage's settings (v1.3).

use std::time::Duration;

use anyhow::Context;
use switchboard_outbound::{FetchConfig, FetchPolicy, Network};
use switchboard_previews::PreviewsConfig;

use crate::config::FileConfig;

/// The setting that lets links reach private networks, as refusals name it.
pub const ALLOW_PRIVATE: &str = "[previews] allow_private";

/// Whether link previews run at all in this deployment.
pub fn enabled(file: &FileConfig) -> bool {
    file.previews
        .as_ref()
        .and_then(|p| p.enabled)
        .unwrap_or(true)
}

/// The stage's settings, its networks parsed.
pub fn previews_config(file: &FileConfig, partitions: u16) -> anyhow::Result<PreviewsConfig> {
    let section = file.previews.clone().unwrap_or_default();
    let allow = section
        .allow_private
        .iter()
        .map(|n| Network::parse(n))
        .collect::<Result<Vec<_>, _>>()
        .map_err(anyhow::Error::msg)
        .context("reading [previews] allow_private")?;
    Ok(PreviewsConfig {
        fetch: FetchConfig {
            deadline: Duration::from_millis(section.timeout_ms.unwrap_or(5_000).max(1)),
            connect: Duration::from_millis(section.connect_timeout_ms.unwrap_or(2_000).max(1)),
            max_redirects: section.max_redirects.unwrap_or(5),
            policy: FetchPolicy {
                allow,
                setting: ALLOW_PRIVATE,
            },
        },
        max_page_bytes: section.max_page_bytes.unwrap_or(512 * 1024),
        max_image_bytes: section.max_image_bytes.unwrap_or(2 * 1024 * 1024),
        concurrency: section.concurrency.unwrap_or(64).max(1),
        tenant_concurrency: section.tenant_concurrency.unwrap_or(16).max(1),
        partitions,
    })
}
