//! A word-list moderator. Configuration:
//! - `words`: comma-separated, matched as whole words, ignoring case
//!   (default `darn,heck`);
//! - `action`: `mask` (default) replaces each letter of a listed word with
//!   `*` and stores the rewritten text; `reject` refuses the message.
//!
//! Text and media captions are checked; everything else is allowed.

wit_bindgen::generate!({ path: "../../wit/0.1.0", world: "moderator" });

use exports::switchboard::plugin::moderation::{Guest, Message, Verdict};
use switchboard::plugin::host::{Level, config, log};
use switchboard::plugin::types::{Content, Media};

struct WordList;

impl Guest for WordList {
    fn moderate(message: Message) -> Verdict {
        let words = config("words").unwrap_or_else(|| "darn,heck".to_owned());
        let words: Vec<String> = words
            .split(',')
            .map(|w| w.trim().to_lowercase())
            .filter(|w| !w.is_empty())
            .collect();
        let reject = config("action").as_deref() == Some("reject");
        let (text, rebuild): (&str, fn(&Content, String) -> Content) = match &message.content {
            Content::Text(t) => (t, |_, t| Content::Text(t)),
            Content::Image(m) | Content::File(m) | Content::Voice(m) => match &m.caption {
                Some(c) => (c, with_caption),
                None => return Verdict::Allow,
            },
        };
        let masked = mask(text, &words);
        if masked == text {
            return Verdict::Allow;
        }
        if reject {
            log(Level::Info, "rejected a message with a listed word");
            return Verdict::Reject(
                "the message contains a word this community does not allow".into(),
            );
        }
        Verdict::Rewrite(rebuild(&message.content, masked))
    }
}

fn with_caption(content: &Content, caption: String) -> Content {
    let media = |m: &Media| Media {
        caption: Some(caption.clone()),
        ..m.clone()
    };
    match content {
        Content::Image(m) => Content::Image(media(m)),
        Content::File(m) => Content::File(media(m)),
        Content::Voice(m) => Content::Voice(media(m)),
        Content::Text(_) => Content::Text(caption),
    }
}

/// `text` with every listed word's letters replaced by `*`.
fn mask(text: &str, words: &[String]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if words.iter().any(|w| *w == word.to_lowercase()) {
            out.extend(word.chars().map(|_| '*'));
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_alphanumeric() {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

export!(WordList);
