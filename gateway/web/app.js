// The browser client of `switchboard dev`, built on the SDK
// (clients/js, bundled as /web/switchboard.js). Every text the server or
// another user sent goes into the page through `textContent` only: no
// HTML is ever parsed from data.
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

let client;
let me;
let current = null;
let details = new Map(); // conversation id -> detail (members and marks)
const nextBefore = new Map(); // conversation id -> next_before_seq, once a page of history was read
const blobUrls = new Map(); // blob_ref -> object URL
let editing = null;
let replyingTo = null; // the message the next one quotes
let pickerFor = null; // the message whose emoji picker is open
// The side panel: { kind: "thread", root } or { kind: "threads" |
// "pins" | "members" | "notifications" }; null when closed.
let panel = null;
const settingsOf = new Map(); // conversation id -> the caller's { notifications, muted_until }
const pinnedMessages = new Map(); // message id -> the message, as `GET .../pins` answered it
let threadList = null; // the open conversation's `GET .../threads` answer
const threadsRead = new Set(); // `${conversation}\u0000${root}` whose thread history was read
let lastTypingAt = 0;
// The conversation list is the SDK's (`client.conversationList`): read a
// page at a time, then kept current from the session's events, and kept
// with the messages in IndexedDB, so a reload shows it at once. So are
// each conversation's reactions, thread summaries, roles and pins
// (`client.conversation(id)`).

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

/** Signs in through the dev token endpoint (`switchboard dev`). A
 * gateway has none: then the page asks for a token instead. */
async function start(user, device) {
  try {
    await devToken(user, device); // refuses a bad id before anything changes
  } catch (e) {
    if (e.message.includes("no such endpoint") || e.message === "Not Found") {
      $("token-field").hidden = false;
      $("token").required = true;
      $("user").required = false;
      $("login-hint").textContent = "This gateway signs in with a token from your application: paste it below.";
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

/** Signs in with a token the user pasted (kept for this tab only). */
async function startWithToken(token) {
  const claims = JSON.parse(atob(token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")));
  if (typeof claims.sub !== "string") throw new Error("that is not a Switchboard token");
  sessionStorage.setItem("switchboard.token", token);
  openSession(claims.sub, claims.device || "", token);
}

function openSession(user, device, token) {
  me = user;
  $("login").hidden = true;
  $("app").hidden = false;
  $("who").textContent = device ? `${user} (${device})` : user;
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
    if (panel) renderPanel();
  });
  client.on("message", (m) => {
    if (m.conversation_id !== current) return;
    markRead();
    if (panel?.kind === "thread" && m.thread_id === panel.root) markThreadRead();
  });
  client.on("typing", (t) => {
    if (t.conversation_id === current) renderTyping();
  });
  client.on("presence", () => renderPresence());
  client.on("settings_changed", (s) => {
    settingsOf.set(s.conversation_id, { notifications: s.notifications, muted_until: s.muted_until });
    if (s.conversation_id === current && panel?.kind === "notifications") renderPanel();
  });
  client.on("error", (frame) => showError("chat-error", `${frame.code}: ${frame.message}`));
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
  });
  client.connect();
  list.load().then(() => showError("new-error", ""), () => {});
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
  return others.join(", ") || c.conversation_id;
}

function previewOf(c) {
  if (typeof c.preview === "string") return c.preview;
  return c.last_message ? describe(c.last_message.content) : "";
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

async function open(id) {
  current = id;
  editing = null;
  replyingTo = null;
  pickerFor = null;
  threadList = null;
  $("editing").hidden = true;
  $("replying").hidden = true;
  closePanel();
  history.replaceState(null, "", `#${encodeURIComponent(id)}`);
  $("app").classList.add("in-chat");
  for (const b of $("conversations").querySelectorAll("button")) {
    b.setAttribute("aria-current", b.dataset.conversation === id ? "true" : "false");
  }
  for (const input of [$("text"), $("send"), $("attach")]) input.disabled = false;
  $("chat-tools").hidden = false;
  showError("chat-error", "");
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
  closePanel();
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
  const kind = (details.get(current) ?? client.conversationList.get(current))?.kind;
  return kind === "direct" || canModerate();
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
  const cached = blobUrls.get(content.blob_ref);
  if (content.kind === "image") {
    const img = el("img", { alt: content.caption || "image", "data-blob": content.blob_ref });
    if (cached) img.src = cached;
    else fetchBlob(content.blob_ref).then((url) => (img.src = url)).catch(() => (img.alt = "image unavailable"));
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
  const text = quoted ? `${quoted.sender_id}: ${describe(quoted.content)}` : "an earlier message";
  return el("div", {
    class: "quote",
    "data-reply-to": replyTo,
    title: "Show the quoted message",
    text: `↪ ${text}`,
    onclick: () => reveal(replyTo),
  });
}

/** Scrolls a message of the main timeline into view, flashing it. */
function reveal(messageId) {
  const node = $("messages").querySelector(`[data-message-id="${CSS.escape(messageId)}"]`);
  if (!node) return;
  node.scrollIntoView({ block: "center" });
  node.classList.add("flash");
  setTimeout(() => node.classList.remove("flash"), 1200);
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

/** A message's toolbar: react, reply, thread (`inThread`: not in the
 * thread panel), pin (who may), edit and delete (mine). */
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
    bar.append(
      el("button", { type: "button", text: "Edit", "aria-label": "Edit message", onclick: () => startEdit(m) }),
      el("button", { type: "button", text: "Delete", "aria-label": "Delete message", onclick: () => remove(m) }),
    );
  }
  return bar;
}

/** One stored message: `inThread` in the thread panel. */
function messageNode(state, m, inThread = false) {
  const system = m.content?.kind === "system";
  const mine = m.sender_id === me && !system;
  const live = !m.deleted_at && !system;
  const body = m.content && (m.content.kind === "image" || m.content.kind === "file" || m.content.kind === "voice")
    ? mediaNode(m.content)
    : m.content?.kind === "text"
      ? bodyNode(m, m.content.text)
      : el("span", { class: "body", text: describe(m.content) });
  const meta = el("span", { class: "meta" });
  if (!mine && !system) meta.append(el("span", { class: "sender", text: m.sender_id }));
  meta.append(el("time", { text: new Date(m.created_at).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) }));
  if (m.edited_at && !m.deleted_at) meta.append(el("span", { text: "edited" }));
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
  const node = el("div", { class: classes.join(" "), "data-seq": String(m.seq), "data-message-id": m.message_id });
  if (m.reply_to && !system) node.append(quoteNode(state, m.reply_to));
  node.append(body, meta);
  if (live) node.append(reactionsNode(m), toolbarOf(m, inThread, mine, pinned));
  const replies = m.thread?.reply_count ?? 0;
  if (!inThread && replies > 0) {
    node.append(
      el("button", {
        type: "button",
        class: "thread-summary",
        "data-replies": String(replies),
        text: `💬 ${replies} ${replies === 1 ? "reply" : "replies"} · ${m.thread.participants.slice(0, 3).join(", ")}`,
        onclick: () => openThread(m.message_id),
      }),
    );
  }
  return node;
}

/** One of this client's messages not stored yet: pending (⏱), or
 * failed, with the reason and a way to retry or drop it. */
function outgoingNode(state, o) {
  const meta = el("span", { class: "meta" });
  if (o.status === "failed") {
    meta.append(
      el("span", { class: "tick", "data-state": "failed", "aria-label": "not sent", title: o.error?.message ?? "not sent", text: "⚠" }),
      el(
        "span",
        { class: "actions" },
        el("button", { type: "button", text: "Retry", "aria-label": "Retry sending", onclick: () => o.retry().catch(() => {}) }),
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
  // counted on their root.
  for (const m of state.timeline) nodes.push(messageNode(state, m));
  for (const o of state.outgoing) if (!o.thread_id) nodes.push(outgoingNode(state, o));
  if (!nodes.length) nodes.push(el("p", { class: "empty", text: "No messages yet." }));
  box.replaceChildren(...nodes);
  if (atBottom) box.scrollTop = box.scrollHeight;
}

/** The header's buttons: which panel is open, how many pins. */
function renderTools() {
  if (!current) return;
  $("pin-count").textContent = String(client.conversation(current).pins.length);
  for (const [id, kind] of [["show-threads", "threads"], ["show-pins", "pins"], ["show-members", "members"], ["show-notifications", "notifications"]]) {
    $(id).setAttribute("aria-pressed", panel?.kind === kind ? "true" : "false");
  }
}

function renderTyping() {
  if (!current) return;
  const users = client.conversation(current).typingUsers().filter((u) => u !== me);
  $("typing").textContent =
    users.length === 0 ? "" : users.length === 1 ? `${users[0]} is typing…` : `${users.join(", ")} are typing…`;
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
// the notification settings ----

const PANEL_TITLES = { thread: "Thread", threads: "Threads", pins: "Pinned messages", members: "Members", notifications: "Notifications" };

function showPanel(next) {
  panel = next;
  $("panel").hidden = false;
  $("thread-compose").hidden = next.kind !== "thread";
  $("thread-suggest").hidden = true;
  showError("panel-error", "");
  renderPanel();
  renderTools();
}

function closePanel() {
  panel = null;
  $("panel").hidden = true;
  $("thread-text").value = "";
  if (current) renderTools();
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
  if (!panel || !current) return;
  $("panel-title").textContent = PANEL_TITLES[panel.kind];
  const body = $("panel-body");
  const render = { thread: threadPanel, threads: threadsPanel, pins: pinsPanel, members: membersPanel, notifications: notificationsPanel }[panel.kind];
  const atBottom = body.scrollHeight - body.scrollTop - body.clientHeight < 40;
  body.replaceChildren(...render(client.conversation(current)));
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
            el("span", { text: `${t.root.sender_id}: ${describe(t.root.content)}` }),
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
          el("span", { text: m ? `${m.sender_id}: ${describe(m.content)}` : "a message not loaded here" }),
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
        const row = el(
          "div",
          { class: "row" },
          el("span", { text: user === me ? `${user} (you)` : user }),
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
  $("replying-to").textContent = `Replying to ${message.sender_id}: ${describe(message.content)}`;
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

// A reload keeps the session (this browser's dev user, or this tab's
// pasted token) and the open conversation.
const pasted = sessionStorage.getItem("switchboard.token");
const saved = JSON.parse(localStorage.getItem("switchboard.session") || "null");
if (pasted) startWithToken(pasted).catch((e) => showError("login-error", e.message));
else if (saved?.user) resume(saved.user, saved.device);
