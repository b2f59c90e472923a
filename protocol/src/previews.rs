//! Link previews (v1.3): which links of a text are unfurled, and the
//! card a message gains for each. The server fetches them after the
//! send's `ack`, on a worker; nothing here does IO.

use serde::{Deserialize, Serialize};

/// The most links of one message that are unfurled (the first ones).
pub const MAX_LINKS: usize = 3;
/// The longest link that is unfurled, in bytes.
pub const MAX_URL_BYTES: usize = 2048;
/// The longest `title`, in characters (a longer one is cut).
pub const MAX_TITLE_CHARS: usize = 300;
/// The longest `description`, in characters (a longer one is cut).
pub const MAX_DESCRIPTION_CHARS: usize = 1000;
/// The longest `site_name`, in characters (a longer one is cut).
pub const MAX_SITE_NAME_CHARS: usize = 100;

/// One card of a message's `previews`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LinkPreview {
    /// The link as the message's text has it (never where it led, nor
    /// what the page says its address is).
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site_name: Option<String>,
    /// The page's image, fetched once by the server and served like
    /// media (`GET /v1/media/{blob_ref}`), to the conversation's members
    /// only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<PreviewImage>,
}

/// A preview's image, kept as a blob.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PreviewImage {
    pub blob_ref: String,
    pub mime: String,
    pub size: u64,
}

impl LinkPreview {
    /// Whether the card says anything beyond its address.
    pub fn is_empty(&self) -> bool {
        self.title.is_none()
            && self.description.is_none()
            && self.site_name.is_none()
            && self.image.is_none()
    }

    /// The card with every text within its bound (cut, never refused:
    /// pages say what they like) and blank ones gone.
    pub fn bounded(mut self) -> Self {
        self.title = cut(self.title, MAX_TITLE_CHARS);
        self.description = cut(self.description, MAX_DESCRIPTION_CHARS);
        self.site_name = cut(self.site_name, MAX_SITE_NAME_CHARS);
        self
    }
}

fn cut(text: Option<String>, max_chars: usize) -> Option<String> {
    let text = text?;
    let one_line: String = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(max_chars)
        .collect();
    (!one_line.is_empty()).then_some(one_line)
}

/// `GET/PUT /v1/admin/previews`: whether the tenant's messages are
/// unfurled (on by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PreviewSettings {
    pub enabled: bool,
}

/// The links of `text` that are unfurled: the first [`MAX_LINKS`]
/// distinct `http://` or `https://` ones, each at most
/// [`MAX_URL_BYTES`], with a host. A link ends at whitespace or at a
/// character no URL holds unescaped (`<`, `>`, `"`), and loses the
/// punctuation that usually closes a sentence around it.
pub fn links(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut rest = text;
    while out.len() < MAX_LINKS {
        let Some(at) = find_scheme(rest) else {
            break;
        };
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| c.is_whitespace() || c.is_control() || matches!(c, '<' | '>' | '"'))
            .unwrap_or(tail.len());
        let mut link = &tail[..end];
        while let Some(last) = link.chars().last()
            && (matches!(last, '.' | ',' | ';' | ':' | '!' | '?' | '\'' | ']')
                || (last == ')' && !link.contains('(')))
        {
            link = &link[..link.len() - last.len_utf8()];
        }
        rest = &tail[end..];
        let has_host = link
            .split_once("://")
            .map(|(_, after)| after.split(['/', '?', '#']).next().unwrap_or(""))
            .is_some_and(|host| !host.is_empty());
        if has_host && link.len() <= MAX_URL_BYTES && !out.iter().any(|l| l == link) {
            out.push(link.to_owned());
        }
    }
    out
}

/// Where the next `http://` or `https://` starts, at the start of the
/// text or after a character that is no part of a word.
fn find_scheme(text: &str) -> Option<usize> {
    let lower = text.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find("http") {
        let at = from + i;
        let after = &lower[at..];
        let starts_link = after.starts_with("http://") || after.starts_with("https://");
        let boundary = lower[..at]
            .chars()
            .last()
            .is_none_or(|c| !c.is_alphanumeric());
        if starts_link && boundary {
            return Some(at);
        }
        from = at + 4;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_three_distinct_links_are_found() {
        assert_eq!(
            links("see https://a.example/x, and (http://b.example/y). Again https://a.example/x"),
            ["https://a.example/x", "http://b.example/y"]
        );
        assert_eq!(
            links("1 http://a.test 2 http://b.test 3 http://c.test 4 http://d.test"),
            ["http://a.test", "http://b.test", "http://c.test"]
        );
        assert_eq!(
            links("wiki https://en.example/Foo_(bar) ok"),
            ["https://en.example/Foo_(bar)"]
        );
        assert!(links("ftp://a.example mailto:x@y http:// nohttps://x.example").is_empty());
        assert_eq!(
            links("<https://a.example/q?x=1>"),
            ["https://a.example/q?x=1"]
        );
        assert_eq!(links("HTTPS://A.example"), ["HTTPS://A.example"]);
    }

    #[test]
    fn a_link_past_its_bound_is_left_alone() {
        let at = format!("https://a.example/{}", "p".repeat(MAX_URL_BYTES - 18));
        assert_eq!(at.len(), MAX_URL_BYTES);
        assert_eq!(links(&at), std::slice::from_ref(&at));
        assert!(links(&format!("{at}p")).is_empty());
    }

    #[test]
    fn an_edit_keeps_the_cards_of_the_links_it_kept() {
        use crate::{
            ClientMsgId, Content, ConversationId, DeviceId, Message, MessageId, Timestamp, UserId,
        };
        let card = |url: &str, image: &str| LinkPreview {
            url: url.into(),
            title: Some("t".into()),
            description: None,
            site_name: None,
            image: Some(PreviewImage {
                blob_ref: image.into(),
                mime: "image/png".into(),
                size: 1,
            }),
        };
        let mut m = Message::plain(
            MessageId::from_u64(1),
            ConversationId::new("c").unwrap(),
            1,
            UserId::new("u").unwrap(),
            DeviceId::new("d").unwrap(),
            ClientMsgId::new("k").unwrap(),
            Some(Content::Text {
                text: "only https://b.example now".into(),
            }),
            Timestamp::from_unix_ms(1),
        );
        m.previews = vec![
            card("https://a.example", "img-a"),
            card("https://b.example", "img-b"),
            card("https://c.example", "img-b"),
        ];
        // c's image is b's too: it stays referenced.
        assert_eq!(m.keep_linked_previews(), ["img-a"]);
        assert_eq!(m.previews.len(), 1);
        assert_eq!(m.previews[0].url, "https://b.example");
    }

    #[test]
    fn texts_are_cut_to_one_line_within_their_bounds() {
        let p = LinkPreview {
            url: "https://a.example".into(),
            title: Some(format!("  Big\n  {}", "t".repeat(MAX_TITLE_CHARS))),
            description: Some("   ".into()),
            site_name: None,
            image: None,
        }
        .bounded();
        let title = p.title.unwrap();
        assert!(title.starts_with("Big t"));
        assert_eq!(title.chars().count(), MAX_TITLE_CHARS);
        assert_eq!(p.description, None);
    }
}
