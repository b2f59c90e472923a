/// <reference path="./switchboard-plugin-types.d.ts" />
declare module 'switchboard:plugin/moderation@0.4.0' {
  export function moderate(message: Message): Verdict;
  export function moderateReaction(reaction: Reaction): ReactionVerdict;
  export function moderatePreview(preview: Preview): PreviewVerdict;
  export type Content = import('switchboard:plugin/types@0.4.0').Content;
  export type ConversationKind = import('switchboard:plugin/types@0.4.0').ConversationKind;
  export interface Message {
    tenant: string,
    conversationId: string,
    conversationKind: ConversationKind,
    memberCount: number,
    sender: string,
    content: Content,
    /**
     * The `message-id` this message replies to (quotes), if any.
     */
    replyTo?: string,
    /**
     * The `message-id` of the thread's root, for a message in a
     * thread.
     */
    threadId?: string,
    /**
     * The user ids it mentions, and whether it mentions everyone.
     */
    mentions: Array<string>,
    mentionAll: boolean,
    /**
     * The message's own `custom` fields, a JSON object as compact
     * JSON text, if it has any.
     */
    custom?: string,
  }
  export type Verdict = VerdictAllow | VerdictReject | VerdictRewrite;
  /**
   * Store the message as sent.
   */
  export interface VerdictAllow {
    tag: 'allow',
  }
  /**
   * Store nothing; the sender gets `rejected_by_policy` with this reason.
   */
  export interface VerdictReject {
    tag: 'reject',
    val: string,
  }
  /**
   * Store this content instead (reply, thread, mentions and the
   * `custom` fields stay). A custom content's `data` must be a JSON
   * object, or the call counts as failed.
   */
  export interface VerdictRewrite {
    tag: 'rewrite',
    val: Content,
  }
  /**
   * A reaction being added to a message. Removing one is never
   * moderated.
   */
  export interface Reaction {
    tenant: string,
    conversationId: string,
    conversationKind: ConversationKind,
    memberCount: number,
    /**
     * The user who reacts.
     */
    sender: string,
    /**
     * The message reacted to.
     */
    messageId: string,
    /**
     * The emoji: 1 to 32 characters, no whitespace or control ones.
     */
    emoji: string,
  }
  export type ReactionVerdict = ReactionVerdictAllow | ReactionVerdictReject;
  /**
   * Store the reaction.
   */
  export interface ReactionVerdictAllow {
    tag: 'allow',
  }
  /**
   * Store nothing; the sender gets `rejected_by_policy` with this reason.
   */
  export interface ReactionVerdictReject {
    tag: 'reject',
    val: string,
  }
  /**
   * A link preview's image: what it is, never its bytes (the server
   * fetched it and keeps it; a plugin cannot name another).
   */
  export interface PreviewImage {
    /**
     * `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
     */
    mime: string,
    size: bigint,
  }
  /**
   * The card of one link, as the server made it from the page.
   */
  export interface LinkPreview {
    /**
     * The link as the message's text has it.
     */
    url: string,
    /**
     * From the page's Open Graph tags, else its Twitter card tags,
     * else its `<title>` and description: one line each, at most
     * 300, 1000 and 100 characters.
     */
    title?: string,
    description?: string,
    siteName?: string,
    image?: PreviewImage,
  }
  /**
   * A stored message's link preview, before the members see it. Asked
   * once per card and message, after the message's `ack`: the
   * message is stored whatever the verdict.
   */
  export interface Preview {
    tenant: string,
    conversationId: string,
    conversationKind: ConversationKind,
    memberCount: number,
    /**
     * Who sent the message.
     */
    sender: string,
    /**
     * The message the card belongs to.
     */
    messageId: string,
    card: LinkPreview,
  }
  export type PreviewVerdict = PreviewVerdictAllow | PreviewVerdictDrop | PreviewVerdictRewrite;
  /**
   * Show the card as made.
   */
  export interface PreviewVerdictAllow {
    tag: 'allow',
  }
  /**
   * Show no card for this link.
   */
  export interface PreviewVerdictDrop {
    tag: 'drop',
  }
  /**
   * Show this card instead. Its `url` stays the message's link,
   * whatever it says; the texts are cut to their bounds (blank
   * ones are none); the image stays if the card had one and the
   * rewrite keeps `image` (its fields are not read), and goes if
   * the rewrite has none: a plugin cannot add or change an image.
   * A card left with nothing to show is dropped.
   */
  export interface PreviewVerdictRewrite {
    tag: 'rewrite',
    val: LinkPreview,
  }
}
