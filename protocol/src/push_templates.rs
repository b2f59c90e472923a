//! Push templates (v1.3): what a tenant's pushes say, per kind, in the
//! tenant's own words (`PUT /v1/admin/push/templates`).
//!
//! A template is text with placeholders: `{sender}`, `{conversation}`
//! and `{text}`; `{{` and `}}` are a literal brace. Anything else in
//! braces is refused when the templates are set, so a template that is
//! stored always renders.

use serde::{Deserialize, Serialize};

/// The most characters of a template's title, and of its body.
pub const MAX_TITLE_CHARS: usize = 100;
pub const MAX_BODY_CHARS: usize = 500;

/// What a push is about, for one recipient: the first that applies of a
/// mention of them (or of all), a reply to one of their messages (or in
/// a thread they started), a reaction to one of their messages, else a
/// message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum PushKind {
    Message,
    Mention,
    Reply,
    Reaction,
}

/// One kind's title and body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PushTemplate {
    /// 1 to 100 characters.
    pub title: String,
    /// At most 500 characters; absent: a push with a title only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

/// A tenant's templates; a kind without one keeps the default wording
/// (the sender as the title, the tenant's preview as the body).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PushTemplates {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<PushTemplate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mention: Option<PushTemplate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<PushTemplate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reaction: Option<PushTemplate>,
}

/// Why templates are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("the {0} template's title is 1 to {MAX_TITLE_CHARS} characters")]
    Title(&'static str),
    #[error("the {0} template's body is at most {MAX_BODY_CHARS} characters")]
    Body(&'static str),
    #[error(
        "the {kind} template holds {found:?}: placeholders are {{sender}}, {{conversation}} and {{text}}; write {{{{ and }}}} for a brace"
    )]
    Placeholder { kind: &'static str, found: String },
}

/// What the placeholders stand for in one push.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushValues {
    pub sender: String,
    pub conversation: String,
    pub text: String,
}

/// One piece of a template.
enum Piece<'a> {
    Literal(&'a str),
    Sender,
    Conversation,
    Text,
}

/// The pieces of `template`, or what in it is no placeholder.
fn pieces(template: &str) -> Result<Vec<Piece<'_>>, String> {
    let mut out = Vec::new();
    let mut rest = template;
    while !rest.is_empty() {
        let Some(at) = rest.find(['{', '}']) else {
            out.push(Piece::Literal(rest));
            break;
        };
        if at > 0 {
            out.push(Piece::Literal(&rest[..at]));
        }
        rest = &rest[at..];
        if let Some(after) = rest.strip_prefix("{{") {
            out.push(Piece::Literal("{"));
            rest = after;
        } else if let Some(after) = rest.strip_prefix("}}") {
            out.push(Piece::Literal("}"));
            rest = after;
        } else if rest.starts_with('}') {
            return Err("}".into());
        } else {
            let end = rest.find('}').ok_or_else(|| rest.to_owned())?;
            out.push(match &rest[..=end] {
                "{sender}" => Piece::Sender,
                "{conversation}" => Piece::Conversation,
                "{text}" => Piece::Text,
                other => return Err(other.to_owned()),
            });
            rest = &rest[end + 1..];
        }
    }
    Ok(out)
}

/// `template` with its placeholders filled in. A template that does not
/// parse (never one that was stored) renders as it is written.
pub fn render(template: &str, values: &PushValues) -> String {
    let Ok(pieces) = pieces(template) else {
        return template.to_owned();
    };
    let mut out = String::with_capacity(template.len() + values.text.len());
    for piece in pieces {
        out.push_str(match piece {
            Piece::Literal(s) => s,
            Piece::Sender => &values.sender,
            Piece::Conversation => &values.conversation,
            Piece::Text => &values.text,
        });
    }
    out
}

impl PushTemplate {
    fn check(&self, kind: &'static str) -> Result<(), TemplateError> {
        let title = self.title.chars().count();
        if title == 0 || title > MAX_TITLE_CHARS {
            return Err(TemplateError::Title(kind));
        }
        if let Some(body) = &self.body
            && body.chars().count() > MAX_BODY_CHARS
        {
            return Err(TemplateError::Body(kind));
        }
        for text in std::iter::once(&self.title).chain(&self.body) {
            pieces(text).map_err(|found| TemplateError::Placeholder { kind, found })?;
        }
        Ok(())
    }

    /// The title and body of one push.
    pub fn render(&self, values: &PushValues) -> (String, Option<String>) {
        (
            render(&self.title, values),
            self.body.as_deref().map(|b| render(b, values)),
        )
    }
}

impl PushTemplates {
    /// Checks every template: its lengths and its placeholders.
    pub fn check(&self) -> Result<(), TemplateError> {
        for (kind, template) in self.each() {
            template.check(kind)?;
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.each().next().is_none()
    }

    /// The template of `kind`, if the tenant set one.
    pub fn of(&self, kind: PushKind) -> Option<&PushTemplate> {
        match kind {
            PushKind::Message => self.message.as_ref(),
            PushKind::Mention => self.mention.as_ref(),
            PushKind::Reply => self.reply.as_ref(),
            PushKind::Reaction => self.reaction.as_ref(),
        }
    }

    fn each(&self) -> impl Iterator<Item = (&'static str, &PushTemplate)> {
        [
            ("message", &self.message),
            ("mention", &self.mention),
            ("reply", &self.reply),
            ("reaction", &self.reaction),
        ]
        .into_iter()
        .filter_map(|(kind, t)| t.as_ref().map(|t| (kind, t)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values() -> PushValues {
        PushValues {
            sender: "Ann".into(),
            conversation: "Trip".into(),
            text: "see you {soon}".into(),
        }
    }

    #[test]
    fn placeholders_are_filled_and_braces_escaped() {
        assert_eq!(
            render("{sender} in {conversation}: {text}", &values()),
            "Ann in Trip: see you {soon}"
        );
        assert_eq!(render("{{sender}} }}", &values()), "{sender} }");
        assert_eq!(render("no placeholder", &values()), "no placeholder");
        assert_eq!(render("", &values()), "");
    }

    #[test]
    fn only_known_placeholders_and_bounded_lengths_are_taken() {
        let t = |title: &str, body: Option<&str>| PushTemplates {
            mention: Some(PushTemplate {
                title: title.into(),
                body: body.map(str::to_owned),
            }),
            ..Default::default()
        };
        assert_eq!(t("{sender}", Some("{text}")).check(), Ok(()));
        for bad in ["{name}", "{sender", "}", "{ sender }", "{}"] {
            assert!(
                matches!(
                    t(bad, None).check(),
                    Err(TemplateError::Placeholder {
                        kind: "mention",
                        ..
                    })
                ),
                "{bad}"
            );
        }
        let at_most = "t".repeat(MAX_TITLE_CHARS);
        assert_eq!(t(&at_most, None).check(), Ok(()));
        assert_eq!(
            t(&format!("{at_most}t"), None).check(),
            Err(TemplateError::Title("mention"))
        );
        assert_eq!(t("", None).check(), Err(TemplateError::Title("mention")));
        let body = "b".repeat(MAX_BODY_CHARS);
        assert_eq!(t("x", Some(&body)).check(), Ok(()));
        assert_eq!(
            t("x", Some(&format!("{body}b"))).check(),
            Err(TemplateError::Body("mention"))
        );
        assert!(PushTemplates::default().is_empty());
        assert!(!t("x", None).is_empty());
    }
}
