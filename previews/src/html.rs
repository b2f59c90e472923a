//! What a page says about itself: its Open Graph and Twitter card
//! `<meta>` tags, its `<meta name="description">` and `<title>`, read
//! from the start of the page only (the head), by a scanner that never
//! builds a tree: the page is a stranger's, and may be anything.

/// The head's claims, as the page makes them (unbounded: the card cuts
/// them, `LinkPreview::bounded`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Head {
    pub title: Option<String>,
    pub description: Option<String>,
    pub site_name: Option<String>,
    /// The image's address as written (maybe relative to the page).
    pub image: Option<String>,
}

impl Head {
    /// Whether the page said anything a card could show.
    pub fn is_empty(&self) -> bool {
        self.title.is_none() && self.description.is_none() && self.image.is_none()
    }
}

/// Reads the head of `page`: Open Graph first, then Twitter's tags, then
/// the plain `<meta name="description">` and `<title>`. Stops at `<body`
/// (what a card shows is in the head).
pub fn read_head(page: &str) -> Head {
    // ASCII lower case keeps every byte where it was: positions found in
    // `lower` are positions in `page`.
    let lower = page.to_ascii_lowercase();
    let end = lower.find("<body").unwrap_or(lower.len());
    let (page, lower) = (&page[..end], &lower[..end]);
    let mut og = Head::default();
    let mut twitter = Head::default();
    let mut plain_description = None;
    let mut at = 0;
    while let Some(i) = lower[at..].find("<meta") {
        let start = at + i + "<meta".len();
        let Some(close) = lower[start..].find('>') else {
            break;
        };
        let attrs = attributes(&page[start..start + close]);
        at = start + close;
        let name = attrs
            .iter()
            .find(|(k, _)| k == "property" || k == "name")
            .map(|(_, v)| v.to_ascii_lowercase());
        let Some(content) = attrs
            .iter()
            .find(|(k, _)| k == "content")
            .map(|(_, v)| decode_entities(v))
            .filter(|v| !v.trim().is_empty())
        else {
            continue;
        };
        let slot = match name.as_deref() {
            Some("og:title") => &mut og.title,
            Some("og:description") => &mut og.description,
            Some("og:site_name") => &mut og.site_name,
            Some("og:image" | "og:image:url" | "og:image:secure_url") => &mut og.image,
            Some("twitter:title") => &mut twitter.title,
            Some("twitter:description") => &mut twitter.description,
            Some("twitter:image" | "twitter:image:src") => &mut twitter.image,
            Some("description") => &mut plain_description,
            _ => continue,
        };
        // The first of each wins, as it does for every unfurler.
        slot.get_or_insert(content);
    }
    let title = lower.find("<title").and_then(|i| {
        let open = i + lower[i..].find('>')? + 1;
        let close = open + lower[open..].find("</title")?;
        Some(decode_entities(&page[open..close])).filter(|t| !t.trim().is_empty())
    });
    Head {
        title: og.title.or(twitter.title).or(title),
        description: og.description.or(twitter.description).or(plain_description),
        site_name: og.site_name,
        image: og.image.or(twitter.image),
    }
}

/// A tag's attributes (`name="value"`, `name='value'`, `name=value`,
/// bare `name`), names in lower case.
fn attributes(tag: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = tag.trim_start();
    while !rest.is_empty() {
        let name_end = rest
            .find(|c: char| c.is_whitespace() || c == '=' || c == '/')
            .unwrap_or(rest.len());
        let name = rest[..name_end].to_ascii_lowercase();
        rest = rest[name_end..].trim_start();
        let value = if let Some(after) = rest.strip_prefix('=') {
            let after = after.trim_start();
            let (value, tail) = match after.chars().next() {
                Some(q @ ('"' | '\'')) => {
                    let inner = &after[1..];
                    let end = inner.find(q).unwrap_or(inner.len());
                    (&inner[..end], inner.get(end + 1..).unwrap_or(""))
                }
                _ => {
                    let end = after.find(char::is_whitespace).unwrap_or(after.len());
                    (&after[..end], &after[end..])
                }
            };
            rest = tail.trim_start();
            value.to_owned()
        } else {
            if name.is_empty() {
                // A stray `/` or the like: skip one character.
                let skip = rest.chars().next().map_or(0, char::len_utf8);
                rest = rest[skip..].trim_start();
            }
            String::new()
        };
        if !name.is_empty() {
            out.push((name, value));
        }
    }
    out
}

/// The text with its character references decoded: the named ones
/// pages use in titles, and numeric ones. Anything else stays as written.
fn decode_entities(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        let decoded = tail.find(';').filter(|&e| e <= 10).and_then(|e| {
            let name = &tail[1..e];
            let c = match name {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" | "#39" => Some('\''),
                "nbsp" => Some(' '),
                _ => {
                    let code = match name.strip_prefix("#x").or_else(|| name.strip_prefix("#X")) {
                        Some(hex) => u32::from_str_radix(hex, 16).ok(),
                        None => name.strip_prefix('#').and_then(|d| d.parse().ok()),
                    };
                    code.and_then(char::from_u32)
                }
            };
            c.map(|c| (c, e + 1))
        });
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &tail[len..];
            }
            None => {
                out.push('&');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_graph_comes_first_then_twitter_then_the_plain_tags() {
        let page = r#"<!doctype html><html><head>
            <title>Plain &amp; simple</title>
            <meta name="description" content="plain description">
            <meta property="og:title" content="OG &quot;title&quot;" />
            <meta name='twitter:description' content='twitter description'>
            <META PROPERTY=og:image CONTENT=/img/card.png>
            <meta property="og:site_name" content="Example">
            </head><body><meta property="og:description" content="in the body"></body>"#;
        assert_eq!(
            read_head(page),
            Head {
                title: Some("OG \"title\"".into()),
                description: Some("twitter description".into()),
                site_name: Some("Example".into()),
                image: Some("/img/card.png".into()),
            }
        );
    }

    #[test]
    fn a_page_of_plain_tags_still_has_a_card() {
        let page = "<html><head><title>\n  Hello &#x1F600; &#233;\n</title></head></html>";
        let head = read_head(page);
        assert_eq!(head.title.as_deref(), Some("\n  Hello 😀 é\n"));
        assert!(!head.is_empty());
        assert!(read_head("<html><body>nothing</body></html>").is_empty());
    }

    #[test]
    fn broken_markup_is_read_without_panicking() {
        for page in [
            "<meta",
            "<meta content=",
            "<meta content=\"x",
            "<title>unclosed",
            "<meta / = content='a' property=og:title>",
            "&#xFFFFFFFF; &#; &",
            "<meta property=og:title content=\"\u{1F600}\">",
        ] {
            let _ = read_head(page);
        }
        assert_eq!(
            decode_entities("a &bogus; b &#99999999;"),
            "a &bogus; b &#99999999;"
        );
    }
}
