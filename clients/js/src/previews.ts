// Link previews (v1.3): the cards the server adds to a text message's
// first links after its ack. They come as `message_updated` with the
// whole message: the message is not edited (`edited_at` stays as it
// was), so such an update is no edit's answer. A card's image is media
// of the conversation: `rest.download(card.image.blob_ref)`.
import type { LinkPreview, Message } from "./protocol.js";

/** A message's link previews (v1.3), in the order of its links; `[]`
 * while it has none (none yet, none found, sent with `previews: false`,
 * or the tenant's previews are off). */
export function previewsOf(message: Pick<Message, "previews"> | undefined): LinkPreview[] {
  return message?.previews ?? [];
}

/** Whether `message` (a `message_updated`) is `known` with other link
 * previews and neither edited nor deleted since (an edit always moves
 * `edited_at`): the server added its cards, which answers no edit or
 * delete of it. */
export function onlyPreviewsChanged(known: Message | undefined, message: Message): boolean {
  return (
    known !== undefined &&
    (known.edited_at ?? null) === (message.edited_at ?? null) &&
    (known.deleted_at ?? null) === (message.deleted_at ?? null) &&
    JSON.stringify(previewsOf(known)) !== JSON.stringify(previewsOf(message))
  );
}
