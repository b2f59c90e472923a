/// <reference path="./switchboard-plugin-types.d.ts" />
declare module 'switchboard:plugin/moderation@0.3.0' {
  export function moderate(message: Message): Verdict;
  export function moderateReaction(reaction: Reaction): ReactionVerdict;
  export type Content = import('switchboard:plugin/types@0.3.0').Content;
  export type ConversationKind = import('switchboard:plugin/types@0.3.0').ConversationKind;
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
}
