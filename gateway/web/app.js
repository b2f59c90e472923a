// The browser client of `switchboard dev`, built on the SDK
// (clients/js, bundled as /web/switchboard.js). Every text the server or
// another user sent goes into the page through `textContent` only: no
// HTML is ever parsed from data.
import { SwitchboardClient } from "/web/switchboard.js";

const $ = (id) => document.getElementById(id);

/** An element with properties, attributes and children (text children
 * become text nodes). */
function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("data-") || key.startsWith("aria-") || key === "title" || key === "type") node.setAttribute(key, value);
    else node[key] = value;
  }
  node.append(...children);
  return node;
}

const STATUS_TEXT = { connecting: "connecting…", open: "online", reconnecting: "reconnecting…", closed: "offline" };

let client;
let me;
let current = null;
let details = new Map(); // conversation id -> detail (members and marks)
const nextBefore = new Map(); // conversation id -> next_before_seq, once a page of history was read
const blobUrls = new Map(); // blob_ref -> object URL
let editing = null;
let lastTypingAt = 0;
// The conversation list is the SDK's (`client.conversationList`): read a
// page at a time, then kept current from the session's events, and kept
// with the messages in IndexedDB, so a reload shows it at once.

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
    if (id === current) renderMessages();
  });
  client.on("message", (m) => {
    if (m.conversation_id === current) markRead();
  });
  client.on("typing", (t) => {
    if (t.conversation_id === current) renderTyping();
  });
  client.on("presence", () => renderPresence());
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

function renderList() {
  const list = client.conversationList.items;
  const ul = $("conversations");
  ul.replaceChildren(
    ...list.map((c) => {
      const unread = c.conversation_id === current ? 0 : c.unread_count;
      const button = el(
        "button",
        {
          type: "button",
          "data-conversation": c.conversation_id,
          "aria-current": c.conversation_id === current ? "true" : "false",
          onclick: () => open(c.conversation_id),
        },
        el("span", { class: "title", text: titleOf(c) }),
        unread > 0 ? el("span", { class: "unread", text: String(unread), "aria-label": `${unread} unread` }) : "",
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
  $("editing").hidden = true;
  history.replaceState(null, "", `#${encodeURIComponent(id)}`);
  $("app").classList.add("in-chat");
  for (const b of $("conversations").querySelectorAll("button")) {
    b.setAttribute("aria-current", b.dataset.conversation === id ? "true" : "false");
  }
  for (const input of [$("text"), $("send"), $("attach")]) input.disabled = false;
  showError("chat-error", "");
  // What is known already shows at once (kept from the last visit, or
  // from this session); the network follows.
  const known = details.get(id) ?? client.conversationList.get(id);
  $("chat-title").textContent = known ? titleOf(known) : "";
  renderMessages(true);
  try {
    const detail = await client.rest.conversation(id);
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
  renderTyping();
  renderPresence();
  markRead();
  $("text").focus();
}

async function loadEarlier(id) {
  const before = nextBefore.get(id);
  const page = await client.rest.history(id, before ? { before_seq: before, limit: 50 } : { limit: 50 });
  const state = client.conversation(id);
  // `update` adds what is new and applies edits and deletions made while
  // this browser was away to what it kept.
  for (const m of page.messages) state.update(m);
  nextBefore.set(id, page.next_before_seq ?? null);
}

$("back").addEventListener("click", () => {
  current = null;
  $("app").classList.remove("in-chat");
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
  if (state.highestSeq > read || listed?.unread_count) client.markRead(current);
}
document.addEventListener("visibilitychange", markRead);

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
      return `${content.actor} ${String(content.event).replace(/_/g, " ")} ${(content.user_ids || []).join(", ")}`;
    default:
      return `[${content.kind}]`;
  }
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
  for (const m of state.messages) {
    const system = m.content?.kind === "system";
    const mine = m.sender_id === me && !system;
    const body = m.content && (m.content.kind === "image" || m.content.kind === "file" || m.content.kind === "voice")
      ? mediaNode(m.content)
      : el("span", { class: "body", text: describe(m.content) });
    const meta = el("span", { class: "meta" });
    if (!mine && !system) meta.append(el("span", { class: "sender", text: m.sender_id }));
    meta.append(el("time", { text: new Date(m.created_at).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) }));
    if (m.edited_at && !m.deleted_at) meta.append(el("span", { text: "edited" }));
    if (mine) {
      const [state_, symbol, label] = tickOf(state, m.seq);
      meta.append(el("span", { class: "tick", "data-state": state_, "aria-label": label, title: label, text: symbol }));
      if (!m.deleted_at) {
        meta.append(
          el(
            "span",
            { class: "actions" },
            el("button", { type: "button", text: "Edit", "aria-label": "Edit message", onclick: () => startEdit(m) }),
            el("button", { type: "button", text: "Delete", "aria-label": "Delete message", onclick: () => remove(m) }),
          ),
        );
      }
    }
    nodes.push(
      el("div", { class: `msg${mine ? " mine" : ""}${system ? " system" : ""}`, "data-seq": String(m.seq), "data-message-id": m.message_id }, body, meta),
    );
  }
  // What this client sent that is not stored yet: pending (⏱), or
  // failed, with the reason and a way to retry or drop it.
  for (const o of state.outgoing) {
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
    nodes.push(
      el(
        "div",
        { class: `msg mine ${o.status}`, "data-client-msg-id": o.client_msg_id, "data-status": o.status },
        el("span", { class: "body", text: describe(o.content) }),
        meta,
      ),
    );
  }
  if (!nodes.length) nodes.push(el("p", { class: "empty", text: "No messages yet." }));
  box.replaceChildren(...nodes);
  if (atBottom) box.scrollTop = box.scrollHeight;
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

// ---- Writing ----

function startEdit(message) {
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

$("cancel-edit").addEventListener("click", stopEdit);
$("text").addEventListener("keydown", (event) => {
  if (event.key === "Escape" && editing) stopEdit();
});

$("text").addEventListener("input", () => {
  if (!current || editing || !$("text").value) return;
  // The server takes a start every few seconds at most; it lasts 5 s.
  if (Date.now() - lastTypingAt > 3000) {
    lastTypingAt = Date.now();
    client.typing(current, "start");
  }
});

$("compose").addEventListener("submit", (event) => {
  event.preventDefault();
  const text = $("text").value.trim();
  if (!current || !text) return;
  showError("chat-error", "");
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
  client.sendText(current, text).catch((e) => showError("chat-error", e.message));
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
