// The browser client of `switchboard dev`, built on the SDK
// (clients/js, bundled as /web/switchboard.js). Every text the server or
// another user sent goes into the page through `textContent` only: no
// HTML is ever parsed from data, but for the `highlights` of a search
// result, which the server gives as HTML (the matched words in `<b>`,
// everything else escaped).
import { SwitchboardClient, mentionsUser, previewOf as previewOfContent } from "/web/switchboard.js";

const $ = (id) => document.getElementById(id);

/** An element with properties, attributes and children (text children
 * become text nodes). */
function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("data-") || key.startsWith("aria-") || key === "title" || key === "type" || key === "role") node.setAttribute(key, value);
    else node[key] = value;
  }
  node.append(...children);
  return node;
}

const STATUS_TEXT = { connecting: "connecting…", open: "online", reconnecting: "reconnecting…", closed: "offline" };
/** What the emoji picker offers. */
const EMOJI = ["👍", "❤️", "😂", "🎉", "😮", "😢", "🙏", "🚀"];
const ROLES = ["owner", "admin", "member"];
const LEVELS = { all: "All messages", mentions: "Mentions only", none: "Nothing" };
const MUTE_HOURS = 8;
/** How long a ban lasts (seconds; "" until lifted). */
const BAN_FOR = [["", "until lifted"], ["3600", "for 1 hour"], ["86400", "for 1 day"], ["604800", "for 7 days"], ["2592000", "for 30 days"]];
const FOLDED = "Message from a blocked user";
/** Why a message is reported, as the report form offers it. */
const REASONS = { spam: "Spam", abuse: "Abuse or harassment", illegal: "Illegal content", other: "Something else" };
/** What resolving a report did, as the reports list says it. */
const RESOLVED_AS = { dismiss: "Dismissed", delete_message: "Message deleted", ban_sender: "Sender banned" };

let client;
let me;
let whoSuffix = ""; // the device and role after the user's name in the header
let tenantAdmin = false; // the token's `role` is `admin`: the reports are this user's to resolve
let current = null;
let details = new Map(); // conversation id -> detail (members and marks)
const nextBefore = new Map(); // conversation id -> next_before_seq, once a page of history was read
const blobUrls = new Map(); // blob_ref -> object URL
let editing = null;
let replyingTo = null; // the message the next one quotes
let pickerFor = null; // the message whose emoji picker is open
// The side panel: { kind: "thread", root } or { kind: "threads" |
// "pins" | "members" | "notifications" | "admin" | "scheduled" } of the
// open conversation, { kind: "report", message, reason, note, sent } (the
// report form of a message, its draft kept here), or { kind: "blocked" |
// "reports" | "search" } (the user's own, a tenant admin's reports, and
// the results of a search); null when closed.
let panel = null;
/** The panels drawn without an open conversation. */
const USER_PANELS = new Set(["blocked", "reports", "search", "profile", "channels", "invite", "moderation"]);
/** The panels a change of the open conversation does not redraw: they
 * are not its, or hold fields being typed in. */
const STEADY_PANELS = new Set(["blocked", "reports", "report", "search", "profile", "channels", "invite"]);
// The reports list of a tenant admin: { status, reports (null while
// read), next (the next page's cursor), told (what the last resolution
// did) }.
let reportsView = null;
let reportsAsked = 0; // which read of the list is the latest
// The search panel's results: { q, results (null while read), next (the
// next page's cursor), loading (the next page) }.
let searchView = null;
let searchAsked = 0; // which search is the latest
let searchTimer = null; // the search typing starts, once it pauses
let scheduledList = null; // the user's messages waiting for their send_at (all conversations), soonest first
let scheduledAsked = 0; // which read of them is the latest
const unscheduling = new Set(); // scheduled ids being cancelled
let flashing = null; // { id, timer }: the message a jump pointed at, flashed (through redraws) for a moment
const settingsOf = new Map(); // conversation id -> the caller's { notifications, muted_until }
const pinnedMessages = new Map(); // message id -> the message, as `GET .../pins` answered it
let threadList = null; // the open conversation's `GET .../threads` answer
const threadsRead = new Set(); // `${conversation}\u0000${root}` whose thread history was read
const bansOf = new Map(); // conversation id -> the bans in force, as `GET .../bans` answered them
const mutesOf = new Map(); // conversation id -> the mutes in force (v1.3), as `GET .../mutes` answered them
let moderationView = null; // a tenant admin's moderation panel (v1.3): { list, previews, bans, shadow, audit (each null while read), told }
let policyDraft = {}; // the admin panel's settings as typed, not saved yet
const unfolded = new Set(); // ids of messages from blocked users the user chose to see
const resendAt = new Map(); // client_msg_id -> when (ms) a send slow mode refused goes again, as a new message
const slowUntil = new Map(); // conversation id -> when (ms) slow mode lets this user send there again
let slowTicker = null;
let lastTypingAt = 0;
// The conversation list is the SDK's (`client.conversationList`): read a
// page at a time, then kept current from the session's events, and kept
// with the messages in IndexedDB, so a reload shows it at once. So are
// each conversation's reactions, thread summaries, roles and pins
// (`client.conversation(id)`), and the users this user blocks
// (`client.blocked`, read as the session opens).

async function devToken(user, device) {
  const response = await fetch("/v1/dev/token", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(device ? { user, device } : { user }),
  });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.message || response.statusText);
  return body.token;
}

function showError(where, message) {
  $(where).textContent = message || "";
}

// ---- Signing in (and back in after a reload) ----

$("login").addEventListener("submit", async (event) => {
  event.preventDefault();
  showError("login-error", "");
  try {
    const pasted = $("token").value.trim();
    if (pasted) await startWithToken(pasted);
    else await start($("user").value.trim(), $("device").value.trim());
  } catch (e) {
    showError("login-error", e.message);
  }
});

/** Shows the token field: on a gateway with no dev tokens, or for a
 * token of one's own (a tenant admin's, which the dev endpoint does not
 * mint). */
function askForToken(hint) {
  $("token-field").hidden = false;
  $("token").required = true;
  $("user").required = false;
  $("use-token").hidden = true;
  $("login-hint").textContent = hint;
}

$("use-token").addEventListener("click", () => {
  askForToken("Paste a token of the demo tenant: “switchboard token --user boss --admin” prints a tenant admin's.");
  $("token").focus();
});

/** Signs in through the dev token endpoint (`switchboard dev`). A
 * gateway has none: then the page asks for a token instead. */
async function start(user, device) {
  try {
    await devToken(user, device); // refuses a bad id before anything changes
  } catch (e) {
    if (e.message.includes("no such endpoint") || e.message === "Not Found") {
      askForToken("This gateway signs in with a token from your application: paste it below.");
      throw new Error("paste a token to sign in");
    }
    throw e;
  }
  localStorage.setItem("switchboard.session", JSON.stringify({ user, device }));
  resume(user, device);
}

/** Opens the session of a dev user signed in before (a reload): at once,
 * from what this browser kept; the token is fetched as it connects. */
function resume(user, device) {
  openSession(user, device, () => devToken(user, device || undefined));
}

/** Signs in with a token the user pasted (kept for this tab only). A
 * token whose `role` claim is `admin` is a tenant admin's: the server
 * checks it on every admin call; here it only shows the reports. */
async function startWithToken(token) {
  let claims;
  try {
    claims = JSON.parse(atob(token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")));
  } catch {
    throw new Error("that is not a Switchboard token");
  }
  if (typeof claims?.sub !== "string") throw new Error("that is not a Switchboard token");
  sessionStorage.setItem("switchboard.token", token);
  openSession(claims.sub, claims.device || "", token, claims.role === "admin");
}

function openSession(user, device, token, admin = false) {
  me = user;
  tenantAdmin = admin;
  $("login").hidden = true;
  $("app").hidden = false;
  whoSuffix = `${device ? ` (${device})` : ""}${admin ? " · tenant admin" : ""}`;
  $("show-reports").hidden = !admin;
  $("show-moderation").hidden = !admin;
  $("search").hidden = false;
  client = new SwitchboardClient({
    url: location.origin,
    token,
    // The list, the newest messages of each conversation, and what waits
    // to be sent, kept in this browser (one database per user and device).
    persist: "indexeddb",
    storageName: `${location.host}/${user}/${device || "default"}`,
  });
  client.on("status", showStatus);
  client.on("change", (id) => {
    if (id !== current) return;
    renderMessages();
    renderTools();
    // The admin panel only when what it shows changed; the user's own
    // panels and a report being written not at all (see STEADY_PANELS).
    if (panel && !STEADY_PANELS.has(panel.kind) && (panel.kind !== "admin" || panel.shows !== adminSignature())) renderPanel();
  });
  client.on("message", (m) => {
    // One of this user's scheduled messages went: it waits no more.
    if (m.sender_id === me && m.sender_device === SCHEDULED_DEVICE) refreshScheduled();
    if (m.conversation_id !== current) return;
    markRead();
    if (panel?.kind === "thread" && m.thread_id === panel.root) markThreadRead();
    // Another owner or admin banned or lifted a ban: the list follows.
    const event = m.content?.kind === "system" ? m.content.event : null;
    if (panel?.kind === "admin" && (event === "member_banned" || event === "member_unbanned")) refreshBans(m.conversation_id);
  });
  client.on("blocks_changed", () => {
    renderBlockedCount();
    renderList();
    if (current) {
      renderMessages();
      renderTools();
    }
    if (panel && panel.kind !== "report") renderPanel();
  });
  client.on("profile_updated", (p) => {
    if (p.user_id === me) renderWho();
    redrawForProfiles();
  });
  renderWho();
  // The server ended the session for good (4004: the user is being
  // erased): nothing is kept, and the sign-in form says why.
  client.on("ended", ({ code, reason }) => {
    localStorage.removeItem("switchboard.session");
    sessionStorage.removeItem("switchboard.token");
    showStatus("closed");
    closePanel();
    $("app").hidden = true;
    $("login").hidden = false;
    showError("login-error", `The server ended your session${reason ? ` (${reason})` : ""}, code ${code}. Sign in again.`);
  });
  client.on("outgoing", slowModeRefusal);
  client.on("typing", (t) => {
    if (t.conversation_id === current) renderTyping();
  });
  client.on("presence", () => renderPresence());
  client.on("settings_changed", (s) => {
    settingsOf.set(s.conversation_id, { notifications: s.notifications, muted_until: s.muted_until });
    if (s.conversation_id === current && panel?.kind === "notifications") renderPanel();
  });
  client.on("error", (frame) => {
    showError("chat-error", `${frame.code}: ${frame.message}`);
    // A scheduled message refused at its time is dropped.
    if (frame.client_msg_id && scheduledList?.some((s) => s.client_msg_id === frame.client_msg_id)) refreshScheduled();
  });
  const list = client.conversationList;
  list.on("change", renderList);
  list.on("error", (e) => showError("new-error", e.message));
  renderList();
  // What this browser kept shows as soon as it is read (the open
  // conversation with it); the network follows.
  client.ready.then(() => {
    renderList();
    const fromHash = decodeURIComponent(location.hash.slice(1));
    if (fromHash && current === null) open(fromHash);
    // An invite link (`?invite=CODE`, v1.3) asks whether to join.
    const code = new URLSearchParams(location.search).get("invite");
    if (code) showInvite(code);
  });
  client.connect();
  list.load().then(() => showError("new-error", ""), () => {});
  refreshScheduled();
}

function showStatus(status) {
  const node = $("connection");
  node.dataset.status = status;
  node.textContent = STATUS_TEXT[status] ?? status;
}

// ---- The conversation list ----

function titleOf(c) {
  if (c.title) return c.title;
  const others = (c.members || []).map((m) => (typeof m === "string" ? m : m.user_id)).filter((u) => u !== me);
  return others.map(nameOf).join(", ") || c.conversation_id;
}

function previewOf(c) {
  const last = c.last_message;
  if (last && last.content?.kind !== "system" && last.sender_id !== me && client.isBlocked(last.sender_id)) return FOLDED;
  if (typeof c.preview === "string") return c.preview;
  return last ? describe(last.content) : "";
}

/** The next page of the list, below what is shown. */
function loadMoreConversations() {
  client.conversationList.loadMore().then(() => showError("new-error", ""), () => {});
}

// Scrolled near the end of the list: the next page.
$("conversations").addEventListener("scroll", () => {
  const ul = $("conversations");
  if (ul.scrollTop + ul.clientHeight >= ul.scrollHeight - 40) loadMoreConversations();
});

/** How the caller's notification settings of a conversation show in the
 * list: muted, mentions only, or nothing. */
function levelMark(c) {
  if (c.muted) return el("span", { class: "level", "data-level": "muted", title: "Muted", "aria-label": "muted", text: "🔕" });
  if (c.notifications === "none") return el("span", { class: "level", "data-level": "none", title: "No notifications", "aria-label": "no notifications", text: "🔇" });
  if (c.notifications === "mentions") return el("span", { class: "level", "data-level": "mentions", title: "Notifies on mentions only", "aria-label": "mentions only", text: "@" });
  return "";
}

function renderList() {
  const list = client.conversationList.items;
  const ul = $("conversations");
  ul.replaceChildren(
    ...list.map((c) => {
      const shown = c.conversation_id === current;
      const unread = shown ? 0 : c.unread_count;
      const mentions = shown ? 0 : (c.mention_count ?? 0);
      const button = el(
        "button",
        {
          type: "button",
          class: c.muted ? "muted-item" : undefined,
          "data-conversation": c.conversation_id,
          "aria-current": shown ? "true" : "false",
          onclick: () => open(c.conversation_id),
        },
        el("span", { class: "title" }, titleOf(c), levelMark(c)),
        el(
          "span",
          { class: "badges" },
          mentions > 0 ? el("span", { class: "mention-count", text: `@${mentions}`, "aria-label": `${mentions} mentions`, title: `${mentions} unread mentions` }) : "",
          unread > 0 ? el("span", { class: "unread", text: String(unread), "aria-label": `${unread} unread` }) : "",
        ),
        el("span", { class: "preview", text: previewOf(c) }),
      );
      return el("li", {}, button);
    }),
  );
  if (client.conversationList.hasMore) {
    ul.append(
      el(
        "li",
        {},
        el("button", { type: "button", id: "more-conversations", class: "more", onclick: loadMoreConversations }, "Load more conversations"),
      ),
    );
  }
}

$("new-chat").addEventListener("submit", async (event) => {
  event.preventDefault();
  showError("new-error", "");
  const members = $("new-members").value.split(",").map((m) => m.trim()).filter(Boolean);
  const title = $("new-title").value.trim();
  const kind = members.length === 1 && !title ? "direct" : "group";
  try {
    const created = await client.rest.createConversation(kind, members, title || undefined);
    $("new-members").value = "";
    $("new-title").value = "";
    await open(created.conversation_id);
  } catch (e) {
    showError("new-error", e.message);
  }
});

// ---- One conversation ----

/** Opens a conversation; `keepSearch`: the search panel stays open
 * beside it (a result was picked where there is room for both). */
async function open(id, keepSearch = false) {
  current = id;
  editing = null;
  replyingTo = null;
  pickerFor = null;
  threadList = null;
  $("editing").hidden = true;
  $("replying").hidden = true;
  showSchedulePicker(false);
  showPollForm(false);
  if (!keepSearch || panel?.kind !== "search") closePanel();
  history.replaceState(null, "", `#${encodeURIComponent(id)}`);
  $("app").classList.add("in-chat");
  for (const b of $("conversations").querySelectorAll("button")) {
    b.setAttribute("aria-current", b.dataset.conversation === id ? "true" : "false");
  }
  for (const input of [$("text"), $("send"), $("attach"), $("schedule"), $("poll")]) input.disabled = false;
  $("chat-tools").hidden = false;
  showError("chat-error", "");
  renderSlowMode();
  renderScheduled();
  refreshScheduled();
  // What is known already shows at once (kept from the last visit, or
  // from this session); the network follows.
  const known = details.get(id) ?? client.conversationList.get(id);
  $("chat-title").textContent = known ? titleOf(known) : "";
  client.conversation(id);
  renderMessages(true);
  renderTools();
  try {
    // The members with their marks and roles (the SDK keeps the roles
    // current from then on), and the pins.
    const [detail] = await Promise.all([client.rest.conversation(id), loadPins(id)]);
    details.set(id, detail);
    const state = client.conversation(id);
    for (const m of detail.members) {
      state.receipt(m.user_id, "delivered", m.delivered_seq ?? 0);
      state.receipt(m.user_id, "read", m.read_seq ?? 0);
    }
    if (current === id) $("chat-title").textContent = titleOf(detail);
    if (!nextBefore.has(id)) await loadEarlier(id);
  } catch (e) {
    showError("chat-error", e.message);
  }
  if (current !== id) return;
  renderMessages(true);
  renderTools();
  renderTyping();
  renderPresence();
  markRead();
  $("text").focus();
}

async function loadEarlier(id) {
  const before = nextBefore.get(id);
  const page = await client.rest.history(id, before ? { before_seq: before, limit: 50 } : { limit: 50 });
  const state = client.conversation(id);
  // `update` adds what is new and applies edits, deletions and reactions
  // made while this browser was away to what it kept.
  for (const m of page.messages) state.update(m);
  nextBefore.set(id, page.next_before_seq ?? null);
}

/** The pins, with their messages (the SDK's state takes the list). */
async function loadPins(id) {
  const list = await client.rest.pins(id);
  for (const p of list.pins) if (p.message) pinnedMessages.set(p.message_id, p.message);
}

$("back").addEventListener("click", () => {
  current = null;
  showSchedulePicker(false);
  showPollForm(false);
  closePanel();
  renderScheduled();
  $("app").classList.remove("in-chat");
  $("chat-tools").hidden = true;
  history.replaceState(null, "", location.pathname);
  renderList();
});

/** Reads the open conversation: the SDK moves the own mark and the
 * list's unread count at once, and writes the mark when it can. */
function markRead() {
  if (!current || document.visibilityState !== "visible") return;
  const state = client.conversation(current);
  const read = state.receipts.get(me)?.read ?? 0;
  const listed = client.conversationList.get(current);
  if (state.highestSeq > read || listed?.unread_count || listed?.mention_count) client.markRead(current);
}
document.addEventListener("visibilitychange", () => {
  markRead();
  if (panel?.kind === "thread") markThreadRead();
});

/** Reads the open thread up to its newest reply known here. */
function markThreadRead() {
  if (!current || panel?.kind !== "thread" || document.visibilityState !== "visible") return;
  client.markThreadRead(current, panel.root).catch(() => {});
}

function describe(content) {
  if (!content) return "(deleted)";
  switch (content.kind) {
    case "text":
      return content.text;
    case "image":
      return "🖼 image";
    case "file":
    case "voice":
      return `📄 ${content.caption || content.mime}`;
    case "ciphertext":
      return "(encrypted)";
    case "custom":
      // An app's own kind (v1.3): this client knows none, so it shows
      // what the sender wrote for clients like it.
      return content.fallback_text ?? `[${content.type}]`;
    case "poll":
      return `📊 ${content.question}`;
    case "system":
      return previewOfContent(content) ?? String(content.event);
    default:
      return `[${content.kind}]`;
  }
}

/** The caller's role here (a direct conversation has none). */
function myRole() {
  return client.conversation(current).roleOf(me);
}

/** Whether the caller may pin, and mention everyone: an owner or an
 * admin, or either side of a direct conversation (pins only). */
function canModerate() {
  const role = myRole();
  return role === "owner" || role === "admin";
}

function canPin() {
  return kindOf() === "direct" || canModerate();
}

/** The kind of a conversation (default: the open one), as best known. */
function kindOf(id = current) {
  return (details.get(id) ?? client.conversationList.get(id))?.kind;
}

/** The other member of the open direct conversation. */
function otherMember() {
  return kindOf() === "direct" ? memberIds().find((u) => u !== me) : undefined;
}

/** Whether a message shows folded: it comes from a user this user
 * blocks (the SDK's set, else its `blocked_sender`), and was not
 * unfolded. */
function folded(m) {
  return m.content?.kind !== "system" && !m.deleted_at && client.isBlockedSender(m) && !unfolded.has(m.message_id);
}

/** A message in one line, "sender: text", as quotes and lists show it. */
function quoteText(m) {
  return folded(m) ? FOLDED : `${nameOf(m.sender_id)}: ${describe(m.content)}`;
}

/** The members of the open conversation (user ids), as best known. */
function memberIds() {
  const roles = client.conversation(current).roles;
  if (roles.size) return [...roles.keys()];
  const known = details.get(current) ?? client.conversationList.get(current);
  return (known?.members ?? []).map((m) => (typeof m === "string" ? m : m.user_id));
}

/** The tick of one of my messages: read once every other member read
 * it, delivered once every other member's device got it. */
function tickOf(state, seq) {
  const others = (details.get(current)?.members ?? []).map((m) => m.user_id).filter((u) => u !== me);
  const marks = others.map((u) => state.receipts.get(u) ?? { delivered: 0, read: 0 });
  if (others.length && marks.every((m) => m.read >= seq)) return ["read", "✓✓", "read"];
  if (others.length && marks.every((m) => m.delivered >= seq)) return ["delivered", "✓✓", "delivered"];
  return ["sent", "✓", "sent"];
}

function mediaNode(content) {
  if (content.kind === "image") {
    const img = el("img", { alt: content.caption || "image", "data-blob": content.blob_ref });
    loadBlob(img, content.blob_ref, () => (img.alt = "image unavailable"));
    return img;
  }
  return el("button", {
    type: "button",
    text: `⬇ ${content.caption || content.mime} (${content.size} bytes)`,
    onclick: async () => {
      const url = await fetchBlob(content.blob_ref);
      el("a", { href: url, download: content.caption || content.blob_ref }).click();
    },
  });
}

async function fetchBlob(ref) {
  if (!blobUrls.has(ref)) blobUrls.set(ref, URL.createObjectURL(await client.rest.download(ref)));
  return blobUrls.get(ref);
}

/** Shows a blob of the conversation (an image message's, a link
 * preview's image) in `img`: at once when fetched before, else once
 * downloaded (members only); `failed()` when it cannot be. */
function loadBlob(img, ref, failed) {
  const cached = blobUrls.get(ref);
  if (cached) img.src = cached;
  else fetchBlob(ref).then((url) => (img.src = url)).catch(failed);
}

// ---- Link previews (v1.3): the cards the server adds under a text
// message's first links after it is sent (a `message_updated` that is no
// edit). Every field is the page's own words: drawn as text, never as
// HTML ----

/** `url` if it is a web address (http or https), else undefined. */
function webUrl(url) {
  try {
    const parsed = new URL(url);
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : undefined;
  } catch {
    return undefined;
  }
}

/** A message's link previews, one card per link, or null. */
function previewsNode(m) {
  const cards = (m.previews ?? []).map(previewCard);
  return cards.length ? el("div", { class: "link-previews", role: "list", "aria-label": "Link previews" }, ...cards) : null;
}

/** One card: the site's name small, the title a link to the page (a new
 * tab that learns nothing of this one), the description clamped to
 * three lines, the image a thumbnail fetched like media. */
function previewCard(p) {
  const href = webUrl(p.url);
  const host = href ? new URL(href).host : p.url;
  const title = p.title || p.url;
  const text = el(
    "div",
    { class: "link-preview-text" },
    el("span", { class: "link-preview-site", text: p.site_name || host }),
    href
      ? el("a", { class: "link-preview-title", href, target: "_blank", rel: "noopener noreferrer", title: p.url, text: title })
      : el("span", { class: "link-preview-title", text: title }),
  );
  if (p.description) text.append(el("span", { class: "link-preview-description", title: p.description, text: p.description }));
  const card = el("div", { class: "link-preview", role: "listitem", "data-preview-url": p.url }, text);
  if (p.image?.blob_ref) {
    const img = el("img", { class: "link-preview-image", alt: "", "data-blob": p.image.blob_ref });
    loadBlob(img, p.image.blob_ref, () => img.remove());
    card.append(img);
  }
  return card;
}

const escapeRe = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** A text message's body, its mentions highlighted (mine the most). */
function bodyNode(m, text) {
  const names = [...(m.mentions ?? []), ...(m.mention_all ? ["all"] : [])].sort((a, b) => b.length - a.length);
  if (!names.length) return el("span", { class: "body", text });
  const pattern = new RegExp(`@(${names.map(escapeRe).join("|")})(?![A-Za-z0-9_])`, "g");
  const parts = [];
  let at = 0;
  for (const match of text.matchAll(pattern)) {
    if (match.index > at) parts.push(text.slice(at, match.index));
    const mine = match[1] === me || match[1] === "all";
    parts.push(el("span", { class: `mention${mine ? " me" : ""}`, text: match[0] }));
    at = match.index + match[0].length;
  }
  parts.push(text.slice(at));
  return el("span", { class: "body" }, ...parts);
}

/** The quoted message above a reply. */
function quoteNode(state, replyTo) {
  const quoted = state.get(replyTo) ?? pinnedMessages.get(replyTo);
  const text = quoted ? quoteText(quoted) : "an earlier message";
  return el("div", {
    class: "quote",
    "data-reply-to": replyTo,
    title: "Show the quoted message",
    text: `↪ ${text}`,
    onclick: () => reveal(replyTo),
  });
}

/** How long a message jumped to stays flashed. */
const FLASH_MS = 2000;

/** Scrolls a message of the main timeline (or of `where`: the panel)
 * into view, flashing it (redraws keep the flash); false when it is not
 * shown there. */
function reveal(messageId, where = $("messages")) {
  const node = where.querySelector(`[data-message-id="${CSS.escape(messageId)}"]`);
  if (!node) return false;
  clearTimeout(flashing?.timer);
  flashing = {
    id: messageId,
    timer: setTimeout(() => {
      flashing = null;
      for (const shown of document.querySelectorAll(".msg.flash")) shown.classList.remove("flash");
    }, FLASH_MS),
  };
  node.scrollIntoView({ block: "center" });
  node.classList.add("flash");
  return true;
}

/** A message's reactions as chips (mine highlighted; a click toggles
 * mine), the button that opens the emoji picker, and the picker. */
function reactionsNode(m) {
  const chips = (m.reactions ?? []).map((r) =>
    el("button", {
      type: "button",
      class: "chip",
      "data-emoji": r.emoji,
      "aria-pressed": r.me ? "true" : "false",
      "aria-label": `${r.emoji} ${r.count}${r.me ? ", yours" : ""}`,
      title: r.me ? "Take your reaction back" : "React with this too",
      text: `${r.emoji} ${r.count}`,
      onclick: () => react(m, r.emoji),
    }),
  );
  const node = el("div", { class: "reactions" }, ...chips);
  if (pickerFor === m.message_id) {
    node.append(
      el(
        "div",
        { class: "picker", role: "group", "aria-label": "Pick an emoji" },
        ...EMOJI.map((emoji) =>
          el("button", {
            type: "button",
            text: emoji,
            "aria-label": `React with ${emoji}`,
            onclick: () => {
              pickerFor = null;
              react(m, emoji);
            },
          }),
        ),
      ),
    );
  }
  return chips.length || pickerFor === m.message_id ? node : "";
}

function react(m, emoji) {
  showError("chat-error", "");
  // Waits while offline; the chips change once the server answers.
  client.toggleReaction(m.conversation_id, m.message_id, emoji).catch((e) => showError("chat-error", e.message));
  renderMessages();
  if (panel) renderPanel();
}

function togglePicker(m) {
  pickerFor = pickerFor === m.message_id ? null : m.message_id;
  renderMessages();
  if (panel?.kind === "thread") renderPanel();
}

// ---- Polls (v1.3): a card with the options, their counts, bars and
// voters; a click votes, and the author, owners and admins close it ----

/** How many voters an option names; the rest show as "+n". */
const VOTERS_SHOWN = 3;

/** Whether a poll takes no more votes: closed by hand, or its
 * `closes_at` passed (the server sends nothing then: the page looks). */
function pollClosed(m) {
  const closes = m.content?.closes_at;
  return m.poll_results?.closed === true || (typeof closes === "string" && Date.parse(closes) <= Date.now());
}

/** Whether the user may close a poll: its author, an owner or admin of
 * the conversation, or a tenant admin. */
function mayClosePoll(m) {
  return m.sender_id === me || canModerate() || tenantAdmin;
}

/** A poll message's body: the question, how it is answered and until
 * when, each option as a button (count, bar, its latest voters unless
 * anonymous; mine pressed), the number of votes, Retract and Close. */
function pollNode(m) {
  const poll = m.content;
  const results = m.poll_results ?? { counts: {}, closed: false, me: [] };
  const closed = pollClosed(m);
  const mine = new Set(results.me ?? []);
  const counts = poll.options.map((o) => results.counts?.[o.id] ?? 0);
  const total = counts.reduce((sum, n) => sum + n, 0);
  const options = poll.options.map((o, i) => {
    const count = counts[i];
    const chosen = mine.has(o.id);
    const fill = el("span");
    fill.style.width = `${total ? Math.round((count / total) * 100) : 0}%`;
    const button = el(
      "button",
      {
        type: "button",
        class: "poll-option",
        "data-option": o.id,
        "aria-pressed": chosen ? "true" : "false",
        "aria-label": `${o.text}: ${count} ${count === 1 ? "vote" : "votes"}${chosen ? ", your choice" : ""}`,
        title: closed ? "The poll is closed" : chosen ? "Take your vote back" : poll.multiple ? "Vote for this too" : "Vote for this",
        disabled: closed,
        onclick: () => votePoll(m, o.id),
      },
      el("span", { class: "poll-text", text: o.text }),
      el("span", { class: "poll-count", text: String(count) }),
      el("span", { class: "poll-bar", "aria-hidden": "true" }, fill),
    );
    const voters = results.voters?.[o.id] ?? [];
    if (voters.length) {
      const names = voters.map((u) => (u === me ? "you" : nameOf(u)));
      const more = count - Math.min(VOTERS_SHOWN, names.length);
      button.append(
        el("span", { class: "poll-voters", title: names.join(", "), text: `${names.slice(0, VOTERS_SHOWN).join(", ")}${more > 0 ? ` +${more}` : ""}` }),
      );
    }
    return el("li", {}, button);
  });
  const note = el("div", { class: "poll-note" }, poll.multiple ? "Choose any" : "Choose one");
  if (poll.anonymous) note.append(" · anonymous");
  if (closed) note.append(" · ", el("span", { class: "closed", text: "Closed" }));
  else if (poll.closes_at) note.append(` · closes ${whenText(poll.closes_at)}`);
  const foot = el("div", { class: "poll-foot" }, el("span", { class: "poll-total", text: `${total} ${total === 1 ? "vote" : "votes"}` }));
  if (!closed && mine.size) {
    foot.append(el("button", { type: "button", text: "Retract", "aria-label": "Retract your vote", onclick: () => retractVote(m) }));
  }
  if (!closed && mayClosePoll(m)) {
    foot.append(el("button", { type: "button", text: "Close poll", "aria-label": "Close poll", title: "End the voting", onclick: () => closePoll(m) }));
  }
  return el(
    "div",
    { class: "body poll", role: "group", "aria-label": `Poll: ${poll.question}`, "data-poll": m.message_id, "data-closed": closed ? "true" : "false" },
    el("div", { class: "poll-question", text: poll.question }),
    note,
    el("ul", { class: "poll-options" }, ...options),
    foot,
  );
}

/** A click on an option: in a single-choice poll it becomes the vote
 * (or, mine already, is taken back); in a multiple one it joins or
 * leaves the vote. Waits while offline; the card changes once the
 * server answers. */
function votePoll(m, optionId) {
  showError("chat-error", "");
  client.toggleVote(m.conversation_id, m.message_id, optionId).catch((e) => showError("chat-error", e.message));
}

function retractVote(m) {
  showError("chat-error", "");
  client.vote(m.conversation_id, m.message_id, []).catch((e) => showError("chat-error", e.message));
}

async function closePoll(m) {
  showError("chat-error", "");
  try {
    await client.closePoll(m.conversation_id, m.message_id);
  } catch (e) {
    showError("chat-error", e.message);
  }
}

/** A message's toolbar: react, reply, thread (`inThread`: not in the
 * thread panel), pin (who may), edit and delete (mine), report (another
 * user's). */
function toolbarOf(m, inThread, mine, pinned) {
  const bar = el(
    "span",
    { class: "toolbar" },
    el("button", { type: "button", text: "React", "aria-label": "Add reaction", title: "React with an emoji", onclick: () => togglePicker(m) }),
    el("button", { type: "button", text: "Reply", "aria-label": "Reply to message", onclick: () => startReply(m, inThread) }),
  );
  if (!inThread && !m.thread_id) {
    bar.append(el("button", { type: "button", text: "Thread", "aria-label": "Reply in thread", onclick: () => openThread(m.message_id) }));
  }
  if (canPin() && !m.thread_id) {
    bar.append(
      el("button", {
        type: "button",
        text: pinned ? "Unpin" : "Pin",
        "aria-label": pinned ? "Unpin message" : "Pin message",
        onclick: () => togglePin(m.message_id, pinned),
      }),
    );
  }
  if (mine) {
    // Only a text is edited here: a media item or an app's own kind
    // (custom, v1.3) would become a text.
    if (m.content?.kind === "text") {
      bar.append(el("button", { type: "button", text: "Edit", "aria-label": "Edit message", onclick: () => startEdit(m) }));
    }
    bar.append(el("button", { type: "button", text: "Delete", "aria-label": "Delete message", onclick: () => remove(m) }));
  } else {
    bar.append(el("button", { type: "button", text: "Report", "aria-label": "Report message", title: "Report it to the admins", onclick: () => openReport(m) }));
  }
  return bar;
}

/** A message from a blocked user, folded: a click shows it. */
function foldedNode(m) {
  return el(
    "div",
    { class: "msg blocked", "data-seq": String(m.seq), "data-message-id": m.message_id },
    el("span", { class: "body", text: FOLDED }),
    el("button", { type: "button", text: "Show", "aria-label": "Show message from a blocked user", onclick: () => foldAgain(m, false) }),
  );
}

/** Shows (or folds again) a message from a blocked user. */
function foldAgain(m, fold) {
  if (fold) unfolded.delete(m.message_id);
  else unfolded.add(m.message_id);
  renderMessages();
  if (panel) renderPanel();
}

/** One stored message: `inThread` in the thread panel. */
function messageNode(state, m, inThread = false) {
  if (folded(m)) return foldedNode(m);
  const system = m.content?.kind === "system";
  const mine = m.sender_id === me && !system;
  const live = !m.deleted_at && !system;
  const body = m.content && (m.content.kind === "image" || m.content.kind === "file" || m.content.kind === "voice")
    ? mediaNode(m.content)
    : m.content?.kind === "text"
      ? bodyNode(m, m.content.text)
      : m.content?.kind === "custom"
        ? el("span", { class: "body custom", title: m.content.type, text: describe(m.content) })
        : m.content?.kind === "poll"
          ? pollNode(m)
          : el("span", { class: "body", text: describe(m.content) });
  const meta = el("span", { class: "meta" });
  if (!mine && !system) meta.append(avatarNode(m.sender_id), el("span", { class: "sender", title: m.sender_id, text: nameOf(m.sender_id) }));
  meta.append(el("time", { text: new Date(m.created_at).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) }));
  if (m.edited_at && !m.deleted_at) meta.append(el("span", { text: "edited" }));
  if (m.sender_device === SCHEDULED_DEVICE && !system) meta.append(el("span", { class: "scheduled-mark", title: "Sent at the time it was scheduled for", "aria-label": "scheduled", text: "🕒" }));
  if (!system && !m.deleted_at && client.isBlockedSender(m)) {
    meta.append(
      el(
        "span",
        { class: "from-blocked" },
        "blocked user ",
        el("button", { type: "button", text: "Hide", "aria-label": "Hide message from a blocked user", onclick: () => foldAgain(m, true) }),
      ),
    );
  }
  const pinned = state.isPinned(m.message_id);
  if (pinned) meta.append(el("span", { class: "pin-mark", title: "Pinned", "aria-label": "pinned", text: "📌" }));
  if (mine) {
    const [state_, symbol, label] = tickOf(state, m.seq);
    meta.append(el("span", { class: "tick", "data-state": state_, "aria-label": label, title: label, text: symbol }));
  }
  const classes = ["msg"];
  if (mine) classes.push("mine");
  if (system) classes.push("system");
  if (!mine && live && mentionsUser(m, me)) classes.push("mentions-me");
  if (inThread && m.message_id === panel?.root) classes.push("root");
  if (flashing?.id === m.message_id) classes.push("flash");
  const node = el("div", { class: classes.join(" "), "data-seq": String(m.seq), "data-message-id": m.message_id });
  if (m.reply_to && !system) node.append(quoteNode(state, m.reply_to));
  node.append(body);
  const previews = live && m.content?.kind === "text" ? previewsNode(m) : null;
  if (previews) node.append(previews);
  node.append(meta);
  if (live) node.append(reactionsNode(m), toolbarOf(m, inThread, mine, pinned));
  const replies = m.thread?.reply_count ?? 0;
  if (!inThread && replies > 0) {
    node.append(
      el("button", {
        type: "button",
        class: "thread-summary",
        "data-replies": String(replies),
        text: `💬 ${replies} ${replies === 1 ? "reply" : "replies"} · ${m.thread.participants.slice(0, 3).map(nameOf).join(", ")}`,
        onclick: () => openThread(m.message_id),
      }),
    );
  }
  return node;
}

/** One of this client's messages not stored yet: pending (⏱), or
 * failed, with the reason and a way to retry or drop it. One slow mode
 * refused goes again by itself when the wait is over (as a new message:
 * its own client_msg_id stays refused), and says when. */
function outgoingNode(state, o) {
  const meta = el("span", { class: "meta" });
  if (o.status === "failed") {
    const slow = o.error?.code === "rate_limited";
    const at = resendAt.get(o.client_msg_id);
    meta.append(el("span", { class: "tick", "data-state": "failed", "aria-label": "not sent", title: o.error?.message ?? "not sent", text: "⚠" }));
    if (at) meta.append(el("span", { class: "resend-at", "data-resend-at": String(at), text: resendText(at) }));
    meta.append(
      el(
        "span",
        { class: "actions" },
        at
          ? ""
          : el("button", {
              type: "button",
              text: "Retry",
              "aria-label": "Retry sending",
              onclick: () => (slow ? client.resendAsNew(o) : o.retry()).catch(() => {}),
            }),
        el("button", { type: "button", text: "Discard", "aria-label": "Discard message", onclick: () => o.discard() }),
      ),
    );
  } else {
    meta.append(el("span", { class: "tick", "data-state": "sending", "aria-label": "sending", text: "⏱" }));
  }
  const node = el("div", { class: `msg mine ${o.status}`, "data-client-msg-id": o.client_msg_id, "data-status": o.status });
  if (o.reply_to) node.append(quoteNode(state, o.reply_to));
  node.append(o.content.kind === "text" ? bodyNode(o, o.content.text) : el("span", { class: "body", text: describe(o.content) }), meta);
  return node;
}

// Disappearing messages leave the open conversation when their time
// comes, and polls close at theirs: checked every second, redrawn only
// when one more is due.
const expiredOut = new Set();
const pollsClosedAt = new Set(); // polls drawn closed by their closes_at
setInterval(() => {
  if (!current) return;
  const now = Date.now();
  const timeline = client.conversation(current).timeline;
  const due = timeline.some((m) => m.expires_at && Date.parse(m.expires_at) <= now && !expiredOut.has(m.message_id));
  const closing = timeline.filter((m) => m.content?.kind === "poll" && m.content.closes_at && Date.parse(m.content.closes_at) <= now && !pollsClosedAt.has(m.message_id));
  for (const m of closing) pollsClosedAt.add(m.message_id);
  if (due || closing.length) renderMessages();
  if (closing.length && panel?.kind === "thread") renderPanel();
}, 1000);

function renderMessages(toBottom = false) {
  if (!current) return;
  const box = $("messages");
  const atBottom = toBottom || box.scrollHeight - box.scrollTop - box.clientHeight < 40;
  const state = client.conversation(current);
  const nodes = [];
  if (nextBefore.get(current)) {
    nodes.push(
      el("button", {
        id: "earlier",
        type: "button",
        text: "Load earlier messages",
        onclick: async () => {
          const height = box.scrollHeight;
          await loadEarlier(current);
          renderMessages();
          box.scrollTop = box.scrollHeight - height;
        },
      }),
    );
  }
  // The main timeline: thread replies show in their thread (the panel),
  // counted on their root. A message past its expires_at is gone: the
  // server sends nothing when it expires, so the page drops it itself.
  const now = Date.now();
  for (const m of state.timeline) {
    if (m.expires_at && Date.parse(m.expires_at) <= now) {
      expiredOut.add(m.message_id);
      continue;
    }
    nodes.push(messageNode(state, m));
  }
  for (const o of state.outgoing) if (!o.thread_id) nodes.push(outgoingNode(state, o));
  if (!nodes.length) nodes.push(el("p", { class: "empty", text: "No messages yet." }));
  box.replaceChildren(...nodes);
  // A message just revealed stays in view while it flashes, through the
  // redraws that follow (profiles and receipts arriving change the
  // heights above it); otherwise the view follows the newest message.
  const flashed = flashing && !toBottom && box.querySelector(`[data-message-id="${CSS.escape(flashing.id)}"]`);
  if (flashed) flashed.scrollIntoView({ block: "center" });
  else if (atBottom) box.scrollTop = box.scrollHeight;
}

/** The header's buttons: which panel is open, how many pins, the admin
 * screen for owners and admins, blocking the other side of a direct
 * conversation (which closes it: nothing can be written there then);
 * and slow mode in the compose box. */
function renderTools() {
  $("show-blocked").setAttribute("aria-pressed", panel?.kind === "blocked" ? "true" : "false");
  $("show-profile").setAttribute("aria-pressed", panel?.kind === "profile" ? "true" : "false");
  $("show-reports").setAttribute("aria-pressed", panel?.kind === "reports" ? "true" : "false");
  $("show-moderation").setAttribute("aria-pressed", panel?.kind === "moderation" ? "true" : "false");
  $("show-channels").setAttribute("aria-pressed", panel?.kind === "channels" ? "true" : "false");
  if (!current) return;
  const state = client.conversation(current);
  $("pin-count").textContent = String(state.pins.length);
  for (const [id, kind] of [["show-threads", "threads"], ["show-pins", "pins"], ["show-members", "members"], ["show-notifications", "notifications"], ["show-admin", "admin"], ["show-scheduled", "scheduled"]]) {
    $(id).setAttribute("aria-pressed", panel?.kind === kind ? "true" : "false");
  }
  $("show-scheduled").textContent = panel?.kind === "scheduled" ? "Hide" : "Show";
  const direct = kindOf() === "direct";
  $("show-admin").hidden = direct || !canModerate();
  const other = otherMember();
  const blocked = other !== undefined && client.isBlocked(other);
  const button = $("block-user");
  button.hidden = !other;
  if (other) {
    button.textContent = blocked ? "Unblock" : "Block";
    button.setAttribute("aria-label", `${blocked ? "Unblock" : "Block"} ${other}`);
    button.title = blocked ? `Unblock ${other}: you may write to each other again` : `Block ${other}: neither of you can write here`;
  }
  $("blocked-note").hidden = !blocked;
  $("blocked-note").textContent = blocked ? `You blocked ${other}: neither of you can write here until you unblock them.` : "";
  // An announcement channel (v1.3): plain members react and reply in
  // threads; the main composer is read-only for them.
  const readOnly = channelOf(current).posting === "admins" && !canModerate();
  $("posting-note").hidden = !readOnly;
  $("posting-note").textContent = readOnly ? "Only owners and admins post here: react to messages, or reply in a thread." : "";
  for (const input of [$("text"), $("send"), $("attach"), $("schedule"), $("poll")]) input.disabled = blocked || readOnly;
  if (blocked || readOnly) {
    showSchedulePicker(false);
    showPollForm(false);
  }
  const slow = (state.policy ?? client.conversationList.get(current))?.slow_mode_secs ?? 0;
  $("text").placeholder = readOnly
    ? "Only owners and admins post here"
    : slow > 0 && !canModerate()
      ? `Message (slow mode: one every ${durationText(slow)})`
      : "Message";
}

/** Seconds in words: "45 s", "5 min", "2 h", "3 days". */
function durationText(secs) {
  if (secs % 86_400 === 0) return secs === 86_400 ? "1 day" : `${secs / 86_400} days`;
  if (secs % 3600 === 0) return `${secs / 3600} h`;
  if (secs % 60 === 0) return `${secs / 60} min`;
  return `${secs} s`;
}

// ---- Slow mode: a refused send says how long to wait, and goes again
// by itself (as a new message) when the wait is over ----

/** An `outgoing` event: a send slow mode refused (its error says how
 * long to wait) is sent again as a new message once the wait is over,
 * unless it was discarded meanwhile. */
function slowModeRefusal(o) {
  const wait = o.error?.retryAfterMs;
  if (o.status !== "failed" || typeof wait !== "number" || resendAt.has(o.client_msg_id)) return;
  const at = Date.now() + wait;
  resendAt.set(o.client_msg_id, at);
  slowUntil.set(o.conversation_id, Math.max(slowUntil.get(o.conversation_id) ?? 0, at));
  setTimeout(() => {
    resendAt.delete(o.client_msg_id);
    if (client.outgoing(o.client_msg_id) !== o || o.status !== "failed") return;
    client.resendAsNew(o).catch(() => {});
  }, wait);
  if (slowTicker === null) slowTicker = setInterval(renderSlowMode, 1000);
  renderSlowMode();
  if (o.conversation_id === current) {
    renderMessages();
    if (panel?.kind === "thread") renderPanel();
  }
}

function resendText(at) {
  const left = Math.max(0, Math.ceil((at - Date.now()) / 1000));
  return `slow mode: sends again in ${left} s`;
}

/** The open conversation's slow-mode note and the countdowns on its
 * refused messages; the ticker stops when no wait is left. */
function renderSlowMode() {
  const now = Date.now();
  const until = current ? (slowUntil.get(current) ?? 0) : 0;
  const left = Math.ceil((until - now) / 1000);
  $("slow-mode").hidden = left <= 0;
  $("slow-mode").textContent = left > 0 ? `Slow mode is on here: you can send again in ${left} s.` : "";
  for (const node of document.querySelectorAll("[data-resend-at]")) node.textContent = resendText(Number(node.dataset.resendAt));
  for (const [id, at] of slowUntil) if (at <= now) slowUntil.delete(id);
  if (slowUntil.size === 0 && resendAt.size === 0 && slowTicker !== null) {
    clearInterval(slowTicker);
    slowTicker = null;
  }
}

function renderTyping() {
  if (!current) return;
  const users = client.conversation(current).typingUsers().filter((u) => u !== me);
  $("typing").textContent =
    users.length === 0 ? "" : users.length === 1 ? `${nameOf(users[0])} is typing…` : `${users.map(nameOf).join(", ")} are typing…`;
}

async function renderPresence() {
  const detail = current && details.get(current);
  if (!detail || detail.kind !== "direct") {
    $("presence").textContent = "";
    return;
  }
  const other = detail.members.map((m) => m.user_id).find((u) => u !== me);
  if (!other) return;
  let p = client.presence.get(other);
  if (!p) {
    try {
      p = await client.rest.presence(other);
      client.presence.set(other, { status: p.status, last_seen: p.last_seen });
    } catch {
      return;
    }
  }
  $("presence").textContent =
    p.status === "online"
      ? "online"
      : p.last_seen
        ? `last seen ${new Date(p.last_seen).toLocaleString([], { hour: "2-digit", minute: "2-digit" })}`
        : "offline";
}

// ---- The side panel: a thread, the threads, the pins, the members,
// the notification settings, the admin screen, a report; and the blocked
// users and a tenant admin's reports ----

const PANEL_TITLES = {
  thread: "Thread",
  threads: "Threads",
  pins: "Pinned messages",
  members: "Members",
  notifications: "Notifications",
  admin: "Conversation admin",
  report: "Report a message",
  blocked: "Blocked users",
  reports: "Reports",
  search: "Search",
  scheduled: "Scheduled messages",
  profile: "My profile",
  channels: "Public channels",
  invite: "Invitation",
  moderation: "Moderation",
};

function showPanel(next) {
  panel = next;
  $("panel").hidden = false;
  $("panel").dataset.kind = next.kind;
  $("thread-compose").hidden = next.kind !== "thread";
  $("thread-suggest").hidden = true;
  showError("panel-error", "");
  renderPanel();
  renderTools();
}

function closePanel() {
  panel = null;
  policyDraft = {};
  $("panel").hidden = true;
  $("thread-text").value = "";
  renderTools();
}

$("close-panel").addEventListener("click", () => {
  closePanel();
  $("text").focus();
});

/** A header button opens its panel, or closes it when it is open. */
function panelButton(id, kind, load) {
  $(id).addEventListener("click", async () => {
    if (panel?.kind === kind) {
      closePanel();
      return;
    }
    showPanel({ kind });
    if (!load) return;
    const conversation = current;
    try {
      await load(conversation);
      if (current === conversation && panel?.kind === kind) renderPanel();
    } catch (e) {
      showError("panel-error", e.message);
    }
  });
}

panelButton("show-threads", "threads", async (id) => {
  threadList = await client.rest.threads(id);
});
panelButton("show-pins", "pins", loadPins);
panelButton("show-members", "members", async (id) => {
  details.set(id, await client.rest.conversation(id));
});
panelButton("show-notifications", "notifications", async (id) => {
  settingsOf.set(id, await client.rest.settings(id));
});
panelButton("show-scheduled", "scheduled", () => refreshScheduled());
panelButton("show-admin", "admin", async (id) => {
  // The conversation (its policy and roles: the SDK's state takes them),
  // its bans and its invites.
  const [detail, bans, invites, mutes] = await Promise.all([
    client.rest.conversation(id),
    client.rest.bans(id),
    client.rest.invites(id),
    client.rest.mutes(id),
  ]);
  details.set(id, detail);
  bansOf.set(id, bans.bans);
  invitesOf.set(id, invites.invites);
  mutesOf.set(id, mutes);
});

// A tenant admin's moderation tools (v1.3), read afresh each time.
$("show-moderation").addEventListener("click", () => {
  if (panel?.kind === "moderation") {
    closePanel();
    return;
  }
  moderationView = { list: null, previews: null, bans: null, shadow: null, audit: null, told: "" };
  showPanel({ kind: "moderation" });
  loadModeration();
});

// The public channels are the tenant's: the panel opens without a
// conversation, read afresh each time.
$("show-channels").addEventListener("click", () => {
  if (panel?.kind === "channels") {
    closePanel();
    return;
  }
  channelsView = { q: "", channels: null, next: null };
  showPanel({ kind: "channels" });
  loadChannels("");
});

// The blocked users are the user's own, not the open conversation's: the
// panel opens without one too.
$("show-blocked").addEventListener("click", () => {
  if (panel?.kind === "blocked") closePanel();
  else showPanel({ kind: "blocked" });
});

// So are a tenant admin's reports (read afresh each time they open).
$("show-reports").addEventListener("click", () => {
  if (panel?.kind === "reports") {
    closePanel();
    return;
  }
  reportsView = { status: "open", reports: null, next: null, told: "" };
  showPanel({ kind: "reports" });
  loadReports("open");
});

$("export-data").addEventListener("click", downloadMyData);

$("block-user").addEventListener("click", () => {
  const other = otherMember();
  if (other) toggleBlock(other, "chat-error");
});

/** Opens a thread: its root and replies, and a box to reply in it. */
async function openThread(root) {
  const conversation = current;
  showPanel({ kind: "thread", root });
  $("thread-text").focus();
  const key = `${conversation}\u0000${root}`;
  if (!threadsRead.has(key)) {
    try {
      const page = await client.rest.threadHistory(conversation, root, { limit: 100 });
      const state = client.conversation(conversation);
      for (const m of page.messages) state.update(m);
      threadsRead.add(key);
    } catch (e) {
      showError("panel-error", e.message);
    }
  }
  if (current === conversation && panel?.kind === "thread" && panel.root === root) {
    renderPanel();
    markThreadRead();
  }
}

function renderPanel() {
  if (!panel || (!current && !USER_PANELS.has(panel.kind))) return;
  $("panel-title").textContent = PANEL_TITLES[panel.kind];
  const body = $("panel-body");
  const render = {
    thread: threadPanel,
    threads: threadsPanel,
    pins: pinsPanel,
    members: membersPanel,
    notifications: notificationsPanel,
    admin: adminPanel,
    report: reportPanel,
    blocked: blockedPanel,
    reports: reportsPanel,
    search: searchPanel,
    scheduled: scheduledPanel,
    profile: profilePanel,
    channels: channelsPanel,
    invite: invitePanel,
    moderation: moderationPanel,
  }[panel.kind];
  const atBottom = body.scrollHeight - body.scrollTop - body.clientHeight < 40;
  if (panel.kind === "admin") panel.shows = adminSignature();
  body.replaceChildren(...render(current ? client.conversation(current) : null));
  if (panel.kind === "thread" && atBottom) body.scrollTop = body.scrollHeight;
}

function threadPanel(state) {
  const root = state.get(panel.root);
  if (!root) return [el("p", { class: "note", text: "Loading the thread…" })];
  const replies = state.thread(panel.root);
  const count = Math.max(replies.length, root.thread?.reply_count ?? 0);
  const nodes = [
    messageNode(state, root, true),
    el("div", { class: "divider" }, el("span", { text: count === 1 ? "1 reply" : `${count} replies` })),
    ...replies.map((m) => messageNode(state, m, true)),
  ];
  for (const o of state.outgoing) if (o.thread_id === panel.root) nodes.push(outgoingNode(state, o));
  return nodes;
}

function threadsPanel() {
  if (!threadList) return [el("p", { class: "note", text: "Loading…" })];
  if (!threadList.threads.length) return [el("p", { class: "note", text: "You take part in no thread here yet: reply in one, or start one with “Thread” on a message." })];
  return [
    el(
      "ul",
      {},
      ...threadList.threads.map((t) =>
        el(
          "li",
          { "data-thread": t.root.message_id },
          el(
            "div",
            { class: "row" },
            el("span", { text: quoteText(t.root) }),
            t.unread_count > 0 ? el("span", { class: "unread", text: String(t.unread_count), "aria-label": `${t.unread_count} unread` }) : "",
          ),
          el(
            "div",
            { class: "row" },
            el("span", { class: "note", text: `${t.reply_count} ${t.reply_count === 1 ? "reply" : "replies"}` }),
            el("button", { type: "button", text: "Open", "aria-label": "Open thread", onclick: () => openThread(t.root.message_id) }),
          ),
        ),
      ),
    ),
  ];
}

function pinsPanel(state) {
  const pins = state.pins;
  if (!pins.length) return [el("p", { class: "note", text: "Nothing is pinned. Owners and admins pin messages with “Pin”." })];
  return [
    el(
      "ul",
      {},
      ...pins.map((p) => {
        const m = state.get(p.message_id) ?? pinnedMessages.get(p.message_id);
        return el(
          "li",
          { "data-pin": p.message_id },
          el("span", { text: m ? quoteText(m) : "a message not loaded here" }),
          el(
            "div",
            { class: "row" },
            el("span", { class: "note", text: `📌 by ${p.by}` }),
            state.get(p.message_id) ? el("button", { type: "button", text: "Show", "aria-label": "Show pinned message", onclick: () => reveal(p.message_id) }) : "",
            canPin() ? el("button", { type: "button", text: "Unpin", "aria-label": "Unpin message", onclick: () => togglePin(p.message_id, true) }) : "",
          ),
        );
      }),
    ),
  ];
}

function membersPanel(state) {
  const mine = myRole();
  const kind = details.get(current)?.kind;
  const nodes = [];
  if (kind === "direct") nodes.push(el("p", { class: "note", text: "A direct conversation has no roles." }));
  const order = (u) => ROLES.indexOf(state.roleOf(u) ?? "member");
  const members = memberIds().sort((a, b) => order(a) - order(b) || (a < b ? -1 : 1));
  nodes.push(
    el(
      "ul",
      {},
      ...members.map((user) => {
        const role = state.roleOf(user) ?? "member";
        // Owners and admins change roles; only an owner makes owners or
        // changes an owner's.
        const mayChange = kind !== "direct" && user !== me && (mine === "owner" || (mine === "admin" && role !== "owner"));
        const blocked = user !== me && client.isBlocked(user);
        const row = el(
          "div",
          { class: "row" },
          el("span", { class: "person", title: user }, avatarNode(user), " ", user === me ? `${nameOf(user)} (you)` : nameOf(user), statusNode(user)),
          blocked ? el("span", { class: "blocked-tag", text: "blocked" }) : "",
          el("span", { class: "role", "data-role": role, text: role }),
        );
        if (mayChange) {
          const select = el(
            "select",
            { "aria-label": `Role of ${user}`, "data-member": user, onchange: () => changeRole(user, select.value) },
            ...ROLES.filter((r) => r !== "owner" || mine === "owner").map((r) => el("option", { value: r, text: r, selected: r === role })),
          );
          row.append(select);
        }
        if (user !== me) {
          row.append(
            el("button", {
              type: "button",
              text: blocked ? "Unblock" : "Block",
              "aria-label": `${blocked ? "Unblock" : "Block"} ${user}`,
              onclick: () => toggleBlock(user, "panel-error"),
            }),
          );
        }
        return el("li", { "data-member": user }, row);
      }),
    ),
  );
  if (kind !== "direct" && mine !== "owner" && mine !== "admin") nodes.push(el("p", { class: "note", text: "Owners and admins change roles." }));
  return nodes;
}

async function changeRole(user, role) {
  showError("panel-error", "");
  try {
    details.set(current, await client.rest.changeRole(current, user, role));
  } catch (e) {
    showError("panel-error", e.message);
  }
  renderPanel();
}

function notificationsPanel() {
  const listed = client.conversationList.get(current);
  const settings = settingsOf.get(current) ?? { notifications: listed?.notifications ?? "all", muted_until: null };
  const until = settings.muted_until ? Date.parse(settings.muted_until) : 0;
  const muted = until > Date.now() || (!settingsOf.has(current) && listed?.muted);
  const levels = el(
    "fieldset",
    {},
    el("legend", { text: "Notify me of" }),
    ...Object.entries(LEVELS).map(([level, label]) =>
      el(
        "label",
        {},
        el("input", {
          type: "radio",
          name: "level",
          value: level,
          checked: settings.notifications === level,
          onchange: () => saveSettings({ notifications: level, muted_until: settings.muted_until }),
        }),
        ` ${label}`,
      ),
    ),
  );
  const mute = el(
    "fieldset",
    {},
    el("legend", { text: "Mute" }),
    el("span", {
      id: "mute-state",
      class: "note",
      text: muted ? (until ? `Muted until ${new Date(until).toLocaleString([], { weekday: "short", hour: "2-digit", minute: "2-digit" })}` : "Muted") : "Not muted",
    }),
    muted
      ? el("button", { type: "button", id: "unmute", text: "Unmute", onclick: () => saveSettings({ notifications: settings.notifications, muted_until: null }) })
      : el("button", {
          type: "button",
          id: "mute",
          text: `Mute for ${MUTE_HOURS} hours`,
          onclick: () => saveSettings({ notifications: settings.notifications, muted_until: new Date(Date.now() + MUTE_HOURS * 3_600_000).toISOString() }),
        }),
  );
  return [levels, mute, el("p", { class: "note", text: "These are yours alone, on all your devices." })];
}

// ---- The admin screen (owners and admins): the bans, and the settings
// that affect every member ----

/** What the admin panel shows, in one string: it is drawn again only
 * when this changes. */
function adminSignature() {
  const state = client.conversation(current);
  const channel = channelOf(current);
  return JSON.stringify([
    state.policy ?? null,
    bansOf.get(current) ?? null,
    [...state.roles],
    myRole() ?? null,
    channel,
    invitesOf.get(current) ?? null,
    mutesOf.get(current) ?? null,
  ]);
}

/** The members the caller may ban: not themselves, never an owner, and
 * an admin bans plain members only. */
function bannable(state) {
  const mine = myRole();
  return memberIds()
    .filter((u) => u !== me)
    .filter((u) => {
      const role = state.roleOf(u) ?? "member";
      return role !== "owner" && (mine === "owner" || role === "member");
    })
    .sort();
}

/** A number field of the admin panel: the draft while typed, else the
 * setting ("" for none). */
function policyField(key, label, hint, min, max, value) {
  const shown = policyDraft[key] ?? (value === null || value === undefined ? "" : String(value));
  return el(
    "label",
    {},
    label,
    el("input", {
      type: "number",
      id: key.replace(/_/g, "-"),
      min: String(min),
      max: String(max),
      value: shown,
      placeholder: hint,
      oninput: (event) => (policyDraft[key] = event.target.value),
    }),
  );
}

function adminPanel(state) {
  const bans = bansOf.get(current);
  const policy = state.policy ?? client.conversationList.get(current) ?? {};
  const settings = el(
    "fieldset",
    { "aria-label": "Settings for everyone" },
    el("legend", { text: "Settings for everyone" }),
    policyField("slow_mode_secs", "Slow mode: seconds between a member's messages", "0: off", 0, 21600, policy.slow_mode_secs ?? 0),
    policyField("retention_days", "Keep messages for (days)", "empty: forever", 1, 36500, policy.retention_days),
    policyField("disappearing_secs", "Disappearing messages after (seconds)", "empty: off", 5, 31536000, policy.disappearing_secs),
    el("button", { type: "button", id: "save-policy", text: "Save settings", onclick: savePolicy }),
    el("span", {
      class: "note",
      text: "Owners and admins are not held by slow mode. Messages sent while retention or disappearing messages are on go for good at their expiry, within a minute; retention also takes older messages.",
    }),
  );
  const candidates = bannable(state);
  const who = el("select", { id: "ban-user", "aria-label": "Member to ban" }, ...candidates.map((u) => el("option", { value: u, text: u })));
  const howLong = el("select", { id: "ban-for", "aria-label": "Ban length" }, ...BAN_FOR.map(([secs, label]) => el("option", { value: secs, text: label })));
  const banForm = el(
    "fieldset",
    { "aria-label": "Ban a member" },
    el("legend", { text: "Ban a member" }),
    candidates.length
      ? el("div", { class: "row" }, who, howLong)
      : el("span", { class: "note", text: mineIsAdmin() ? "No plain member to ban (an admin bans members only)." : "No member to ban." }),
    candidates.length ? el("button", { type: "button", id: "ban", text: "Ban", onclick: () => banMember(who.value, howLong.value) }) : "",
    el("span", { class: "note", text: "A ban takes them out, and keeps them from being added again until it is lifted or ends." }),
  );
  const list = !bans
    ? el("p", { class: "note", text: "Loading the bans…" })
    : !bans.length
      ? el("p", { class: "note", id: "no-bans", text: "Nobody is banned." })
      : el(
          "ul",
          { "aria-label": "Bans" },
          ...bans.map((b) =>
            el(
              "li",
              { "data-ban": b.user_id },
              el(
                "div",
                { class: "row" },
                el("span", { text: b.user_id }),
                el("button", { type: "button", text: "Lift", "aria-label": `Lift ban on ${b.user_id}`, onclick: () => liftBan(b.user_id) }),
              ),
              el("span", { class: "note", text: `by ${b.by}, ${b.until ? `until ${timeText(b.until)}` : "until lifted"}` }),
            ),
          ),
        );
  return [settings, freezeFieldset(policy), muteFieldset(state), channelFieldset(), invitesFieldset(), banForm, el("strong", { text: "Banned" }), list];
}

// ---- Mutes and freezing (v1.3): owners' and admins' tools ----

/** Freezing: while frozen, only owners and admins post, react or change
 * the members. */
function freezeFieldset(policy) {
  const frozen = policy.frozen === true;
  return el(
    "fieldset",
    { "aria-label": "Freeze" },
    el("legend", { text: "Freeze" }),
    el("span", {
      class: "note",
      id: "frozen-state",
      "data-frozen": String(frozen),
      text: frozen ? "Frozen: only owners and admins post, react or change the members." : "Open: everyone posts as usual.",
    }),
    el("button", { type: "button", id: "toggle-freeze", text: frozen ? "Thaw conversation" : "Freeze conversation", onclick: () => setFrozen(!frozen) }),
  );
}

async function setFrozen(frozen) {
  showError("panel-error", "");
  const conversation = current;
  try {
    // The SDK's state takes the answer (every member gets the change).
    details.set(conversation, await client.rest.freeze(conversation, frozen));
  } catch (e) {
    showError("panel-error", e.message);
  }
  if (current === conversation && panel?.kind === "admin") renderPanel();
  renderTools();
}

/** The members who may be muted: plain members, not the caller. */
function mutable(state) {
  return memberIds()
    .filter((u) => u !== me && (state.roleOf(u) ?? "member") === "member")
    .sort();
}

function muteFieldset(state) {
  const mutes = mutesOf.get(current);
  const muted = new Set((mutes ?? []).map((m) => m.user_id));
  const candidates = mutable(state).filter((u) => !muted.has(u));
  const who = el("select", { id: "mute-user", "aria-label": "Member to mute" }, ...candidates.map((u) => el("option", { value: u, text: u })));
  const howLong = el("select", { id: "mute-for", "aria-label": "Mute length" }, ...BAN_FOR.map(([secs, label]) => el("option", { value: secs, text: label })));
  const list = !mutes
    ? el("p", { class: "note", text: "Loading the mutes…" })
    : !mutes.length
      ? el("p", { class: "note", id: "no-mutes", text: "Nobody is muted." })
      : el(
          "ul",
          { "aria-label": "Mutes" },
          ...mutes.map((m) =>
            el(
              "li",
              { "data-mute": m.user_id },
              el(
                "div",
                { class: "row" },
                el("span", { text: m.user_id }),
                el("button", { type: "button", text: "Unmute", "aria-label": `Unmute ${m.user_id}`, onclick: () => unmuteMember(m.user_id) }),
              ),
              el("span", { class: "note", text: `by ${m.by}, ${m.until ? `until ${timeText(m.until)}` : "until lifted"}` }),
            ),
          ),
        );
  return el(
    "fieldset",
    { "aria-label": "Mute a member" },
    el("legend", { text: "Mute a member" }),
    candidates.length ? el("div", { class: "row" }, who, howLong) : el("span", { class: "note", text: "No plain member to mute." }),
    candidates.length ? el("button", { type: "button", id: "mute", text: "Mute", onclick: () => muteMember(who.value, howLong.value) }) : "",
    el("span", { class: "note", text: "A muted member stays and reads, but cannot post, reply, react or edit." }),
    list,
  );
}

async function refreshMutes(id) {
  try {
    mutesOf.set(id, await client.rest.mutes(id));
  } catch (e) {
    showError("panel-error", e.message);
  }
  if (current === id && panel?.kind === "admin") renderPanel();
}

async function muteMember(user, forSecs) {
  showError("panel-error", "");
  if (!user) return;
  const conversation = current;
  try {
    await client.rest.mute(conversation, user, forSecs ? new Date(Date.now() + Number(forSecs) * 1000).toISOString() : undefined);
  } catch (e) {
    showError("panel-error", e.message);
  }
  await refreshMutes(conversation);
}

async function unmuteMember(user) {
  showError("panel-error", "");
  const conversation = current;
  try {
    await client.rest.unmute(conversation, user);
  } catch (e) {
    showError("panel-error", e.message);
  }
  await refreshMutes(conversation);
}

// ---- A tenant admin's moderation (v1.3): the word list, link previews
// on or off, bans from the whole app, shadow bans and the audit log ----

const AUDITED = {
  blocklist_set: "set the word list",
  user_banned: "banned",
  user_unbanned: "lifted the ban on",
  user_shadow_banned: "shadow-banned",
  user_shadow_unbanned: "lifted the shadow ban on",
  member_muted: "muted",
  member_unmuted: "unmuted",
  conversation_frozen: "froze",
  conversation_thawed: "thawed",
};

async function loadModeration(told = "") {
  const view = moderationView;
  try {
    const [list, previews, bans, shadow, audit] = await Promise.all([
      client.rest.blocklist(),
      client.rest.previewSettings(),
      client.rest.tenantBans({ limit: 100 }),
      client.rest.shadowBans({ limit: 100 }),
      client.rest.auditLog({ limit: 20 }),
    ]);
    if (moderationView !== view) return;
    Object.assign(view, { list, previews, bans: bans.bans, shadow: shadow.bans, audit: audit.entries, told });
  } catch (e) {
    showError("panel-error", e.message);
  }
  if (panel?.kind === "moderation") renderPanel();
}

/** Runs a tenant admin's change, then reads the panel again saying
 * `told` (or the error). */
async function moderate(change, told) {
  showError("panel-error", "");
  try {
    await change();
  } catch (e) {
    showError("panel-error", e.message);
    return;
  }
  await loadModeration(told);
}

function moderationPanel() {
  const view = moderationView;
  const nodes = [];
  if (view.told) nodes.push(el("p", { class: "confirm", id: "moderation-state", role: "status", text: view.told }));
  if (!view.list) return [...nodes, el("p", { class: "note", text: "Loading…" })];
  const words = el("textarea", {
    id: "blocklist-words",
    rows: "3",
    "aria-label": "Words, separated by commas or lines",
    placeholder: "words, separated by commas or lines",
  });
  words.value = view.list.words.join(", ");
  const mode = el(
    "select",
    { id: "blocklist-mode", "aria-label": "What a listed word does" },
    el("option", { value: "reject", text: "refuse the message" }),
    el("option", { value: "mask", text: "mask the word (****)" }),
  );
  mode.value = view.list.mode;
  nodes.push(
    el(
      "fieldset",
      { "aria-label": "Word list" },
      el("legend", { text: "Word list" }),
      words,
      mode,
      el("button", {
        type: "button",
        text: "Save word list",
        onclick: () => {
          const list = words.value.split(/[\s,]+/).filter(Boolean);
          moderate(() => client.rest.setBlocklist(list, mode.value), list.length ? "Word list saved." : "Word list off.");
        },
      }),
      el("span", { class: "note", text: "Checked in every message and edit, before your app's own plugin." }),
    ),
  );
  nodes.push(previewsSwitch(view.previews.enabled));
  nodes.push(banSection(view.bans, "tenant", "Ban from the app", "Their sign-ins are refused and their open sessions end."));
  nodes.push(banSection(view.shadow, "shadow", "Shadow ban", "Their messages seem to go, but only they see them."));
  nodes.push(
    el("strong", { text: "Recent changes" }),
    !view.audit.length
      ? el("p", { class: "note", id: "no-audit", text: "No changes yet." })
      : el(
          "ul",
          { "aria-label": "Audit log" },
          ...view.audit.map((e) =>
            el(
              "li",
              { "data-audit-action": e.action },
              el("span", { text: `${e.actor} ${AUDITED[e.action] ?? e.action}${e.user_id ? ` ${e.user_id}` : ""}` }),
              el("span", { class: "note", text: `${timeText(e.at)}${e.conversation_id ? ` · ${client.conversationList.get(e.conversation_id)?.title ?? e.conversation_id}` : ""}` }),
            ),
          ),
        ),
  );
  return nodes;
}

/** Link previews (v1.3) for the whole app: a switch that turns them on
 * or off for the messages sent from then on. */
function previewsSwitch(enabled) {
  return el(
    "fieldset",
    { "aria-label": "Link previews" },
    el("legend", { text: "Link previews" }),
    el("button", {
      type: "button",
      id: "previews-switch",
      class: "switch",
      role: "switch",
      "aria-checked": enabled ? "true" : "false",
      text: `Link previews: ${enabled ? "on" : "off"}`,
      onclick: () => moderate(() => client.rest.setPreviewSettings(!enabled), enabled ? "Link previews off." : "Link previews on."),
    }),
    el("span", { class: "note", text: "A card under the first links of each text message (title, description, image), fetched by the server. Off: new messages get none; cards already made stay." }),
  );
}

/** A ban form and list, of the whole app (`tenant`) or a shadow one. */
function banSection(bans, kind, legend, note) {
  const user = el("input", { type: "text", id: `${kind}-ban-user`, placeholder: "user id", "aria-label": `${legend}: user`, autocomplete: "off" });
  const reason = el("input", { type: "text", id: `${kind}-ban-reason`, placeholder: "reason (for admins)", "aria-label": `${legend}: reason`, maxLength: 500 });
  const howLong = el("select", { id: `${kind}-ban-for`, "aria-label": `${legend}: length` }, ...BAN_FOR.map(([secs, label]) => el("option", { value: secs, text: label })));
  const put = kind === "tenant" ? (u, opts) => client.rest.banUser(u, opts) : (u, opts) => client.rest.shadowBanUser(u, opts);
  const lift = kind === "tenant" ? (u) => client.rest.unbanUser(u) : (u) => client.rest.unshadowBanUser(u);
  const liftLabel = kind === "tenant" ? "Lift app ban on" : "Lift shadow ban on";
  const submit = () => {
    const who = user.value.trim();
    if (!who) return;
    const opts = {};
    if (reason.value.trim()) opts.reason = reason.value.trim();
    if (howLong.value) opts.until = new Date(Date.now() + Number(howLong.value) * 1000).toISOString();
    moderate(() => put(who, opts), `${who}: ${legend.toLowerCase()} in force.`);
  };
  return el(
    "fieldset",
    { "aria-label": legend },
    el("legend", { text: legend }),
    el("div", { class: "row" }, user, howLong),
    reason,
    el("button", { type: "button", text: kind === "tenant" ? "Ban user" : "Shadow-ban user", onclick: submit }),
    el("span", { class: "note", text: note }),
    !bans.length
      ? el("p", { class: "note", id: `no-${kind}-bans`, text: "Nobody." })
      : el(
          "ul",
          { "aria-label": legend },
          ...bans.map((b) =>
            el(
              "li",
              { [`data-${kind}-ban`]: b.user_id },
              el(
                "div",
                { class: "row" },
                el("span", { text: b.user_id }),
                el("button", { type: "button", text: "Lift", "aria-label": `${liftLabel} ${b.user_id}`, onclick: () => moderate(() => lift(b.user_id), `${b.user_id}: lifted.`) }),
              ),
              el("span", { class: "note", text: `by ${b.by}, ${b.until ? `until ${timeText(b.until)}` : "until lifted"}${b.reason ? ` · ${b.reason}` : ""}` }),
            ),
          ),
        ),
  );
}

function mineIsAdmin() {
  return myRole() === "admin";
}

function timeText(iso) {
  return new Date(iso).toLocaleString([], { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
}

/** Saves the settings typed in (only those that differ: each change is
 * a message to every member); empty retention or disappearing turns it
 * off. */
async function savePolicy() {
  showError("panel-error", "");
  const conversation = current;
  const policy = client.conversation(conversation).policy ?? client.conversationList.get(conversation) ?? {};
  const patch = {};
  for (const key of ["slow_mode_secs", "retention_days", "disappearing_secs"]) {
    if (!(key in policyDraft)) continue;
    const typed = policyDraft[key].trim();
    const value = typed === "" ? (key === "slow_mode_secs" ? 0 : null) : Number(typed);
    if (value !== null && !Number.isInteger(value)) {
      showError("panel-error", `${key}: a whole number, please`);
      return;
    }
    if (value !== (policy[key] ?? (key === "slow_mode_secs" ? 0 : null))) patch[key] = value;
  }
  if (!Object.keys(patch).length) {
    showError("panel-error", "Nothing changed.");
    return;
  }
  try {
    // The SDK's state takes the answer (and every member gets the change
    // as a message).
    details.set(conversation, await client.rest.updateConversation(conversation, patch));
    policyDraft = {};
  } catch (e) {
    showError("panel-error", e.message);
  }
  if (current === conversation && panel?.kind === "admin") renderPanel();
  renderTools();
}

async function refreshBans(id) {
  try {
    bansOf.set(id, (await client.rest.bans(id)).bans);
  } catch (e) {
    showError("panel-error", e.message);
  }
  if (current === id && panel?.kind === "admin") renderPanel();
}

async function banMember(user, forSecs) {
  showError("panel-error", "");
  if (!user) return;
  const conversation = current;
  try {
    await client.rest.ban(conversation, user, forSecs ? new Date(Date.now() + Number(forSecs) * 1000) : undefined);
  } catch (e) {
    showError("panel-error", e.message);
  }
  await refreshBans(conversation);
}

async function liftBan(user) {
  showError("panel-error", "");
  const conversation = current;
  try {
    await client.rest.unban(conversation, user);
  } catch (e) {
    showError("panel-error", e.message);
  }
  await refreshBans(conversation);
}

// ---- Blocks: the user's own list ----

async function toggleBlock(user, errorIn) {
  showError(errorIn, "");
  try {
    // The SDK's set and the messages it holds follow the answer
    // (`blocks_changed` redraws).
    if (client.isBlocked(user)) await client.rest.unblock(user);
    else await client.rest.block(user);
  } catch (e) {
    showError(errorIn, e.message);
  }
}

function renderBlockedCount() {
  const n = client.blocked.size;
  $("blocked-count").textContent = n ? `(${n})` : "";
}

function blockedPanel() {
  const input = el("input", { type: "text", id: "block-id", placeholder: "user id", "aria-label": "User to block", autocomplete: "off" });
  const form = el(
    "fieldset",
    { "aria-label": "Block a user" },
    el("legend", { text: "Block a user" }),
    input,
    el("button", {
      type: "button",
      id: "block",
      text: "Block",
      onclick: () => {
        const user = input.value.trim();
        if (user && !client.isBlocked(user)) toggleBlock(user, "panel-error");
      },
    }),
  );
  const blocks = client.blocked.list();
  const list = blocks.length
    ? el(
        "ul",
        { "aria-label": "Blocked users" },
        ...blocks.map((b) =>
          el(
            "li",
            { "data-blocked": b.user_id },
            el(
              "div",
              { class: "row" },
              el("span", { text: b.user_id }),
              el("button", { type: "button", text: "Unblock", "aria-label": `Unblock ${b.user_id}`, onclick: () => toggleBlock(b.user_id, "panel-error") }),
            ),
            el("span", { class: "note", text: `since ${timeText(b.blocked_at)}` }),
          ),
        ),
      )
    : el("p", { class: "note", id: "no-blocks", text: client.blocked.loaded ? "You block nobody." : "Loading…" });
  return [
    list,
    form,
    el("p", {
      class: "note",
      text: "Neither of you can write in your direct conversation; in groups their messages are folded for you. They are not told.",
    }),
  ];
}

// ---- Reports: any member reports another's message; a tenant admin
// resolves them ----

function openReport(m) {
  showPanel({ kind: "report", message: m, reason: null, note: "", sent: null });
}

/** The report form of a message: a reason and an optional note, then a
 * confirmation once sent. Drawn from its draft in `panel`. */
function reportPanel() {
  const report = panel;
  const m = report.message;
  const quoted = el("p", { class: "reported", text: quoteText(m) });
  if (report.sent) {
    return [
      quoted,
      el("p", {
        class: "confirm",
        id: "report-sent",
        role: "status",
        text: `Thanks: your report (${REASONS[report.reason].toLowerCase()}) went to the admins. ${m.sender_id} is not told.`,
      }),
      el("button", { type: "button", text: "Done", onclick: closePanel }),
    ];
  }
  const form = el(
    "fieldset",
    { "aria-label": "Report" },
    el("legend", { text: "Why are you reporting it?" }),
    ...Object.entries(REASONS).map(([reason, label]) =>
      el(
        "label",
        { class: "choice" },
        el("input", {
          type: "radio",
          name: "report-reason",
          value: reason,
          checked: report.reason === reason,
          onchange: () => {
            report.reason = reason;
            showError("panel-error", "");
          },
        }),
        label,
      ),
    ),
    el(
      "label",
      {},
      "Note for the admins (optional)",
      el("textarea", {
        id: "report-note",
        maxLength: 1000,
        value: report.note,
        placeholder: "What should they know?",
        oninput: (event) => (report.note = event.target.value),
      }),
    ),
    el(
      "div",
      { class: "row" },
      el("button", { type: "button", id: "send-report", text: report.sending ? "Sending…" : "Send report", disabled: report.sending, onclick: sendReport }),
      el("button", { type: "button", text: "Cancel", onclick: closePanel }),
    ),
  );
  return [
    quoted,
    form,
    el("p", { class: "note", text: "The tenant's admins see the message as it is now, who sent it, your reason and note, and that you reported it." }),
  ];
}

async function sendReport() {
  const report = panel;
  showError("panel-error", "");
  if (!report.reason) {
    showError("panel-error", "Pick a reason first.");
    return;
  }
  report.sending = true;
  renderPanel();
  try {
    const note = report.note.trim();
    report.sent = (await client.rest.report(report.message.conversation_id, report.message.message_id, report.reason, note || undefined)).report_id;
  } catch (e) {
    showError("panel-error", e.status === 429 ? "That is many reports in a minute: try again shortly." : e.message);
  }
  report.sending = false;
  if (panel === report) renderPanel();
}

/** Reads the reports (`status`: open or resolved) afresh, or (`more`)
 * their next page; `told` says what the last resolution did. */
async function loadReports(status, { more = false, told = "" } = {}) {
  const asked = ++reportsAsked;
  const cursor = more ? reportsView.next : undefined;
  if (!more) reportsView = { status, reports: null, next: null, told };
  if (panel?.kind === "reports") renderPanel();
  try {
    const page = await client.rest.reports({ status, limit: 50, ...(cursor ? { cursor } : {}) });
    if (asked !== reportsAsked) return;
    reportsView.reports = [...(more ? reportsView.reports : []), ...page.reports];
    reportsView.next = page.next_cursor;
  } catch (e) {
    if (asked !== reportsAsked) return;
    reportsView.reports ??= [];
    showError("panel-error", e.message);
  }
  if (panel?.kind === "reports") renderPanel();
}

async function resolveReport(r, action) {
  showError("panel-error", "");
  reportsView.busy = r.report_id;
  renderPanel();
  let told = "";
  try {
    const resolved = await client.rest.resolveReport(r.report_id, action);
    told = `${RESOLVED_AS[resolved.action]}: the report by ${resolved.reporter} on ${resolved.sender_id}'s message is resolved.`;
  } catch (e) {
    showError("panel-error", e.message);
  }
  await loadReports(reportsView.status, { told });
}

/** What a report's message said, as reported. */
function reportedText(r) {
  if (!r.message) return "(encrypted: the server cannot read it)";
  return r.message.content ? describe(r.message.content) : "(deleted before it was reported)";
}

/** A tenant admin's reports: the open ones (to dismiss, delete the
 * message, or ban its sender), or the resolved ones on request. */
function reportsPanel() {
  const view = reportsView;
  const tabs = el(
    "div",
    { class: "tabs", role: "group", "aria-label": "Which reports" },
    ...[["open", "Open"], ["resolved", "Resolved"]].map(([status, label]) =>
      el("button", {
        type: "button",
        text: label,
        "aria-label": `${label} reports`,
        "aria-pressed": view.status === status ? "true" : "false",
        onclick: () => loadReports(status),
      }),
    ),
    el("button", { type: "button", text: "↻", "aria-label": "Refresh reports", title: "Read them again", onclick: () => loadReports(view.status) }),
  );
  const nodes = [tabs];
  if (view.told) nodes.push(el("p", { class: "confirm", id: "reports-state", role: "status", text: view.told }));
  if (!view.reports) return [...nodes, el("p", { class: "note", text: "Loading the reports…" })];
  if (!view.reports.length) {
    return [...nodes, el("p", { class: "note", id: "no-reports", text: view.status === "open" ? "No open reports." : "No resolved reports yet." })];
  }
  nodes.push(
    el(
      "ul",
      { "aria-label": view.status === "open" ? "Open reports" : "Resolved reports" },
      ...view.reports.map((r) => {
        const item = el(
          "li",
          { "data-report": r.report_id, "data-status": r.status },
          el("div", { class: "row" }, el("span", { text: `${r.sender_id} wrote` }), el("span", { class: "reason", text: r.reason })),
          el("p", { class: "reported", text: reportedText(r) }),
          r.note ? el("span", { class: "report-note", text: `“${r.note}”` }) : "",
          el("span", { class: "note", text: `Reported by ${r.reporter}, ${timeText(r.created_at)} · ${r.conversation_id}` }),
        );
        if (r.status === "open") {
          const busy = view.busy === r.report_id;
          item.append(
            el(
              "div",
              { class: "tabs" },
              ...[["dismiss", "Dismiss"], ["delete_message", "Delete message"], ["ban_sender", "Ban sender"]].map(([action, label]) =>
                el("button", { type: "button", text: label, "data-action": action, disabled: busy, onclick: () => resolveReport(r, action) }),
              ),
            ),
          );
        } else {
          item.append(el("span", { class: "note resolution", text: `${RESOLVED_AS[r.action] ?? "Resolved"} by ${r.resolved_by ?? "?"}, ${r.resolved_at ? timeText(r.resolved_at) : ""}` }));
        }
        return item;
      }),
    ),
  );
  if (view.next) {
    nodes.push(el("button", { type: "button", id: "more-reports", text: "Load more reports", onclick: () => loadReports(view.status, { more: true }) }));
  }
  return nodes;
}

// ---- Search: the messages of all the user's conversations ----

// Enter searches at once; typing does once it pauses.
$("search").addEventListener("submit", (event) => {
  event.preventDefault();
  clearTimeout(searchTimer);
  runSearch($("search-q").value.trim());
});

$("search-q").addEventListener("input", () => {
  clearTimeout(searchTimer);
  const q = $("search-q").value.trim();
  if (!q) {
    // Emptied (Escape empties a search field too): the results go.
    if (panel?.kind === "search") closePanel();
    return;
  }
  if (q === searchView?.q && panel?.kind === "search") return;
  searchTimer = setTimeout(() => runSearch(q), 300);
});

$("search-q").addEventListener("keydown", (event) => {
  if (event.key === "Escape" && panel?.kind === "search") closePanel();
});

$("panel").addEventListener("keydown", (event) => {
  if (event.key !== "Escape" || panel?.kind !== "search") return;
  closePanel();
  $("search-q").focus();
});

/** Searches `q` afresh, or (`more`) reads the next page of its results,
 * into the search panel. */
async function runSearch(q, more = false) {
  if (!q || !client) return;
  const asked = ++searchAsked;
  const cursor = more ? searchView.next : undefined;
  if (more) searchView.loading = true;
  else searchView = { q, results: null, next: null, loading: false };
  if (panel?.kind === "search") {
    showError("panel-error", "");
    renderPanel();
  } else {
    showPanel({ kind: "search" });
  }
  try {
    const page = await client.rest.search(q, { limit: 20, ...(cursor ? { cursor } : {}) });
    if (asked !== searchAsked) return;
    searchView.results = [...(more ? searchView.results : []), ...page.results];
    searchView.next = page.next_cursor;
  } catch (e) {
    if (asked !== searchAsked) return;
    searchView.results ??= [];
    showError("panel-error", e.message);
  }
  searchView.loading = false;
  if (panel?.kind === "search") renderPanel();
}

/** The results of the search, best match first, each opening its
 * conversation at the message; "More" reads the next page. */
function searchPanel() {
  const view = searchView;
  if (!view) return [];
  const nodes = [el("p", { class: "note", id: "search-for", text: `Messages with “${view.q}”` })];
  if (!view.results) return [...nodes, el("p", { class: "note", text: "Searching…" })];
  if (!view.results.length) return [...nodes, el("p", { class: "note", id: "no-results", text: "No messages found" })];
  nodes.push(el("ul", { "aria-label": "Search results" }, ...view.results.map(resultNode)));
  if (view.next) {
    nodes.push(
      el("button", {
        type: "button",
        id: "more-results",
        text: view.loading ? "Loading…" : "More",
        disabled: view.loading,
        onclick: () => runSearch(view.q, true),
      }),
    );
  }
  return nodes;
}

/** One result: where, the matched words in their context, who and when. */
function resultNode(r) {
  const m = r.message;
  const c = client.conversationList.get(m.conversation_id) ?? details.get(m.conversation_id);
  const text = el("span", { class: "highlight" });
  if (folded(m)) text.textContent = FOLDED;
  // The one HTML from data: the server's, every character but its <b>
  // escaped.
  else if (r.highlights?.length) text.innerHTML = r.highlights.join(" … ");
  else text.textContent = describe(m.content);
  return el(
    "li",
    { "data-result": m.message_id, "data-conversation": m.conversation_id },
    el(
      "button",
      { type: "button", class: "result", title: "Show the message", onclick: () => jumpTo(m) },
      el("span", { class: "where", text: c ? titleOf(c) : m.conversation_id }),
      text,
      el("span", { class: "note", text: `${m.sender_id === me ? "you" : m.sender_id} · ${timeText(m.created_at)}${m.thread_id ? " · in a thread" : ""}` }),
    ),
  );
}

/** Opens a result's conversation at its message: older pages are read
 * until it is there; a thread reply shows in its thread. The search
 * panel stays open beside it where there is room. */
async function jumpTo(m) {
  const id = m.conversation_id;
  const narrow = matchMedia("(max-width: 700px)").matches;
  showError("panel-error", "");
  if (current !== id) await open(id, !narrow);
  else if (narrow) closePanel();
  if (current !== id) return;
  if (m.thread_id) {
    await openThread(m.thread_id);
    if (current === id && panel?.kind === "thread") reveal(m.message_id, $("panel-body"));
    return;
  }
  const state = client.conversation(id);
  try {
    while (!state.get(m.message_id) && nextBefore.get(id)) {
      await loadEarlier(id);
      if (current !== id) return;
    }
  } catch (e) {
    showError("chat-error", e.message);
  }
  renderMessages();
  if (!reveal(m.message_id)) showError("chat-error", "That message is not here any more.");
}

// ---- Scheduled messages: written now, sent by the server at their
// time ----

/** The `sender_device` of a message sent at its scheduled time. */
const SCHEDULED_DEVICE = "sb:scheduled";
/** How far ahead a message may be scheduled. */
const MAX_AHEAD_MS = 30 * 86_400_000;

/** A time as a `datetime-local` field's value: local, to the second. */
function localInput(date) {
  const pad = (n) => String(n).padStart(2, "0");
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

/** Shows (at one hour ahead) or hides the time picker of the compose box. */
function showSchedulePicker(show) {
  const wasShown = !$("schedule-picker").hidden;
  $("schedule-picker").hidden = !show;
  $("schedule").setAttribute("aria-expanded", show ? "true" : "false");
  if (!show || wasShown) return;
  showPollForm(false);
  const at = new Date(Date.now() + 3_600_000);
  at.setSeconds(0, 0);
  $("schedule-at").value = localInput(at);
}

$("schedule").addEventListener("click", () => {
  showSchedulePicker($("schedule-picker").hidden);
  if (!$("schedule-picker").hidden) $("schedule-at").focus();
});

$("schedule-cancel").addEventListener("click", () => {
  showSchedulePicker(false);
  $("text").focus();
});

// The quick choices: in a minute, in an hour, tomorrow at 9:00.
for (const button of $("schedule-picker").querySelectorAll("button[data-in], button[data-tomorrow]")) {
  button.addEventListener("click", () => {
    let at;
    if (button.dataset.in) {
      at = new Date(Date.now() + Number(button.dataset.in) * 1000);
    } else {
      at = new Date();
      at.setDate(at.getDate() + 1);
      at.setHours(Number(button.dataset.tomorrow), 0, 0, 0);
    }
    $("schedule-at").value = localInput(at);
  });
}

$("schedule-send").addEventListener("click", scheduleMessage);
$("schedule-at").addEventListener("keydown", (event) => {
  if (event.key === "Enter") {
    event.preventDefault();
    scheduleMessage();
  } else if (event.key === "Escape") {
    showSchedulePicker(false);
    $("text").focus();
  }
});

/** Schedules what the compose box holds for the picked time; the box
 * empties once the server keeps it. */
async function scheduleMessage() {
  const text = $("text").value.trim();
  showError("chat-error", "");
  if (!current) return;
  if (editing) {
    showError("chat-error", "Only new messages are scheduled: finish or cancel the edit first.");
    return;
  }
  if (!text) {
    showError("chat-error", "Write the message to schedule first.");
    $("text").focus();
    return;
  }
  const at = new Date($("schedule-at").value);
  if (Number.isNaN(at.getTime())) {
    showError("chat-error", "Pick when to send it.");
    return;
  }
  if (at.getTime() <= Date.now()) {
    showError("chat-error", "Pick a time in the future.");
    return;
  }
  if (at.getTime() > Date.now() + MAX_AHEAD_MS) {
    showError("chat-error", "A message is scheduled at most 30 days ahead.");
    return;
  }
  const conversation = current;
  const options = { ...mentionsIn(text), ...(replyingTo ? { replyTo: replyingTo.message_id } : {}) };
  $("schedule-send").disabled = true;
  try {
    await client.schedule(conversation, { kind: "text", text }, at, options);
    if (current === conversation) {
      if ($("text").value.trim() === text) $("text").value = "";
      cancelReply();
      showSchedulePicker(false);
      $("text").focus();
    }
  } catch (e) {
    showError("chat-error", e.message);
  } finally {
    $("schedule-send").disabled = false;
  }
  await refreshScheduled();
}

// ---- Creating a poll (v1.3): the composer's Poll button opens a small
// form: the question, 2 to 10 options, multiple answers, anonymous, and
// an optional closing time ----

const MIN_POLL_OPTIONS = 2;
const MAX_POLL_OPTIONS = 10;

/** Shows (empty, with two options) or hides the poll form. */
function showPollForm(show) {
  const wasShown = !$("poll-form").hidden;
  $("poll-form").hidden = !show;
  $("poll").setAttribute("aria-expanded", show ? "true" : "false");
  if (!show || wasShown) return;
  showSchedulePicker(false);
  $("poll-question").value = "";
  $("poll-multiple").checked = false;
  $("poll-anonymous").checked = false;
  $("poll-closes").value = "";
  // Whole minutes: the field's steps count from its `min`.
  const now = new Date();
  now.setSeconds(0, 0);
  $("poll-closes").min = localInput(now);
  $("poll-options").replaceChildren();
  for (let i = 0; i < MIN_POLL_OPTIONS; i++) addPollOption();
}

/** One more option field (with its Remove button), at most ten. */
function addPollOption() {
  const box = $("poll-options");
  if (box.children.length >= MAX_POLL_OPTIONS) return;
  const input = el("input", { type: "text", class: "poll-option-text", maxLength: 100, autocomplete: "off" });
  const row = el(
    "div",
    { class: "row" },
    input,
    el("button", {
      type: "button",
      class: "poll-remove",
      text: "✕",
      title: "Remove this option",
      onclick: () => {
        row.remove();
        numberPollOptions();
      },
    }),
  );
  box.append(row);
  numberPollOptions();
  return input;
}

/** The option fields' names and placeholders follow their order; Remove
 * goes at two, Add at ten. */
function numberPollOptions() {
  const rows = [...$("poll-options").children];
  rows.forEach((row, i) => {
    const input = row.querySelector("input");
    input.placeholder = `Option ${i + 1}`;
    input.setAttribute("aria-label", `Option ${i + 1}`);
    const remove = row.querySelector("button");
    remove.setAttribute("aria-label", `Remove option ${i + 1}`);
    remove.disabled = rows.length <= MIN_POLL_OPTIONS;
  });
  $("poll-add").disabled = rows.length >= MAX_POLL_OPTIONS;
}

$("poll").addEventListener("click", () => {
  showPollForm($("poll-form").hidden);
  if (!$("poll-form").hidden) $("poll-question").focus();
});

$("poll-add").addEventListener("click", () => addPollOption()?.focus());

$("poll-cancel").addEventListener("click", () => {
  showPollForm(false);
  $("text").focus();
});

$("poll-form").addEventListener("keydown", (event) => {
  if (event.key !== "Escape") return;
  showPollForm(false);
  $("text").focus();
});

/** Sends the poll the form holds (the options left empty are left
 * out); the form closes at once, and the poll waits like any message
 * while offline. */
$("poll-form").addEventListener("submit", (event) => {
  event.preventDefault();
  showError("chat-error", "");
  if (!current) return;
  const question = $("poll-question").value.trim();
  const options = [...$("poll-options").querySelectorAll("input")].map((i) => i.value.trim()).filter(Boolean);
  if (!question) {
    showError("chat-error", "Write the poll's question first.");
    $("poll-question").focus();
    return;
  }
  if (options.length < MIN_POLL_OPTIONS) {
    showError("chat-error", `A poll needs at least ${MIN_POLL_OPTIONS} options.`);
    return;
  }
  let closesAt;
  if ($("poll-closes").value) {
    closesAt = new Date($("poll-closes").value);
    if (Number.isNaN(closesAt.getTime()) || closesAt.getTime() <= Date.now()) {
      showError("chat-error", "Pick a closing time in the future, or none.");
      return;
    }
  }
  const poll = {
    question,
    options,
    multiple: $("poll-multiple").checked,
    anonymous: $("poll-anonymous").checked,
    ...(closesAt ? { closesAt } : {}),
  };
  showPollForm(false);
  client.sendPoll(current, poll).catch((e) => showError("chat-error", e.message));
  $("text").focus();
});

/** Reads the user's scheduled messages afresh (the indicator and the
 * panel follow). */
async function refreshScheduled() {
  if (!client) return;
  const asked = ++scheduledAsked;
  try {
    const list = await client.rest.scheduled();
    if (asked !== scheduledAsked) return;
    scheduledList = list;
  } catch (e) {
    if (asked !== scheduledAsked) return;
    if (panel?.kind === "scheduled") showError("panel-error", e.message);
  }
  renderScheduled();
}

/** The open conversation's scheduled messages, soonest first. */
function scheduledHere() {
  return (scheduledList ?? []).filter((s) => s.conversation_id === current);
}

/** The "N scheduled" indicator above the compose box, and the panel. */
function renderScheduled() {
  const n = current ? scheduledHere().length : 0;
  $("scheduled-bar").hidden = n === 0;
  $("scheduled-count").textContent = n ? `🕒 ${n} scheduled` : "";
  if (panel?.kind === "scheduled") renderPanel();
}

/** A scheduled time, to the second when it has seconds. */
function whenText(iso) {
  const at = new Date(iso);
  return at.toLocaleString([], {
    weekday: "short",
    month: "short",
    day: "numeric",
    hour: "2-digit",
    minute: "2-digit",
    ...(at.getSeconds() ? { second: "2-digit" } : {}),
  });
}

/** The open conversation's messages waiting for their time, each with
 * a way to cancel it. */
function scheduledPanel() {
  if (!scheduledList) return [el("p", { class: "note", text: "Loading…" })];
  const here = scheduledHere();
  const about = el("p", { class: "note", text: "The server sends them at their time, with this page closed too; every member, and your other devices, get them then." });
  if (!here.length) return [el("p", { class: "note", id: "no-scheduled", text: "Nothing waits to be sent here. Write a message and pick 🕒 to send it later." }), about];
  return [
    el(
      "ul",
      { "aria-label": "Scheduled messages" },
      ...here.map((s) =>
        el(
          "li",
          { "data-scheduled": s.scheduled_id },
          el(
            "div",
            { class: "row" },
            el("span", { class: "note", text: `🕒 ${whenText(s.send_at)}` }),
            el("button", {
              type: "button",
              text: unscheduling.has(s.scheduled_id) ? "Cancelling…" : "Cancel",
              "aria-label": "Cancel scheduled message",
              disabled: unscheduling.has(s.scheduled_id),
              onclick: () => unschedule(s),
            }),
          ),
          el("p", { class: "scheduled-text", text: describe(s.content) }),
        ),
      ),
    ),
    about,
  ];
}

async function unschedule(s) {
  showError("panel-error", "");
  unscheduling.add(s.scheduled_id);
  renderPanel();
  try {
    await client.rest.cancelScheduled(s.scheduled_id);
  } catch (e) {
    showError("panel-error", e.status === 404 ? "Too late: it was sent or cancelled already." : e.message);
  }
  unscheduling.delete(s.scheduled_id);
  await refreshScheduled();
}

// ---- The user's own data, as one JSON file ----

async function downloadMyData() {
  const button = $("export-data");
  const state = $("export-state");
  button.disabled = true;
  state.textContent = "Preparing your data…";
  try {
    // Parsed first: a download cut midway is refused, never saved half.
    const data = await client.rest.exportMyData();
    const name = `switchboard-export-${me.replace(/[^A-Za-z0-9._-]/g, "_")}-${data.profile.exported_at.slice(0, 10)}.json`;
    const url = URL.createObjectURL(new Blob([JSON.stringify(data, null, 2)], { type: "application/json" }));
    el("a", { href: url, download: name }).click();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
    const sent = data.conversations.reduce((n, c) => n + c.messages.length, 0);
    const conversations = data.conversations.length;
    state.textContent = `Saved ${name}: ${conversations} ${conversations === 1 ? "conversation" : "conversations"}, ${sent} ${sent === 1 ? "message" : "messages"} you sent.`;
  } catch (e) {
    state.textContent = e.status === 429 ? "At most 4 downloads an hour: try again later." : `Not downloaded: ${e.message}`;
  } finally {
    button.disabled = false;
  }
}

async function saveSettings(settings) {
  showError("panel-error", "");
  const conversation = current;
  try {
    // The whole object: the SDK's list follows the answer.
    settingsOf.set(conversation, await client.rest.setSettings(conversation, settings));
  } catch (e) {
    showError("panel-error", e.message);
  }
  if (current === conversation && panel?.kind === "notifications") renderPanel();
}

async function togglePin(messageId, pinned) {
  showError("chat-error", "");
  try {
    if (pinned) await client.rest.unpin(current, messageId);
    else await client.rest.pin(current, messageId);
  } catch (e) {
    showError("chat-error", e.message);
  }
}

// ---- Writing ----

function startEdit(message) {
  cancelReply();
  editing = message.message_id;
  $("editing").hidden = false;
  $("text").value = message.content?.kind === "text" ? message.content.text : "";
  $("text").focus();
}

function remove(message) {
  client.delete(message.conversation_id, message.message_id).catch((e) => showError("chat-error", e.message));
}

function stopEdit() {
  editing = null;
  $("editing").hidden = true;
  $("text").value = "";
}

/** Quotes a message in the next one (in the thread's box, in a thread). */
function startReply(message, inThread) {
  if (inThread) {
    $("thread-text").focus();
    return;
  }
  if (editing) stopEdit();
  replyingTo = message;
  $("replying-to").textContent = `Replying to ${nameOf(message.sender_id)}: ${describe(message.content)}`;
  $("replying").hidden = false;
  $("text").focus();
}

function cancelReply() {
  replyingTo = null;
  $("replying").hidden = true;
}

$("cancel-edit").addEventListener("click", stopEdit);
$("cancel-reply").addEventListener("click", cancelReply);
$("text").addEventListener("keydown", (event) => {
  if (event.key !== "Escape") return;
  if (editing) stopEdit();
  else if (replyingTo) cancelReply();
  else if (pickerFor) {
    pickerFor = null;
    renderMessages();
  }
});

$("text").addEventListener("input", () => {
  if (!current || editing || !$("text").value) return;
  // The server takes a start every few seconds at most; it lasts 5 s.
  if (Date.now() - lastTypingAt > 3000) {
    lastTypingAt = Date.now();
    client.typing(current, "start");
  }
});

/** The members an `@name` in `text` names, and whether it says `@all`
 * (sent as mentioning everyone only by an owner or admin). */
function mentionsIn(text) {
  const members = new Set(memberIds());
  const found = new Set();
  let all = false;
  for (const [, raw] of text.matchAll(/@([A-Za-z0-9._:@-]+)/g)) {
    let name = raw;
    // "@bob." and "@bob:" name bob.
    while (name && name !== "all" && !members.has(name) && /[.:@-]$/.test(name)) name = name.slice(0, -1);
    if (name === "all") all = true;
    else if (members.has(name) && name !== me) found.add(name);
  }
  return { mentions: [...found], mentionAll: all && canModerate() };
}

/** While the word before the caret starts with `@`, the members it may
 * name show as buttons that complete it. */
function suggestMentions(input, box) {
  const before = input.value.slice(0, input.selectionStart ?? input.value.length);
  const word = /(?:^|\s)@([A-Za-z0-9._:@-]*)$/.exec(before);
  if (!current || !word) {
    box.hidden = true;
    return;
  }
  const prefix = word[1].toLowerCase();
  const names = memberIds().filter((u) => u !== me);
  if (canModerate()) names.push("all");
  const matches = names.filter((u) => u.toLowerCase().startsWith(prefix)).slice(0, 6);
  box.hidden = matches.length === 0;
  box.replaceChildren(
    ...matches.map((name) =>
      el("button", {
        type: "button",
        text: `@${name}`,
        "aria-label": `Mention ${name}`,
        onclick: () => {
          const start = before.length - word[1].length - 1;
          const after = input.value.slice(before.length);
          input.value = `${input.value.slice(0, start)}@${name} ${after.replace(/^\s+/, "")}`;
          const caret = start + name.length + 2;
          input.setSelectionRange(caret, caret);
          box.hidden = true;
          input.focus();
        },
      }),
    ),
  );
}

for (const [input, box] of [["text", "mention-suggest"], ["thread-text", "thread-suggest"]]) {
  $(input).addEventListener("input", () => suggestMentions($(input), $(box)));
  $(input).addEventListener("keyup", (event) => {
    if (event.key.startsWith("Arrow") || event.key === "Home" || event.key === "End") suggestMentions($(input), $(box));
  });
}

$("compose").addEventListener("submit", (event) => {
  event.preventDefault();
  const text = $("text").value.trim();
  if (!current || !text) return;
  showError("chat-error", "");
  $("mention-suggest").hidden = true;
  if (editing) {
    // Waits while offline; a refusal (say, past the edit window) shows.
    client.edit(current, editing, { kind: "text", text }).catch((e) => showError("chat-error", e.message));
    stopEdit();
    return;
  }
  if (lastTypingAt) {
    client.typing(current, "stop");
    lastTypingAt = 0;
  }
  $("text").value = "";
  const options = { ...mentionsIn(text), ...(replyingTo ? { replyTo: replyingTo.message_id } : {}) };
  cancelReply();
  client.sendText(current, text, options).catch((e) => showError("chat-error", e.message));
});

$("thread-compose").addEventListener("submit", (event) => {
  event.preventDefault();
  const text = $("thread-text").value.trim();
  if (!current || panel?.kind !== "thread" || !text) return;
  showError("panel-error", "");
  $("thread-suggest").hidden = true;
  $("thread-text").value = "";
  client.sendText(current, text, { ...mentionsIn(text), threadId: panel.root }).catch((e) => showError("panel-error", e.message));
});

$("thread-text").addEventListener("keydown", (event) => {
  if (event.key === "Escape") closePanel();
});

$("attach").addEventListener("change", async () => {
  const file = $("attach").files[0];
  $("attach").value = "";
  if (!file || !current) return;
  const conversation = current;
  try {
    const type = file.type || "application/octet-stream";
    const content = await client.rest.upload(file, type, type.startsWith("image/") ? "image" : "file", file.name);
    await client.send(conversation, content);
  } catch (e) {
    showError("chat-error", e.message);
  }
});

// ---- Profiles (v1.3): names, avatars and statuses for user ids ----

/** Users whose profiles were asked for (read a moment later, together). */
const profilesWanted = new Set();
let profilesTimer = null;
let profilesRedraw = null;

/** The name to show for a user: their display name once their profile
 * is read (it is asked for the first time one is shown), else the id. */
function nameOf(user) {
  if (!user) return "";
  if (!client.profiles.get(user) && !profilesWanted.has(user)) {
    profilesWanted.add(user);
    clearTimeout(profilesTimer);
    profilesTimer = setTimeout(readWantedProfiles, 0);
  }
  return client.profiles.displayName(user);
}

function readWantedProfiles() {
  const users = [...profilesWanted].filter((u) => !client.profiles.get(u));
  if (!users.length) return;
  client.profiles.load(users).catch(() => {
    // Asked again after a while, not in a loop.
    setTimeout(() => users.forEach((u) => profilesWanted.delete(u)), 30_000);
  });
}

/** A round picture of the user: their avatar, else their initial. */
function avatarNode(user, large = false) {
  const p = client.profiles.get(user);
  const node = el("span", { class: large ? "avatar large" : "avatar", "data-avatar": user, "aria-hidden": "true" });
  if (p?.avatar) {
    const img = el("img", { alt: "" });
    const cached = blobUrls.get(p.avatar);
    if (cached) img.src = cached;
    else fetchBlob(p.avatar).then((url) => (img.src = url)).catch(() => img.remove());
    node.append(img);
  } else {
    node.textContent = [...nameOf(user)][0]?.toUpperCase() ?? "?";
  }
  return node;
}

/** The user's status (emoji and text) while it lasts, or nothing. */
function statusNode(user) {
  const status = client.profiles.get(user)?.status;
  if (!status) return "";
  return el("span", { class: "status-line", "data-status": user, text: [status.emoji, status.text].filter(Boolean).join(" ") });
}

/** Profiles came in or changed: everything that shows names, once. */
function redrawForProfiles() {
  if (profilesRedraw) return;
  profilesRedraw = setTimeout(() => {
    profilesRedraw = null;
    renderList();
    if (current) {
      const known = details.get(current) ?? client.conversationList.get(current);
      if (known) $("chat-title").textContent = titleOf(known);
      renderMessages();
      renderTyping();
    }
    if (panel && !STEADY_PANELS.has(panel.kind)) renderPanel();
  }, 50);
}

function renderWho() {
  const who = $("who");
  who.replaceChildren(avatarNode(me), " ", nameOf(me), whoSuffix, statusNode(me));
}

$("show-profile").addEventListener("click", () => {
  if (panel?.kind === "profile") closePanel();
  else showPanel({ kind: "profile", saved: "" });
});

/** When a status set now clears, by the choice of the form. */
const STATUS_FOR = [["", "Don't clear"], ["3600", "1 hour"], ["14400", "4 hours"], ["today", "Today"]];

function clearsAt(choice) {
  if (!choice) return null;
  if (choice === "today") {
    const end = new Date();
    end.setHours(23, 59, 59, 0);
    return end.toISOString();
  }
  return new Date(Date.now() + Number(choice) * 1000).toISOString();
}

/** The user's own profile: name, picture and status. */
function profilePanel() {
  const p = client.profiles.get(me);
  const name = el("input", { id: "profile-name", maxLength: 64, value: p?.display_name ?? "", placeholder: me, autocomplete: "off" });
  const emoji = el("input", { id: "profile-emoji", maxLength: 8, value: p?.status?.emoji ?? "", placeholder: "🙂", autocomplete: "off" });
  const text = el("input", { id: "profile-status", maxLength: 140, value: p?.status?.text ?? "", placeholder: "What's your status?", autocomplete: "off" });
  // A status that clears already keeps its time unless another is chosen.
  const ends = p?.status?.expires_at;
  const choices = ends ? [["keep", `At ${timeText(ends)}`], ...STATUS_FOR] : STATUS_FOR;
  const clears = el("select", { id: "profile-clears" }, ...choices.map(([v, label]) => el("option", { value: v, text: label })));
  const picture = el("input", { type: "file", id: "profile-avatar", accept: "image/*" });
  const save = async () => {
    const status = text.value.trim() || emoji.value.trim()
      ? { text: text.value.trim(), emoji: emoji.value.trim() || null, expires_at: clears.value === "keep" ? ends : clearsAt(clears.value) }
      : null;
    await updateProfile({ display_name: name.value.trim() || null, status });
  };
  picture.addEventListener("change", async () => {
    const file = picture.files[0];
    if (!file) return;
    try {
      const upload = await client.rest.upload(file, file.type || "image/png", "image");
      await updateProfile({ avatar: upload.blob_ref });
    } catch (e) {
      showError("panel-error", e.message);
    }
  });
  return [
    el(
      "form",
      { id: "profile-form", "aria-label": "Your profile", onsubmit: (e) => (e.preventDefault(), save()) },
      el("div", { class: "row" }, avatarNode(me, true), el("span", { class: "note", text: `Signed in as ${me}` })),
      el("label", { htmlFor: "profile-avatar", text: "Picture" }),
      picture,
      p?.avatar ? el("button", { type: "button", id: "profile-avatar-remove", text: "Remove picture", onclick: () => updateProfile({ avatar: null }) }) : "",
      el("label", { htmlFor: "profile-name", text: "Display name" }),
      name,
      el("label", { htmlFor: "profile-emoji", text: "Status" }),
      el("div", { class: "status-row" }, emoji, text),
      el("label", { htmlFor: "profile-clears", text: "Clear the status after" }),
      clears,
      el("div", { class: "row" }, el("button", { type: "submit", id: "profile-save", text: "Save" }), el("span", { class: "note", id: "profile-saved", role: "status", text: panel.saved ?? "" })),
    ),
  ];
}

async function updateProfile(patch) {
  try {
    await client.rest.updateProfile(patch);
    showError("panel-error", "");
    if (panel?.kind === "profile") {
      panel.saved = "Saved: everyone you share a conversation with sees it.";
      renderPanel();
    }
  } catch (e) {
    showError("panel-error", e.message);
  }
}

// ---- Public channels and invites (v1.3) ----

let channelsView = null; // the directory panel: { q, channels (null while read), next (the next page's cursor) }
let channelsAsked = 0; // which read of the directory is the latest
let channelsTimer = null; // the directory search starts once typing pauses
let inviteView = null; // the invitation panel: { code, preview (null while read), error }
const invitesOf = new Map(); // conversation id -> its invites (owners and admins), as `GET .../invites` answered
let channelDraft = {}; // the admin panel's channel settings as typed, not saved yet

/** The channel settings of a conversation, as best known. */
function channelOf(id) {
  const c = (id && (details.get(id) ?? client.conversationList.get(id))) || {};
  return {
    visibility: c.visibility ?? "private",
    posting: c.posting ?? "everyone",
    topic: c.topic ?? null,
    history_visible_to_new_members: c.history_visible_to_new_members ?? false,
  };
}

async function loadChannels(q, more = false) {
  const asked = ++channelsAsked;
  const cursor = more ? channelsView?.next : null;
  if (!more) channelsView = { q, channels: null, next: null };
  renderChannelList();
  try {
    const page = await client.rest.channels({ q: q || undefined, cursor: cursor ?? undefined });
    if (asked !== channelsAsked) return;
    const before = more ? (channelsView.channels ?? []) : [];
    channelsView = { q, channels: [...before, ...page.channels], next: page.next_cursor ?? null };
  } catch (e) {
    showError("panel-error", e.message);
  }
  renderChannelList();
}

function channelsPanel() {
  const q = el("input", {
    type: "search",
    id: "channel-q",
    placeholder: "Search by name or topic",
    "aria-label": "Search public channels",
    maxLength: 100,
    autocomplete: "off",
    value: channelsView?.q ?? "",
    oninput: (event) => {
      clearTimeout(channelsTimer);
      const typed = event.target.value.trim();
      channelsTimer = setTimeout(() => loadChannels(typed), 250);
    },
  });
  const code = el("input", { id: "invite-code", placeholder: "Invite code", "aria-label": "Invite code", autocomplete: "off", maxLength: 64 });
  const form = el(
    "form",
    { id: "invite-form", "aria-label": "Open an invite", onsubmit: (e) => (e.preventDefault(), code.value.trim() && showInvite(code.value.trim())) },
    code,
    el("button", { type: "submit", text: "Open invite" }),
  );
  return [q, el("div", { id: "channel-list" }, ...channelListNodes()), el("strong", { text: "Have an invite?" }), form];
}

function renderChannelList() {
  if (panel?.kind === "channels") $("channel-list")?.replaceChildren(...channelListNodes());
}

function channelListNodes() {
  if (!channelsView || channelsView.channels === null) return [el("p", { class: "note", text: "Reading the channels…" })];
  if (!channelsView.channels.length) {
    const none = channelsView.q ? `No public channel matches “${channelsView.q}”.` : "No public channels yet.";
    return [el("p", { class: "note", id: "no-channels", text: none }), channelsView.next ? moreChannelsButton() : ""];
  }
  const items = channelsView.channels.map((c) => {
    const name = c.title || c.conversation_id;
    const member = Boolean(client.conversationList.get(c.conversation_id));
    const action = member
      ? el("button", { type: "button", text: "Open", "aria-label": `Open ${name}`, onclick: () => (closePanel(), open(c.conversation_id)) })
      : el("button", { type: "button", text: "Join", "aria-label": `Join ${name}`, onclick: () => joinChannel(c.conversation_id) });
    return el(
      "li",
      { "data-channel": c.conversation_id },
      el("div", { class: "row" }, el("strong", { text: name }), action),
      c.topic ? el("span", { class: "topic", text: c.topic }) : "",
      el("span", { class: "note", text: `${c.member_count} member${c.member_count === 1 ? "" : "s"}` }),
    );
  });
  return [el("ul", { "aria-label": "Public channels" }, ...items), channelsView.next ? moreChannelsButton() : ""];
}

function moreChannelsButton() {
  return el("button", { type: "button", id: "more-channels", text: "More channels", onclick: () => loadChannels(channelsView.q, true) });
}

async function joinChannel(id) {
  try {
    // The SDK's list takes the conversation the answer carries.
    details.set(id, await client.rest.join(id));
    closePanel();
    open(id);
  } catch (e) {
    showError("panel-error", e.message);
  }
}

async function showInvite(code) {
  inviteView = { code, preview: null, error: "" };
  showPanel({ kind: "invite" });
  try {
    inviteView.preview = await client.rest.invite(code);
  } catch (e) {
    inviteView.error = e.status === 404 ? "This invite does not work: it was revoked, has expired or has been used up." : e.message;
  }
  if (panel?.kind === "invite" && inviteView.code === code) renderPanel();
}

function invitePanel() {
  if (inviteView.error) return [el("p", { class: "note", id: "invite-error", text: inviteView.error })];
  if (!inviteView.preview) return [el("p", { class: "note", text: "Reading the invite…" })];
  const { channel, expires_at } = inviteView.preview;
  const member = Boolean(client.conversationList.get(channel.conversation_id));
  return [
    el("span", { class: "note", text: "You are invited to" }),
    el("strong", { id: "invite-title", text: channel.title || channel.conversation_id }),
    channel.topic ? el("span", { class: "topic", text: channel.topic }) : "",
    el("span", { class: "note", text: `${channel.member_count} member${channel.member_count === 1 ? "" : "s"}${expires_at ? ` · valid until ${timeText(expires_at)}` : ""}` }),
    el("button", { type: "button", id: "accept-invite", text: member ? "Open" : "Accept and join", onclick: acceptInvite }),
  ];
}

async function acceptInvite() {
  try {
    const detail = await client.rest.acceptInvite(inviteView.code);
    details.set(detail.conversation_id, detail);
    const url = new URL(location.href);
    url.searchParams.delete("invite");
    history.replaceState(null, "", url);
    closePanel();
    open(detail.conversation_id);
  } catch (e) {
    showError("panel-error", e.message);
  }
}

/** The admin panel's channel settings (groups and channels). */
function channelFieldset() {
  const now = channelOf(current);
  const shown = (key) => (key in channelDraft ? channelDraft[key] : now[key]);
  const select = (key, label, options) =>
    el(
      "label",
      {},
      label,
      el(
        "select",
        { id: key, onchange: (e) => (channelDraft[key] = e.target.value) },
        ...options.map(([value, text]) => el("option", { value, text, selected: shown(key) === value })),
      ),
    );
  return el(
    "fieldset",
    { "aria-label": "Channel" },
    el("legend", { text: "Channel" }),
    select("visibility", "Who finds it", [["private", "Private: by invite"], ["public", "Public: in the directory"]]),
    select("posting", "Who posts", [["everyone", "Everyone"], ["admins", "Owners and admins"]]),
    el(
      "label",
      {},
      "Topic",
      el("input", { type: "text", id: "topic", maxLength: 250, value: shown("topic") ?? "", placeholder: "What it is about", oninput: (e) => (channelDraft.topic = e.target.value) }),
    ),
    el(
      "label",
      { class: "check" },
      el("input", { type: "checkbox", id: "history-visible", checked: Boolean(shown("history_visible_to_new_members")), onchange: (e) => (channelDraft.history_visible_to_new_members = e.target.checked) }),
      "Newcomers read the earlier history",
    ),
    el("button", { type: "button", id: "save-channel", text: "Save channel settings", onclick: saveChannel }),
  );
}

async function saveChannel() {
  showError("panel-error", "");
  const conversation = current;
  const now = channelOf(conversation);
  const patch = {};
  for (const [key, value] of Object.entries(channelDraft)) {
    const next = key === "topic" ? value.trim() || null : value;
    if (next !== now[key]) patch[key] = next;
  }
  if (!Object.keys(patch).length) {
    showError("panel-error", "Nothing changed.");
    return;
  }
  try {
    details.set(conversation, await client.rest.updateConversation(conversation, patch));
    channelDraft = {};
  } catch (e) {
    showError("panel-error", e.message);
  }
  if (current === conversation && panel?.kind === "admin") renderPanel();
  renderTools();
}

const INVITE_FOR = [["", "never expires"], ["3600", "expires in 1 hour"], ["86400", "expires in 1 day"], ["604800", "expires in 7 days"]];

function inviteLink(code) {
  return `${location.origin}/?invite=${encodeURIComponent(code)}`;
}

/** The admin panel's invites: make one, copy its link, revoke. */
function invitesFieldset() {
  const invites = invitesOf.get(current);
  const uses = el("input", { type: "number", id: "invite-uses", min: "1", max: "100000", placeholder: "uses: any", "aria-label": "Uses" });
  const expires = el("select", { id: "invite-expires", "aria-label": "Expiry" }, ...INVITE_FOR.map(([v, text]) => el("option", { value: v, text })));
  const list = !invites
    ? el("p", { class: "note", text: "Reading the invites…" })
    : !invites.length
      ? el("p", { class: "note", id: "no-invites", text: "No invites." })
      : el(
          "ul",
          { "aria-label": "Invites" },
          ...invites.map((i) =>
            el(
              "li",
              { "data-invite": i.code },
              el(
                "div",
                { class: "row" },
                el("span", { class: "invite-link", title: inviteLink(i.code), text: i.code }),
                el("button", { type: "button", text: "Copy link", "aria-label": `Copy the link of invite ${i.code}`, onclick: () => navigator.clipboard?.writeText(inviteLink(i.code)).catch(() => {}) }),
                el("button", { type: "button", text: "Revoke", "aria-label": `Revoke invite ${i.code}`, onclick: () => revokeInvite(i.code) }),
              ),
              el("span", { class: "note", text: `${i.uses}${i.max_uses ? ` of ${i.max_uses}` : ""} used · ${i.expires_at ? `until ${timeText(i.expires_at)}` : "no expiry"}` }),
            ),
          ),
        );
  return el(
    "fieldset",
    { "aria-label": "Invites" },
    el("legend", { text: "Invites" }),
    el("div", { class: "row" }, uses, expires),
    el("button", { type: "button", id: "make-invite", text: "Make an invite link", onclick: () => makeInvite(uses.value, expires.value) }),
    list,
  );
}

async function makeInvite(uses, forSecs) {
  showError("panel-error", "");
  const conversation = current;
  const opts = {};
  if (uses.trim()) opts.max_uses = Number(uses);
  if (forSecs) opts.expires_at = new Date(Date.now() + Number(forSecs) * 1000);
  try {
    await client.rest.createInvite(conversation, opts);
    invitesOf.set(conversation, (await client.rest.invites(conversation)).invites);
  } catch (e) {
    showError("panel-error", e.message);
  }
  if (current === conversation && panel?.kind === "admin") renderPanel();
}

async function revokeInvite(code) {
  const conversation = current;
  try {
    await client.rest.revokeInvite(conversation, code);
    invitesOf.set(conversation, (await client.rest.invites(conversation)).invites);
  } catch (e) {
    showError("panel-error", e.message);
  }
  if (current === conversation && panel?.kind === "admin") renderPanel();
}

// A reload keeps the session (this browser's dev user, or this tab's
// pasted token) and the open conversation.
const pasted = sessionStorage.getItem("switchboard.token");
const saved = JSON.parse(localStorage.getItem("switchboard.session") || "null");
if (pasted) startWithToken(pasted).catch((e) => showError("login-error", e.message));
else if (saved?.user) resume(saved.user, saved.device);
