/// <reference path="./switchboard-plugin-types.d.ts" />
declare module 'switchboard:plugin/moderation@0.1.0' {
  export function moderate(message: Message): Verdict;
  export type Content = import('switchboard:plugin/types@0.1.0').Content;
  export type ConversationKind = import('switchboard:plugin/types@0.1.0').ConversationKind;
  export interface Message {
    tenant: string,
    conversationId: string,
    conversationKind: ConversationKind,
    memberCount: number,
    sender: string,
    content: Content,
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
   * Store this content instead.
   */
  export interface VerdictRewrite {
    tag: 'rewrite',
    val: Content,
  }
}
