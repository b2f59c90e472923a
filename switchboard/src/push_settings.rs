//! `[push]` read into the settings of both outbound deliveries: the calls
//! they share (bounds, CA, private targets), the push stage's, and the
//! event webhooks' retries, shares and cut-off.

use std::time::Duration;

use anyhow::Context;
use switchboard_outbound::CallConfig;
use switchboard_webhooks::WebhooksConfig;

use crate::config::{FileConfig, PushSection};

/// The push stage's and the webhook dispatcher's settings, from `[push]`
/// with its CA file read.
pub fn outbound_config(
    file: &FileConfig,
) -> anyhow::Result<(switchboard_push::PushConfig, WebhooksConfig)> {
    let section = file.push.clone().unwrap_or_default();
    let calls = call_config(&section)?;
    let mut push = switchboard_push::PushConfig {
        calls: calls.clone(),
        ..Default::default()
    };
    if let Some(n) = section.concurrency {
        push.concurrency = n.max(1);
    }
    if let Some(n) = section.tenant_concurrency {
        push.tenant_concurrency = n.max(1);
    }
    if let Some(n) = section.tenant_max_queued {
        push.tenant_max_queued = n.max(1);
    }
    Ok((push, webhooks_config(&section, calls)?))
}

/// How calls to tenants' addresses are bounded, and what they may reach.
fn call_config(section: &PushSection) -> anyhow::Result<CallConfig> {
    let mut calls = CallConfig::default();
    if let Some(ms) = section.timeout_ms {
        calls.timeouts.call = Duration::from_millis(ms.max(1));
    }
    if let Some(ms) = section.connect_timeout_ms {
        calls.timeouts.connect = Duration::from_millis(ms.max(1));
    }
    if let Some(n) = section.status_answer_max_bytes {
        calls.answer_caps.status_only = n;
    }
    if let Some(n) = section.parsed_answer_max_bytes {
        calls.answer_caps.parsed = n;
    }
    calls.allow_private_targets = section.allow_private_targets;
    if let Some(path) = &section.ca_file {
        calls.extra_root_pem = Some(
            std::fs::read(path)
                .with_context(|| format!("reading [push] ca_file {}", path.display()))?,
        );
    }
    Ok(calls)
}

fn webhooks_config(section: &PushSection, calls: CallConfig) -> anyhow::Result<WebhooksConfig> {
    let mut config = WebhooksConfig {
        calls,
        ..Default::default()
    };
    if let Some(n) = section.webhook_max_attempts {
        config.max_attempts = n.max(1);
    }
    if let Some(ms) = section.webhook_first_retry_ms {
        config.first_retry = Duration::from_millis(ms.max(1));
    }
    if let Some(ms) = section.webhook_max_retry_ms {
        config.max_retry = Duration::from_millis(ms.max(1));
    }
    if let Some(n) = section.webhook_concurrency {
        config.concurrency = n.max(1);
    }
    if let Some(n) = section.webhook_tenant_concurrency {
        config.tenant_concurrency = n.max(1);
    }
    if let Some(n) = section.webhook_tenant_in_flight {
        config.tenant_in_flight = n.max(1);
    }
    if let Some(n) = section.webhook_failure_window {
        config.trip.window = n.max(2);
    }
    if let Some(ratio) = section.webhook_failure_ratio {
        if !(ratio > 0.0 && ratio <= 1.0) {
            anyhow::bail!(
                "[push] webhook_failure_ratio must be above 0 and at most 1, not {ratio}"
            );
        }
        config.trip.ratio = ratio;
    }
    if let Some(ms) = section.webhook_cool_down_ms {
        config.trip.cool_down = Duration::from_millis(ms);
    }
    Ok(config)
}
