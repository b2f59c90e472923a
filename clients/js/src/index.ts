// The Switchboard client SDK; docs/protocol.md is the protocol it speaks.
export { SwitchboardClient, SendError } from "./client.js";
export type { ClientOptions, ClientEvents, Sent, Status, WebSocketLike } from "./client.js";
export { ConversationState } from "./conversation.js";
export { Rest, ApiError } from "./rest.js";
export type {
  ConversationDetail,
  ConversationKind,
  ConversationPage,
  ConversationSummary,
  HistoryPage,
  MemberView,
  MessageVersions,
  UploadGrant,
} from "./rest.js";
export { expiryOf, identityOf } from "./token.js";
export type { TokenSource } from "./token.js";
export type * from "./protocol.js";
