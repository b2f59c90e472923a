//! The query language users get: words, `"phrases"` and prefixes
//! (`swi*`), all of which must match. Nothing else: no field names, no
//! ranges, no boolean operators, no regular expressions, no fuzziness.
//! The engine's own query parser would hand users all of those, and a
//! range over the text field walks every term of every tenant on the
//! shard.
//!
//! Every other character separates words, as the index's tokenizer does
//! (letters and digits make words, lowercased; words of 40 bytes or more
//! are not indexed, so they are dropped). So `text:[a TO z]` is the words
//! `text`, `a`, `to` and `z`, and `-spam OR ham` is `spam`, `or`, `ham`.
//!
//! What a query may cost is bounded here ([`MAX_TERMS`] parts,
//! [`MIN_PREFIX_CHARS`]) and where a prefix is expanded
//! ([`MAX_PREFIX_TERMS`], `index.rs`).

/// The most parts (words, phrases, prefixes) and phrase words in one query.
pub const MAX_TERMS: usize = 16;
/// The shortest prefix, in characters: a shorter one matches too much.
pub const MIN_PREFIX_CHARS: usize = 3;
/// The most indexed words one prefix may stand for.
pub const MAX_PREFIX_TERMS: usize = 64;
/// Words this long (bytes) or longer are not indexed (`RemoveLongFilter`).
const MAX_WORD_BYTES: usize = 40;

/// One part of a query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Word(String),
    /// Words that must follow each other.
    Phrase(Vec<String>),
    /// Any word that starts so.
    Prefix(String),
}

/// Why a query is refused; the message is the user's answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("a query may have at most {MAX_TERMS} words")]
    TooManyTerms,
    #[error("the prefix {0:?} is too short: give at least {MIN_PREFIX_CHARS} letters before *")]
    PrefixTooShort(String),
    #[error(
        "the prefix {0:?} matches too many words (more than {MAX_PREFIX_TERMS}): give more letters"
    )]
    PrefixTooBroad(String),
}

/// Reads `q`. A `"` opens a phrase and the next one closes it (an
/// unclosed phrase runs to the end); a word directly followed by `*` is a
/// prefix (outside phrases). An empty result matches nothing.
pub fn parse(q: &str) -> Result<Vec<Part>, QueryError> {
    let mut parts = Vec::new();
    let mut terms = 0;
    for (i, piece) in q.split('"').enumerate() {
        if i % 2 == 1 {
            let words: Vec<String> = words(piece).map(|(w, _)| w).collect();
            terms += words.len();
            match words.len() {
                0 => {}
                1 => parts.extend(words.into_iter().map(Part::Word)),
                _ => parts.push(Part::Phrase(words)),
            }
        } else {
            for (word, starred) in words(piece) {
                terms += 1;
                if starred {
                    if word.chars().count() < MIN_PREFIX_CHARS {
                        return Err(QueryError::PrefixTooShort(word));
                    }
                    parts.push(Part::Prefix(word));
                } else {
                    parts.push(Part::Word(word));
                }
            }
        }
        if terms > MAX_TERMS {
            return Err(QueryError::TooManyTerms);
        }
    }
    Ok(parts)
}

/// The words of `text`, lowercased, each with whether a `*` follows it.
fn words(text: &str) -> impl Iterator<Item = (String, bool)> + '_ {
    let mut rest = text;
    std::iter::from_fn(move || {
        loop {
            let start = rest.find(char::is_alphanumeric)?;
            let tail = &rest[start..];
            let end = tail
                .find(|c: char| !c.is_alphanumeric())
                .unwrap_or(tail.len());
            let word = tail[..end].to_lowercase();
            let starred = tail[end..].starts_with('*');
            rest = &tail[end..];
            if word.len() < MAX_WORD_BYTES {
                return Some((word, starred));
            }
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn word(w: &str) -> Part {
        Part::Word(w.into())
    }

    #[test]
    fn words_phrases_and_prefixes() {
        assert_eq!(
            parse(r#"Hello "big World" swi* x"#).unwrap(),
            vec![
                word("hello"),
                Part::Phrase(vec!["big".into(), "world".into()]),
                Part::Prefix("swi".into()),
                word("x"),
            ]
        );
        assert_eq!(parse(r#""one""#).unwrap(), vec![word("one")]);
        assert_eq!(
            parse(r#"an "unclosed phrase"#).unwrap(),
            vec![
                word("an"),
                Part::Phrase(vec!["unclosed".into(), "phrase".into()])
            ]
        );
        assert!(parse("  ** \"\" ").unwrap().is_empty());
    }

    #[test]
    fn the_engines_syntax_is_only_words() {
        assert_eq!(
            parse("text:[a TO z]").unwrap(),
            vec![word("text"), word("a"), word("to"), word("z")]
        );
        assert_eq!(
            parse("-spam OR +ham^3 (eggs~2) /re.*gex/").unwrap(),
            vec![
                word("spam"),
                word("or"),
                word("ham"),
                word("3"),
                word("eggs"),
                word("2"),
                word("re"),
                word("gex"),
            ]
        );
        // A star inside a phrase is a separator, not a prefix.
        assert_eq!(
            parse(r#""abc* def""#).unwrap(),
            vec![Part::Phrase(vec!["abc".into(), "def".into()])]
        );
    }

    #[test]
    fn bounds_hold_at_their_limit_and_just_past_it() {
        let at = vec!["w"; MAX_TERMS].join(" ");
        assert_eq!(parse(&at).unwrap().len(), MAX_TERMS);
        let past = vec!["w"; MAX_TERMS + 1].join(" ");
        assert_eq!(parse(&past), Err(QueryError::TooManyTerms));
        let phrase_past = format!("\"{past}\"");
        assert_eq!(parse(&phrase_past), Err(QueryError::TooManyTerms));
        assert_eq!(parse("abc*").unwrap(), vec![Part::Prefix("abc".into())]);
        assert_eq!(parse("ab*"), Err(QueryError::PrefixTooShort("ab".into())));
        let long = "a".repeat(MAX_WORD_BYTES);
        assert_eq!(parse(&format!("{long} b")).unwrap(), vec![word("b")]);
    }
}
