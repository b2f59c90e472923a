//! `[push]` read into the push stage's settings: provider calls, their
//! bounds, and the outbound webhooks' retries, shares and cut-off.

use std::time::Duration;

use anyhow::Context;

use crate::config::FileConfig;

/// The push stage's settings of `[push]`, its CA file read.
pub fn push_config(file: &FileConfig) -> anyhow::Result<switchboard_push::PushConfig> {
    let section = file.push.clone().unwrap_or_default();
    let mut config = switchboard_push::PushConfig::default();
    if let Some(ms) = section.timeout_ms {
        config.timeouts.call = Duration::from_millis(ms.max(1));
    }
    if let Some(ms) = section.connect_timeout_ms {
        config.timeouts.connect = Duration::from_millis(ms.max(1));
    }
    if let Some(n) = section.concurrency {
        config.concurrency = n.max(1);
    }
    if let Some(n) = section.tenant_concurrency {
        config.tenant_concurrency = n.max(1);
    }
    if let Some(n) = section.tenant_max_queued {
        config.tenant_max_queued = n.max(1);
    }
    if let Some(n) = section.status_answer_max_bytes {
        config.answer_caps.status_only = n;
    }
    if let Some(n) = section.parsed_answer_max_bytes {
        config.answer_caps.parsed = n;
    }
    config.allow_private_targets = section.allow_private_targets;
    if let Some(n) = section.webhook_max_attempts {
        config.webhooks.max_attempts = n.max(1);
    }
    if let Some(ms) = section.webhook_first_retry_ms {
        config.webhooks.first_retry = Duration::from_millis(ms.max(1));
    }
    if let Some(ms) = section.webhook_max_retry_ms {
        config.webhooks.max_retry = Duration::from_millis(ms.max(1));
    }
    if let Some(n) = section.webhook_concurrency {
        config.webhooks.concurrency = n.max(1);
    }
    if let Some(n) = section.webhook_tenant_concurrency {
        config.webhooks.tenant_concurrency = n.max(1);
    }
    if let Some(n) = section.webhook_tenant_in_flight {
        config.webhooks.tenant_in_flight = n.max(1);
    }
    if let Some(n) = section.webhook_failure_window {
        config.webhooks.trip.window = n.max(2);
    }
    if let Some(ratio) = section.webhook_failure_ratio {
        if !(ratio > 0.0 && ratio <= 1.0) {
            anyhow::bail!(
                "[push] webhook_failure_ratio must be above 0 and at most 1, not {ratio}"
            );
        }
        config.webhooks.trip.ratio = ratio;
    }
    if let Some(ms) = section.webhook_cool_down_ms {
        config.webhooks.trip.cool_down = Duration::from_millis(ms);
    }
    if let Some(path) = &section.ca_file {
        config.extra_root_pem = Some(
            std::fs::read(path)
                .with_context(|| format!("reading [push] ca_file {}", path.display()))?,
        );
    }
    Ok(config)
}
