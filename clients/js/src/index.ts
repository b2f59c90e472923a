// The Switchboard client SDK; docs/protocol.md is the protocol it speaks.
export { SwitchboardClient } from "./client.js";
export type { SendOptions } from "./client.js";
export type { ClientOptions, ClientEvents } from "./options.js";
export type { SocketLike, Status, WebSocketLike } from "./connection.js";
export { CommandError, SendError, isSlowMode } from "./errors.js";
export type { CommandType, ErrorFrame, LocalErrorCode } from "./errors.js";
export type { Custom, MessageStatus, OutgoingMessage, SendExtras, Sent } from "./status.js";
export type { CommandEvent, ReactionEvent } from "./commands.js";
export { pollContent } from "./polls.js";
export type { NewPoll, PollUpdatedEvent } from "./polls.js";
export { onlyPreviewsChanged, previewsOf } from "./previews.js";
export { ConversationState, mentionsUser, policyOf } from "./conversation.js";
export type { ConversationSnapshot, PinInfo, PolicyInfo } from "./conversation.js";
export { BlockSet } from "./blocks.js";
export type { BlockInfo } from "./blocks.js";
export { ProfileCache, PROFILES_PER_READ } from "./profiles.js";
export type { Profile, ReadProfiles } from "./profiles.js";
export { ConversationList, previewOf } from "./conversations.js";
export type { ConversationListEvents, ConversationSettings } from "./conversations.js";
export { IndexedDbStore, MemoryStore } from "./persist.js";
export type { IndexedDbFactory, PersistLimits, StateStore, StoredRecords } from "./persist.js";
export { Rest, ApiError } from "./rest.js";
export type {
  Answer,
  Ban,
  BanList,
  Block,
  BlockList,
  ChannelDirectory,
  ChannelEntry,
  ClaimedKeys,
  ConversationDetail,
  ConversationKind,
  ConversationPage,
  ConversationPatch,
  ConversationSummary,
  DeviceKeys,
  DeviceKeysUpload,
  ExportedConversation,
  HistoryPage,
  Invite,
  InviteList,
  InvitePreview,
  Job,
  MemberRole,
  ProfilePatch,
  UserProfile,
  MemberSettings,
  MemberView,
  MessageVersions,
  MyDataExport,
  Pin,
  PinList,
  PostMessage,
  PostedMessage,
  ScheduledMessage,
  SearchResults,
  WebhookEndpoint,
  PresenceInfo,
  PushRegistration,
  Report,
  ReportAction,
  ReportCreated,
  ReportList,
  Blocklist,
  TenantBan,
  PushTemplates,
  PreviewSettings,
  TenantBanList,
  Mute,
  AuditEntry,
  AuditList,
  ReportReason,
  ReportStatus,
  RestObserver,
  Schemas,
  ThreadList,
  ThreadView,
  UploadGrant,
  UserDevices,
} from "./rest.js";
export type { components as RestComponents, paths as RestPaths } from "./openapi.js";
export { expiryOf, identityOf } from "./token.js";
export { verifyWebhook } from "./webhooks.js";
export type { VerifyOptions, WebhookEvent } from "./webhooks.js";
export type { TokenSource } from "./token.js";
export type * from "./protocol.js";
