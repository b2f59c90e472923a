//! A moderator written with the SDK: rejects a message written all in
//! capitals, longer than `min_chars` (default 8).

use switchboard_plugin::moderation::{Message, Moderator, Verdict};

struct NoShouting;

impl Moderator for NoShouting {
    fn moderate(message: Message) -> Verdict {
        let min = switchboard_plugin::config_parse("min_chars").unwrap_or(8);
        match message.text() {
            Some(t) if t.chars().count() > min && !t.chars().any(char::is_lowercase) => {
                Verdict::reject("please do not shout")
            }
            _ => Verdict::Allow,
        }
    }
}

switchboard_plugin::moderator!(NoShouting);
