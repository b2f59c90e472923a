// The Switchboard client SDK; docs/protocol.md is the protocol it speaks.
export { SwitchboardClient, SendError } from "./client.js";
export type { ClientOptions, ClientEvents, Sent, SocketLike, Status, WebSocketLike } from "./client.js";
export { ConversationState } from "./conversation.js";
export { Rest, ApiError } from "./rest.js";
export type {
  Answer,
  ClaimedKeys,
  ConversationDetail,
  ConversationKind,
  ConversationPage,
  ConversationSummary,
  DeviceKeys,
  DeviceKeysUpload,
  HistoryPage,
  MemberView,
  MessageVersions,
  PresenceInfo,
  PushRegistration,
  Schemas,
  UploadGrant,
  UserDevices,
} from "./rest.js";
export type { components as RestComponents, paths as RestPaths } from "./openapi.js";
export { expiryOf, identityOf } from "./token.js";
export type { TokenSource } from "./token.js";
export type * from "./protocol.js";
