declare module 'switchboard:plugin/edit-policy@0.4.0' {
  export function decide(request: Request): Decision;
  /**
   * # Variants
   * 
   * ## `"edit"`
   * 
   * ## `"delete"`
   */
  export type Action = 'edit' | 'delete';
  export interface Request {
    tenant: string,
    conversationId: string,
    action: Action,
    /**
     * The user asking.
     */
    actor: string,
    /**
     * Whether the actor holds the tenant's admin role.
     */
    actorIsAdmin: boolean,
    /**
     * The message's sender.
     */
    sender: string,
    /**
     * The message's `seq` and when it was sent, in Unix milliseconds.
     */
    seq: bigint,
    createdAtMs: bigint,
    editedAtMs?: bigint,
    /**
     * Now, in Unix milliseconds: the only clock a plugin has.
     */
    nowMs: bigint,
  }
  export type Decision = DecisionAllow | DecisionDeny;
  export interface DecisionAllow {
    tag: 'allow',
  }
  export interface DecisionDeny {
    tag: 'deny',
    val: string,
  }
}
