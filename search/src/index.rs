//! The index itself: one tantivy index per search replica, a document
//! per message with searchable text, keyed by (tenant, conversation,
//! seq). What it has applied of the feed is written with each commit
//! (its payload), with the format it was built in: an index of another
//! format is rebuilt.

use std::ops::Bound;
use std::path::Path;

use serde::{Deserialize, Serialize};
use switchboard_nats::search::{IndexOp, SearchHit};
use switchboard_protocol::{ConversationId, MessageId, TenantId};
use tantivy::collector::TopDocs;
use tantivy::query::{
    BooleanQuery, Occur, PhraseQuery, Query, QueryClone, RangeQuery, TermQuery, TermSetQuery,
};
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TEXT, Value,
};
use tantivy::snippet::SnippetGenerator;
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term, doc};

use crate::deadline::{Deadline, Within};
use crate::error::SearchError;
use crate::query::{MAX_PREFIX_TERMS, Part, QueryError};

/// The index's format: documents, fields and tokenizing. A change makes
/// every replica rebuild its index from the store at its next start.
pub const FORMAT: u32 = 1;

/// What a commit records besides the documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    pub format: u32,
    /// The last `SB_INDEX` stream sequence applied (0: none).
    pub position: u64,
}

#[derive(Clone, Copy)]
struct Fields {
    /// `<tenant>\u{1f}<conversation>\u{1f}<seq>`: one document per message.
    key: Field,
    /// `<tenant>\u{1f}<conversation>`: the conversations a query may see.
    conversation: Field,
    /// `<tenant>\u{1f}<conversation>\u{1f}<sender>`: an erasure's removal.
    sender: Field,
    seq: Field,
    message_id: Field,
    created_ms: Field,
    text: Field,
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let fields = Fields {
        key: b.add_text_field("key", STRING),
        conversation: b.add_text_field("conversation", STRING | STORED),
        sender: b.add_text_field("sender", STRING),
        seq: b.add_u64_field("seq", STORED),
        message_id: b.add_u64_field("message_id", STORED),
        created_ms: b.add_i64_field("created_ms", INDEXED | FAST),
        // Stored for the highlights.
        text: b.add_text_field("text", TEXT | STORED),
    };
    (b.build(), fields)
}

const SEP: char = '\u{1f}';

fn conversation_key(tenant: &TenantId, conversation: &ConversationId) -> String {
    format!("{tenant}{SEP}{conversation}")
}

pub struct SearchIndex {
    writer: IndexWriter<TantivyDocument>,
    searching: Searching,
    fields: Fields,
    applied: Applied,
    /// Changes since the last commit.
    dirty: usize,
}

/// The read side: queries run on it without waiting for the writer.
#[derive(Clone)]
pub struct Searching {
    reader: IndexReader,
    fields: Fields,
}

/// A new index, or the one at `dir`: `None` for `applied` when it was
/// made anew (missing, or of another format), so it must be rebuilt.
pub fn open(dir: &Path, memory_bytes: usize) -> Result<(SearchIndex, bool), SearchError> {
    let (schema, fields) = schema();
    let existing = Index::open_in_dir(dir).ok().and_then(|index| {
        let applied = index
            .load_metas()
            .ok()?
            .payload
            .and_then(|p| serde_json::from_str::<Applied>(&p).ok())?;
        (applied.format == FORMAT && index.schema() == schema).then_some((index, applied))
    });
    let (index, applied, fresh) = match existing {
        Some((index, applied)) => (index, applied, false),
        None => {
            // Only what is an index (or nothing) is replaced: a `dir`
            // set by mistake to another directory is left alone.
            let is_index = dir.join("meta.json").exists();
            let empty = std::fs::read_dir(dir).map_or(true, |mut d| d.next().is_none());
            if !is_index && !empty {
                return Err(SearchError::NotAnIndex(dir.display().to_string()));
            }
            if dir.exists() {
                std::fs::remove_dir_all(dir).map_err(SearchError::Dir)?;
            }
            std::fs::create_dir_all(dir).map_err(SearchError::Dir)?;
            let index = Index::create_in_dir(dir, schema)?;
            let applied = Applied {
                format: FORMAT,
                position: 0,
            };
            (index, applied, true)
        }
    };
    let writer = index.writer_with_num_threads(1, memory_bytes.max(15_000_000))?;
    let reader = index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .try_into()?;
    Ok((
        SearchIndex {
            writer,
            searching: Searching { reader, fields },
            fields,
            applied,
            dirty: 0,
        },
        fresh,
    ))
}

impl SearchIndex {
    pub fn applied(&self) -> Applied {
        self.applied
    }

    pub fn dirty(&self) -> usize {
        self.dirty
    }

    pub fn searching(&self) -> Searching {
        self.searching.clone()
    }

    /// Documents in the index, deleted ones not counted.
    pub fn documents(&self) -> u64 {
        self.searching.reader.searcher().num_docs()
    }

    /// Applies one change (not searchable before the next commit).
    pub fn apply(&mut self, op: &IndexOp) -> Result<(), SearchError> {
        let f = &self.fields;
        match op {
            IndexOp::Put {
                tenant,
                conversation_id,
                seq,
                message_id,
                sender,
                created_at,
                text,
                ..
            } => {
                let conversation = conversation_key(tenant, conversation_id);
                let key = format!("{conversation}{SEP}{seq}");
                self.writer.delete_term(Term::from_field_text(f.key, &key));
                self.writer.add_document(doc!(
                    f.key => key,
                    f.sender => format!("{conversation}{SEP}{sender}"),
                    f.conversation => conversation,
                    f.seq => *seq,
                    f.message_id => message_id.as_u64(),
                    f.created_ms => created_at.unix_ms(),
                    f.text => text.as_str(),
                ))?;
            }
            IndexOp::Remove {
                tenant,
                conversation_id,
                seqs,
            } => {
                let conversation = conversation_key(tenant, conversation_id);
                for seq in seqs {
                    let key = format!("{conversation}{SEP}{seq}");
                    self.writer.delete_term(Term::from_field_text(f.key, &key));
                }
            }
            IndexOp::RemoveBefore {
                tenant,
                conversation_id,
                before,
            } => {
                let conversation = conversation_key(tenant, conversation_id);
                let older = BooleanQuery::new(vec![
                    (Occur::Must, term(f.conversation, &conversation)),
                    (
                        Occur::Must,
                        Box::new(RangeQuery::new(
                            Bound::Unbounded,
                            Bound::Excluded(Term::from_field_i64(f.created_ms, before.unix_ms())),
                        )),
                    ),
                ]);
                self.writer.delete_query(Box::new(older))?;
            }
            IndexOp::RemoveSender {
                tenant,
                conversation_id,
                sender,
            } => {
                let conversation = conversation_key(tenant, conversation_id);
                let key = format!("{conversation}{SEP}{sender}");
                self.writer
                    .delete_term(Term::from_field_text(f.sender, &key));
            }
        }
        self.dirty += 1;
        Ok(())
    }

    /// Drops what was applied since the last commit.
    pub fn rollback(&mut self) -> Result<(), SearchError> {
        self.writer.rollback()?;
        self.dirty = 0;
        Ok(())
    }

    /// Forgets every document (before a rebuild: what went while the
    /// replica was behind must not stay).
    pub fn clear(&mut self) -> Result<(), SearchError> {
        self.writer.delete_all_documents()?;
        self.dirty += 1;
        Ok(())
    }

    /// Makes what was applied searchable and durable, recording the feed
    /// position it reaches.
    pub fn commit(&mut self, position: u64) -> Result<(), SearchError> {
        let applied = Applied {
            format: FORMAT,
            position,
        };
        let payload = serde_json::to_string(&applied).map_err(SearchError::Payload)?;
        let mut prepared = self.writer.prepare_commit()?;
        prepared.set_payload(&payload);
        prepared.commit()?;
        self.searching.reader.reload()?;
        self.applied = applied;
        self.dirty = 0;
        Ok(())
    }
}

impl Searching {
    /// The best matches of `q` among the conversations named, from the
    /// `offset`th on; and whether there may be more.
    pub fn search(
        &self,
        tenant: &TenantId,
        conversations: &[ConversationId],
        q: &str,
        limit: usize,
        offset: usize,
        deadline: &Deadline,
    ) -> Result<(Vec<SearchHit>, bool), SearchError> {
        self.search_within(tenant, conversations, q, limit, offset, deadline)
            .map_err(|e| match e {
                SearchError::Index(_) if deadline.passed() => SearchError::TimedOut,
                e => e,
            })
    }

    fn search_within(
        &self,
        tenant: &TenantId,
        conversations: &[ConversationId],
        q: &str,
        limit: usize,
        offset: usize,
        deadline: &Deadline,
    ) -> Result<(Vec<SearchHit>, bool), SearchError> {
        let f = &self.fields;
        if conversations.is_empty() || q.trim().is_empty() {
            return Ok((Vec::new(), false));
        }
        let parts = crate::query::parse(q)?;
        let searcher = self.reader.searcher();
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::with_capacity(parts.len());
        for part in &parts {
            let words = |ws: &[String]| -> Vec<Term> {
                ws.iter()
                    .map(|w| Term::from_field_text(f.text, w))
                    .collect()
            };
            let clause: Box<dyn Query> = match part {
                Part::Word(w) => Box::new(TermQuery::new(
                    Term::from_field_text(f.text, w),
                    IndexRecordOption::WithFreqs,
                )),
                Part::Phrase(ws) => Box::new(PhraseQuery::new(words(ws))),
                Part::Prefix(p) => {
                    let expanded = expand_prefix(&searcher, f.text, p, deadline)?;
                    if expanded.is_empty() {
                        return Ok((Vec::new(), false));
                    }
                    Box::new(TermSetQuery::new(expanded))
                }
            };
            clauses.push((Occur::Must, clause));
        }
        if clauses.is_empty() {
            return Ok((Vec::new(), false));
        }
        let text = BooleanQuery::new(clauses);
        let allowed = TermSetQuery::new(
            conversations
                .iter()
                .map(|c| Term::from_field_text(f.conversation, &conversation_key(tenant, c))),
        );
        let query = BooleanQuery::new(vec![
            (Occur::Must, text.box_clone()),
            (Occur::Must, Box::new(allowed)),
        ]);
        // One more than asked: whether there is a next page.
        let top = searcher.search(
            &query,
            &Within {
                inner: TopDocs::with_limit(limit + 1).and_offset(offset),
                deadline,
            },
        )?;
        let more = top.len() > limit;
        let mut snippets = SnippetGenerator::create(&searcher, &text, f.text)?;
        snippets.set_max_num_chars(160);
        let mut hits = Vec::with_capacity(top.len().min(limit));
        for (score, address) in top.into_iter().take(limit) {
            let doc: TantivyDocument = searcher.doc(address)?;
            let stored = doc
                .get_first(f.conversation)
                .and_then(|v| v.as_str().map(str::to_owned));
            let (Some(stored), Some(seq), Some(id)) = (
                stored,
                doc.get_first(f.seq).and_then(|v| v.as_u64()),
                doc.get_first(f.message_id).and_then(|v| v.as_u64()),
            ) else {
                continue;
            };
            let Some(conversation) = stored
                .split_once(SEP)
                .and_then(|(_, c)| ConversationId::new(c).ok())
            else {
                continue;
            };
            let snippet = snippets.snippet_from_doc(&doc);
            let highlights = if snippet.is_empty() {
                Vec::new()
            } else {
                vec![snippet.to_html()]
            };
            hits.push(SearchHit {
                conversation_id: conversation,
                seq,
                message_id: MessageId::from_u64(id),
                score,
                highlights,
            });
        }
        Ok((hits, more))
    }
}

/// The indexed words that start with `prefix`, across the segments, in
/// the term dictionary's order: the walk stops at the first word past the
/// prefix, or refuses past `MAX_PREFIX_TERMS` words.
fn expand_prefix(
    searcher: &tantivy::Searcher,
    field: Field,
    prefix: &str,
    deadline: &Deadline,
) -> Result<Vec<Term>, SearchError> {
    let mut found = std::collections::BTreeSet::new();
    for segment in searcher.segment_readers() {
        deadline.check()?;
        let index = segment.inverted_index(field)?;
        let mut stream = index
            .terms()
            .range()
            .ge(prefix.as_bytes())
            .into_stream()
            .map_err(tantivy::TantivyError::from)?;
        while stream.advance() {
            let key = stream.key();
            if !key.starts_with(prefix.as_bytes()) {
                break;
            }
            found.insert(key.to_vec());
            if found.len() > MAX_PREFIX_TERMS {
                return Err(QueryError::PrefixTooBroad(prefix.to_owned()).into());
            }
        }
    }
    Ok(found
        .into_iter()
        .filter_map(|k| String::from_utf8(k).ok())
        .map(|w| Term::from_field_text(field, &w))
        .collect())
}

fn term(field: Field, value: &str) -> Box<dyn Query> {
    Box::new(TermQuery::new(
        Term::from_field_text(field, value),
        IndexRecordOption::Basic,
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use switchboard_protocol::{Timestamp, UserId};

    use super::*;

    fn put(
        tenant: &str,
        conversation: &str,
        seq: u64,
        sender: &str,
        at: i64,
        text: &str,
    ) -> IndexOp {
        IndexOp::Put {
            tenant: TenantId::new(tenant).unwrap(),
            conversation_id: ConversationId::new(conversation).unwrap(),
            seq,
            message_id: MessageId::from_u64(seq * 1000),
            sender: UserId::new(sender).unwrap(),
            created_at: Timestamp::from_unix_ms(at),
            text: text.to_owned(),
            expires_at: None,
        }
    }

    fn forever() -> Deadline {
        Deadline::new(std::time::Instant::now() + std::time::Duration::from_secs(3600))
    }

    fn found(index: &SearchIndex, tenant: &str, conversations: &[&str], q: &str) -> Vec<u64> {
        let conversations: Vec<_> = conversations
            .iter()
            .map(|c| ConversationId::new(*c).unwrap())
            .collect();
        let (hits, _) = index
            .searching()
            .search(
                &TenantId::new(tenant).unwrap(),
                &conversations,
                q,
                50,
                0,
                &forever(),
            )
            .unwrap();
        let mut seqs: Vec<u64> = hits.iter().map(|h| h.seq).collect();
        seqs.sort();
        seqs
    }

    #[test]
    fn a_query_sees_only_the_conversations_and_tenant_it_names() {
        let dir = tempfile::tempdir().unwrap();
        let (mut index, fresh) = open(dir.path(), 15_000_000).unwrap();
        assert!(fresh);
        for op in [
            put("t", "a", 1, "u", 1, "lunch at noon"),
            put("t", "b", 1, "u", 1, "lunch tomorrow"),
            put("other", "a", 1, "u", 1, "lunch elsewhere"),
        ] {
            index.apply(&op).unwrap();
        }
        index.commit(3).unwrap();
        assert_eq!(found(&index, "t", &["a"], "lunch"), [1]);
        assert_eq!(found(&index, "t", &["a", "b"], "lunch").len(), 2);
        assert_eq!(found(&index, "t", &[], "lunch"), Vec::<u64>::new());
        assert_eq!(found(&index, "other", &["a", "b"], "lunch").len(), 1);
        // All the words, by default.
        assert_eq!(found(&index, "t", &["a", "b"], "lunch noon"), [1]);
        // Anything but letters and digits separates words.
        assert_eq!(found(&index, "t", &["a"], "(lunch) +noon!").len(), 1);
    }

    #[test]
    fn the_query_language_is_words_phrases_and_prefixes_only() {
        let dir = tempfile::tempdir().unwrap();
        let (mut index, _) = open(dir.path(), 15_000_000).unwrap();
        for op in [
            put("t", "c", 1, "u", 1, "switchboard ships today"),
            put("t", "c", 2, "u", 1, "today the board switches"),
            put("t", "c", 3, "u", 1, "from a to z"),
        ] {
            index.apply(&op).unwrap();
        }
        index.commit(1).unwrap();
        assert_eq!(found(&index, "t", &["c"], "\"ships today\""), [1]);
        assert_eq!(
            found(&index, "t", &["c"], "\"today ships\""),
            Vec::<u64>::new()
        );
        assert_eq!(found(&index, "t", &["c"], "switch*"), [1, 2]);
        assert_eq!(found(&index, "t", &["c"], "SWITCH* today"), [1, 2]);
        assert_eq!(found(&index, "t", &["c"], "nothing*"), Vec::<u64>::new());
        // The engine's range syntax is only words here: a range over
        // every term is never walked.
        assert_eq!(found(&index, "t", &["c"], "[a TO z]"), [3]);
        assert_eq!(
            found(&index, "t", &["c"], "text:[a TO z]"),
            Vec::<u64>::new()
        );
        // A prefix standing for more than MAX_PREFIX_TERMS words, of any
        // tenant on the shard, is refused; at the bound it is not.
        for i in 0..MAX_PREFIX_TERMS as u64 {
            let text = format!("wordy{i:03}");
            index
                .apply(&put("other", "c", 10 + i, "u", 1, &text))
                .unwrap();
        }
        index.commit(2).unwrap();
        let t = TenantId::new("t").unwrap();
        let c = [ConversationId::new("c").unwrap()];
        let search = |q: &str| index.searching().search(&t, &c, q, 50, 0, &forever());
        assert!(
            search("wordy*").is_ok(),
            "{} words is the bound",
            MAX_PREFIX_TERMS
        );
        index
            .apply(&put("other", "c", 1000, "u", 1, "wordy999"))
            .unwrap();
        index.commit(3).unwrap();
        let search = |q: &str| index.searching().search(&t, &c, q, 50, 0, &forever());
        assert!(matches!(
            search("wordy*"),
            Err(SearchError::Query(QueryError::PrefixTooBroad(_)))
        ));
        assert!(search("wordy00*").is_ok());
    }

    #[test]
    fn a_query_past_its_deadline_stops_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let (mut index, _) = open(dir.path(), 15_000_000).unwrap();
        for seq in 1..=3000 {
            index
                .apply(&put("t", "c", seq, "ann", 1, "common words here"))
                .unwrap();
        }
        index.commit(1).unwrap();
        let t = TenantId::new("t").unwrap();
        let c = [ConversationId::new("c").unwrap()];
        let gone = Deadline::new(std::time::Instant::now());
        for q in ["common", "comm*", "\"common words\""] {
            assert!(
                matches!(
                    index.searching().search(&t, &c, q, 50, 0, &gone),
                    Err(SearchError::TimedOut)
                ),
                "{q}"
            );
        }
        let (hits, more) = index
            .searching()
            .search(&t, &c, "common", 50, 0, &forever())
            .unwrap();
        assert_eq!((hits.len(), more), (50, true));
    }

    #[test]
    fn edits_removals_retention_and_erasure_leave_the_index() {
        let dir = tempfile::tempdir().unwrap();
        let (mut index, _) = open(dir.path(), 15_000_000).unwrap();
        let t = TenantId::new("t").unwrap();
        let c = ConversationId::new("c").unwrap();
        for op in [
            put("t", "c", 1, "ann", 100, "alpha one"),
            put("t", "c", 2, "bob", 200, "alpha two"),
            put("t", "c", 3, "ann", 300, "alpha three"),
            put("t", "c", 4, "bob", 400, "alpha four"),
        ] {
            index.apply(&op).unwrap();
        }
        index.commit(1).unwrap();
        assert_eq!(found(&index, "t", &["c"], "alpha"), [1, 2, 3, 4]);
        // An edit replaces the text.
        index
            .apply(&put("t", "c", 4, "bob", 400, "beta four"))
            .unwrap();
        index
            .apply(&IndexOp::Remove {
                tenant: t.clone(),
                conversation_id: c.clone(),
                seqs: vec![2],
            })
            .unwrap();
        index.commit(2).unwrap();
        assert_eq!(found(&index, "t", &["c"], "alpha"), [1, 3]);
        assert_eq!(found(&index, "t", &["c"], "beta"), [4]);
        index
            .apply(&IndexOp::RemoveBefore {
                tenant: t.clone(),
                conversation_id: c.clone(),
                before: Timestamp::from_unix_ms(150),
            })
            .unwrap();
        index
            .apply(&IndexOp::RemoveSender {
                tenant: t,
                conversation_id: c,
                sender: UserId::new("bob").unwrap(),
            })
            .unwrap();
        index.commit(3).unwrap();
        assert_eq!(found(&index, "t", &["c"], "alpha"), [3]);
        assert_eq!(found(&index, "t", &["c"], "beta"), Vec::<u64>::new());
        assert_eq!(index.documents(), 1);
    }

    #[test]
    fn a_reopened_index_goes_on_from_its_position() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (mut index, _) = open(dir.path(), 15_000_000).unwrap();
            index.apply(&put("t", "c", 1, "u", 1, "kept")).unwrap();
            index.commit(41).unwrap();
        }
        let (index, fresh) = open(dir.path(), 15_000_000).unwrap();
        assert!(!fresh);
        assert_eq!(index.applied().position, 41);
        assert_eq!(found(&index, "t", &["c"], "kept"), [1]);
        // Another format's index is made anew (and so rebuilt).
        drop(index);
        let stale = Applied {
            format: FORMAT + 1,
            position: 41,
        };
        {
            let (mut index, _) = open(dir.path(), 15_000_000).unwrap();
            let mut prepared = index.writer.prepare_commit().unwrap();
            prepared.set_payload(&serde_json::to_string(&stale).unwrap());
            prepared.commit().unwrap();
        }
        let (index, fresh) = open(dir.path(), 15_000_000).unwrap();
        assert!(fresh);
        assert_eq!(index.applied().position, 0);
        assert_eq!(found(&index, "t", &["c"], "kept"), Vec::<u64>::new());
    }

    #[test]
    fn ciphertext_and_system_messages_are_never_fed() {
        use switchboard_protocol::{Content, Message};
        let m = |content: Content| {
            Message::plain(
                MessageId::from_u64(1),
                ConversationId::new("c").unwrap(),
                1,
                UserId::new("u").unwrap(),
                switchboard_protocol::DeviceId::new("d").unwrap(),
                switchboard_protocol::ClientMsgId::new("m").unwrap(),
                Some(content),
                Timestamp::from_unix_ms(1),
            )
        };
        let t = TenantId::new("t").unwrap();
        let secret = m(Content::Ciphertext {
            algorithm: "olm".into(),
            body: "secret words".into(),
        });
        assert!(IndexOp::put_of(&t, &secret).is_none());
        let plain = m(Content::Text {
            text: "plain words".into(),
        });
        assert!(
            matches!(IndexOp::put_of(&t, &plain), Some(IndexOp::Put { text, .. }) if text == "plain words")
        );
        let mut deleted = plain;
        deleted.deleted_at = Some(Timestamp::from_unix_ms(2));
        assert!(IndexOp::put_of(&t, &deleted).is_none());
    }
}
