//! `pull_backlog`: a replay read page by page as the client takes it,
//! never held whole, one at a time per connection.

use switchboard_protocol::{ConversationId, ErrorCode, ServerFrame};
use switchboard_store::InboxCursor;

use super::Connection;
use crate::error::ApiError;
use crate::outbox::Outbound;

impl Connection {
    pub(super) fn pull_backlog(
        &mut self,
        request: &'static str,
        conversation_id: Option<ConversationId>,
        since_seq: Option<u64>,
        limit: Option<u32>,
    ) {
        let Ok(permit) = self.backlog.clone().try_acquire_owned() else {
            let busy = ApiError::new(
                ErrorCode::RateLimited,
                "a pull_backlog is already running on this connection; wait for its backlog_done",
            );
            self.reply(Outbound::frame(&busy.answering(
                request,
                None,
                conversation_id.as_ref().map(|c| c.as_str()),
            )));
            return;
        };
        let limits = &self.gw.config.limits;
        let limit = limit
            .map(|l| l as usize)
            .unwrap_or(limits.backlog_default_limit)
            .clamp(1, limits.backlog_max_limit);
        // Pages small enough that one page of the largest messages is about
        // half the outbound budget: the replay is read as the client takes
        // it, never held whole.
        let largest = limits
            .content
            .max_ciphertext_bytes
            .max(limits.content.max_text_bytes);
        let page = (limits.outbound_queue_bytes / 2 / largest.max(1)).clamp(1, 100);
        let (gw, tx, id) = (self.gw.clone(), self.tx.clone(), self.id.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let since = since_seq.unwrap_or(0);
            let fail = |e: switchboard_store::StoreError| {
                Outbound::frame(&ApiError::from(e).answering(
                    request,
                    None,
                    conversation_id.as_ref().map(|c| c.as_str()),
                ))
            };
            let mut sent = 0usize;
            // A conversation's replay starts at the reader's first seq
            // (v1.3: nothing from before they joined).
            let first = match &conversation_id {
                Some(c) => {
                    match crate::floors::first_seq(gw.store.as_ref(), &id.tenant, &id.user, c).await
                    {
                        Ok(first) => first,
                        Err(e) => {
                            let _ = tx.send(fail(e)).await;
                            return;
                        }
                    }
                }
                None => 1,
            };
            let mut last_seq = since.max(first - 1);
            let mut cursor: Option<InboxCursor> = None;
            let more = loop {
                // The last page asks for one more than it needs: whether the
                // store had it says whether the limit cut the replay short.
                let room = limit - sent;
                let want = if room <= page { room + 1 } else { page };
                let result = match &conversation_id {
                    Some(c) => {
                        gw.store
                            .replay(&id.tenant, c, &id.user, last_seq, want)
                            .await
                    }
                    None => {
                        gw.store
                            .inbox(&id.tenant, &id.user, &id.device, cursor.clone(), want)
                            .await
                    }
                };
                let mut messages = match result {
                    Ok(m) => m,
                    Err(e) => {
                        let _ = tx.send(fail(e)).await;
                        return;
                    }
                };
                let exhausted = messages.len() < want;
                let cut = messages.len() > room;
                messages.truncate(room);
                // Where the page ends, shown or not: the next read starts
                // after the messages the reader may not see too.
                let page_end = messages.last().map(|m| (m.seq, InboxCursor::of(m)));
                if let Err(e) = crate::blocks::as_seen_by(
                    gw.store.as_ref(),
                    &id.tenant,
                    &id.user,
                    &mut messages,
                )
                .await
                {
                    let _ = tx.send(fail(e)).await;
                    return;
                }
                for m in messages {
                    sent += 1;
                    let out = Outbound::frame(&ServerFrame::Message { message: m });
                    if tx.send_paced(out).await.is_err() {
                        return;
                    }
                }
                if let Some((seq, end)) = page_end {
                    last_seq = seq;
                    cursor = Some(end);
                }
                if cut {
                    break true;
                }
                if exhausted || sent >= limit {
                    break false;
                }
            };
            let last_seq = match &conversation_id {
                Some(_) => last_seq,
                None => 0,
            };
            let _ = tx
                .send_paced(Outbound::frame(&ServerFrame::BacklogDone {
                    conversation_id,
                    last_seq,
                    more,
                }))
                .await;
        });
    }
}
