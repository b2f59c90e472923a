//! What a moderator's rewrite stores where the plugin was shown a
//! stand-in: a custom message or a poll, which older packages (and, for
//! polls, every package) see as text.

use switchboard_protocol::Content;
use switchboard_protocol::content::CustomContent;
use switchboard_protocol::poll::PollContent;

/// What a moderator's rewrite of `original` stores. A custom message
/// (v1.3) was shown as its text: a new text becomes its `fallback_text`
/// (`type` and `data` stay), the same text leaves it as sent. A poll
/// was shown as its question and a `- ` line per option: a text of that
/// shape rewrites the question and the options' texts (ids, settings
/// and order stay). Any other content replaces it.
pub(crate) fn rewritten(original: &Content, rewrite: Content) -> Content {
    match (original, rewrite) {
        (Content::Poll(p), Content::Text { text }) if text == p.text() => original.clone(),
        (Content::Poll(p), Content::Text { text }) => match poll_from_text(p, &text) {
            Some(poll) => Content::Poll(poll),
            None => Content::Text { text },
        },
        (Content::Custom(c), Content::Text { text }) if text == c.text() => original.clone(),
        (Content::Custom(c), Content::Text { text }) => Content::Custom(CustomContent {
            fallback_text: Some(text),
            ..c.clone()
        }),
        (_, rewrite) => rewrite,
    }
}

/// A poll's texts read back from `text` in the shape
/// [`PollContent::text`] writes: the last lines, one per option, each
/// after `- `; the lines before them the question.
fn poll_from_text(poll: &PollContent, text: &str) -> Option<PollContent> {
    let lines: Vec<&str> = text.split('\n').collect();
    let n = poll.options.len();
    let split = lines.len().checked_sub(n).filter(|&q| q > 0)?;
    let mut out = poll.clone();
    out.question = lines[..split].join("\n");
    for (option, line) in out.options.iter_mut().zip(&lines[split..]) {
        option.text = line.strip_prefix("- ")?.to_owned();
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_protocol::poll::PollOption;

    fn poll() -> PollContent {
        PollContent {
            question: "Where\nto eat?".into(),
            options: ["a", "b"]
                .iter()
                .map(|id| PollOption {
                    id: (*id).into(),
                    text: format!("place {id}"),
                })
                .collect(),
            multiple: true,
            anonymous: false,
            closes_at: None,
        }
    }

    #[test]
    fn a_poll_shown_as_text_takes_back_a_masked_text() {
        let original = Content::Poll(poll());
        let same = Content::Text {
            text: poll().text(),
        };
        assert_eq!(rewritten(&original, same), original);
        let masked = Content::Text {
            text: "Where\nto ***?\n- place a\n- ***** b".into(),
        };
        let Content::Poll(p) = rewritten(&original, masked) else {
            panic!("still a poll")
        };
        assert_eq!(p.question, "Where\nto ***?");
        assert_eq!(p.options[1].text, "***** b");
        assert_eq!((p.options[1].id.as_str(), p.multiple), ("b", true));
        // Another shape replaces the poll, as any other rewrite does.
        let other = Content::Text {
            text: "no poll here".into(),
        };
        assert_eq!(rewritten(&original, other.clone()), other);
    }
}
