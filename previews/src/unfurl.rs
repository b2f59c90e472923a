//! One link made a card: the page fetched within its bounds, its head
//! read, its image fetched, checked to be an image and kept as a blob;
//! each tenant's cards cached per link in `sb_previews`.

use std::sync::Arc;

use async_nats::jetstream::kv;
use serde::{Deserialize, Serialize};
use switchboard_blob::BlobStore;
use switchboard_outbound::{FetchError, Fetcher};
use switchboard_protocol::previews::{LinkPreview, PreviewImage};
use switchboard_protocol::{TenantId, UserId};

use crate::config::PreviewsConfig;
use crate::html::read_head;

/// The image types a card shows: raster images a browser draws without
/// running anything (never SVG, which may hold script).
const IMAGE_TYPES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];

/// A cache entry: the card, or `None` for a link that gave none (so a
/// dead or hostile link is not fetched again for every message).
#[derive(Debug, Serialize, Deserialize)]
struct Cached {
    preview: Option<LinkPreview>,
}

pub(crate) struct Unfurler {
    pub fetcher: Fetcher,
    pub blobs: Arc<dyn BlobStore>,
    pub cache: kv::Store,
    pub config: PreviewsConfig,
    /// Who "uploaded" the images, for the blob store's accounting.
    pub uploader: UserId,
}

impl Unfurler {
    /// The card of `url` for `tenant`: from the cache, else fetched (and
    /// cached, card or none).
    pub async fn card(&self, tenant: &TenantId, url: &str) -> Option<LinkPreview> {
        let key = cache_key(tenant, url);
        if let Ok(Some(bytes)) = self.cache.get(&key).await
            && let Ok(cached) = serde_json::from_slice::<Cached>(&bytes)
        {
            crate::metrics::cached();
            return cached.preview;
        }
        let preview = match self.fetch_card(tenant, url).await {
            Ok(p) => {
                crate::metrics::fetched();
                p
            }
            Err(e) => {
                tracing::debug!(%tenant, url, error = %e, "no link preview");
                crate::metrics::failed();
                None
            }
        };
        if let Ok(body) = serde_json::to_vec(&Cached {
            preview: preview.clone(),
        }) && let Err(e) = self.cache.put(&key, body.into()).await
        {
            tracing::debug!(error = %e, "a link preview was not cached");
        }
        preview
    }

    async fn fetch_card(
        &self,
        tenant: &TenantId,
        url: &str,
    ) -> Result<Option<LinkPreview>, FetchError> {
        let page = self
            .fetcher
            .get(
                url,
                "text/html,application/xhtml+xml;q=0.9",
                self.config.max_page_bytes,
            )
            .await?;
        let html = matches!(
            page.content_type.as_deref(),
            Some("text/html" | "application/xhtml+xml") | None
        );
        if !html {
            return Ok(None);
        }
        let head = read_head(&String::from_utf8_lossy(&page.body));
        if head.is_empty() {
            return Ok(None);
        }
        // Relative to where the page was found, after its redirects.
        let image_url = head
            .image
            .as_deref()
            .and_then(|i| page.url.join(i.trim()).ok());
        let image = match image_url {
            Some(u) => self.image(tenant, u.as_str()).await,
            None => None,
        };
        let preview = LinkPreview {
            // The link as posted: never where it led, nor the address the
            // page claims (`og:url`), which could name another page.
            url: url.to_owned(),
            title: head.title,
            description: head.description,
            site_name: head.site_name,
            image,
        }
        .bounded();
        Ok((!preview.is_empty()).then_some(preview))
    }

    /// The page's image, if it is one of [`IMAGE_TYPES`] by its bytes,
    /// within `max_image_bytes`, kept as a blob of the tenant.
    async fn image(&self, tenant: &TenantId, url: &str) -> Option<PreviewImage> {
        let fetched = match self
            .fetcher
            .get(url, "image/*", self.config.max_image_bytes)
            .await
        {
            Ok(f) => f,
            Err(e) => {
                tracing::debug!(url, error = %e, "a preview's image was not fetched");
                return None;
            }
        };
        if fetched.over_cap {
            tracing::debug!(url, "a preview's image is over max_image_bytes");
            return None;
        }
        let mime = sniff(&fetched.body)?;
        match self
            .blobs
            .put_media(tenant, &self.uploader, mime, fetched.body)
            .await
        {
            Ok((blob_ref, info)) => Some(PreviewImage {
                blob_ref: blob_ref.as_str().to_owned(),
                mime: info.mime,
                size: info.size,
            }),
            Err(e) => {
                tracing::warn!(%tenant, error = %e, "a preview's image was not stored");
                None
            }
        }
    }
}

/// The image type the bytes are, by their first bytes (what the server
/// said is not trusted): one of [`IMAGE_TYPES`], or none.
pub(crate) fn sniff(bytes: &[u8]) -> Option<&'static str> {
    let mime = if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        "image/png"
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        "image/jpeg"
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        "image/gif"
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        "image/webp"
    } else {
        return None;
    };
    debug_assert!(IMAGE_TYPES.contains(&mime));
    Some(mime)
}

/// `<tenant>.<sha256 of the link, hex>`: a key of any link's length, and
/// each tenant's cards apart.
fn cache_key(tenant: &TenantId, url: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, url.as_bytes());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("{}.{hex}", switchboard_nats::kv_key::part(tenant.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_known_by_their_bytes() {
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\nrest"), Some("image/png"));
        assert_eq!(sniff(&[0xFF, 0xD8, 0xFF, 0xE0]), Some("image/jpeg"));
        assert_eq!(sniff(b"GIF89a..."), Some("image/gif"));
        assert_eq!(sniff(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(sniff(b"<svg xmlns=...>"), None);
        assert_eq!(sniff(b"<html>"), None);
        assert_eq!(sniff(b""), None);
    }

    #[test]
    fn cache_keys_keep_tenants_apart_and_fit_any_link() {
        let a = TenantId::new("acme").unwrap();
        let b = TenantId::new("globex").unwrap();
        let url = format!("https://x.example/{}", "p".repeat(2000));
        assert_ne!(cache_key(&a, &url), cache_key(&b, &url));
        assert!(cache_key(&a, &url).len() < 100);
        assert!(cache_key(&a, &url).starts_with("acme."));
    }
}
