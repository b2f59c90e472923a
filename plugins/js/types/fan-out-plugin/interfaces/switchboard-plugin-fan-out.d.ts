/// <reference path="./switchboard-plugin-types.d.ts" />
declare module 'switchboard:plugin/fan-out@0.4.0' {
  export function choose(conversation: Conversation): Mode;
  export type ConversationKind = import('switchboard:plugin/types@0.4.0').ConversationKind;
  export interface Conversation {
    tenant: string,
    conversationKind: ConversationKind,
    memberCount: number,
  }
  /**
   * # Variants
   * 
   * ## `"on-write"`
   * 
   * Every member's devices get inbox entries and pushes.
   * ## `"on-read"`
   * 
   * One stored copy; connected members get it live, others read
   * history (members a message mentions still get inbox entries
   * and pushes).
   */
  export type Mode = 'on-write' | 'on-read';
}
