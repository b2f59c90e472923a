// Polls (v1.3): the `poll` content a client sends, the results a poll
// message carries (`poll_results`), and how a `poll_updated` event is
// read. The event names no voter: which options are the reader's own
// (`me`) is known from the votes this client sent, and from the
// `voters` lists of a poll that is not anonymous.
import type { PollContent, PollOption, PollResults, ServerFrame } from "./protocol.js";

/** A `poll_updated` event (v1.3): a poll's results after a vote or its
 * closing: `counts` per option id (absolute), `closed`, and unless the
 * poll is anonymous each option's latest `voters` (at most 100, the
 * latest first). In a large channel the server coalesces them: one per
 * poll and moment, with the results after every vote. It carries no
 * `me`. */
export type PollUpdatedEvent = Omit<Extract<ServerFrame, { type: "poll_updated" }>, "type">;

/** A poll to send (`client.sendPoll`): options as texts (their ids are
 * made up: `o1`, `o2`, ...) or as `{ id, text }`. */
export interface NewPoll {
  /** 1 to 300 characters. */
  question: string;
  /** 2 to 10. */
  options: readonly (string | PollOption)[];
  /** A voter may choose more than one option (default false). */
  multiple?: boolean;
  /** The results name nobody (default false). */
  anonymous?: boolean;
  /** When voting ends by itself (in the future); without it, when
   * closed by hand (`client.closePoll`). */
  closesAt?: Date | string;
}

/** The `poll` content of a `NewPoll`. The server checks the bounds (a
 * `SendError` `invalid_request` past them). */
export function pollContent(poll: NewPoll): PollContent & { kind: "poll" } {
  const taken = new Set(poll.options.flatMap((o) => (typeof o === "string" ? [] : [o.id])));
  let next = 0;
  const freshId = () => {
    let id: string;
    do {
      next += 1;
      id = `o${next}`;
    } while (taken.has(id));
    taken.add(id);
    return id;
  };
  const closes = poll.closesAt instanceof Date ? poll.closesAt.toISOString() : poll.closesAt;
  return {
    kind: "poll",
    question: poll.question,
    options: poll.options.map((o) => (typeof o === "string" ? { id: freshId(), text: o } : { id: o.id, text: o.text })),
    multiple: poll.multiple ?? false,
    anonymous: poll.anonymous ?? false,
    ...(closes ? { closes_at: closes } : {}),
  };
}

/** The results of a poll nobody voted in yet (what the server stores
 * with it). */
export function freshResults(poll: PollContent): PollResults {
  return {
    counts: Object.fromEntries(poll.options.map((o) => [o.id, 0])),
    closed: false,
    ...(poll.anonymous ? {} : { voters: Object.fromEntries(poll.options.map((o) => [o.id, []])) }),
    me: [],
  };
}

/** Option ids in the poll's order (the order the server keeps a choice
 * in), each once. */
export function inPollOrder(poll: PollContent | undefined, optionIds: readonly string[]): string[] {
  const unique = [...new Set(optionIds)];
  if (!poll) return unique;
  const order = new Map(poll.options.map((o, i) => [o.id, i]));
  return unique.sort((a, b) => (order.get(a) ?? Infinity) - (order.get(b) ?? Infinity));
}

/** Whether `voters[id]` names every voter of that option (the server
 * names the latest 100). */
const complete = (event: Pick<PollResults, "counts">, id: string, listed: readonly string[]) => listed.length >= (event.counts[id] ?? 0);

/** The reader's own choice after `event`: where the poll names its
 * voters, the options that list `user` (an option whose list leaves
 * voters out keeps what was known); an anonymous poll's, what was known
 * (less an option nobody chose any more). */
export function choiceAfter(
  poll: PollContent | undefined,
  event: Pick<PollResults, "counts" | "voters">,
  user: string | undefined,
  known: readonly string[],
): string[] {
  const ids = poll ? poll.options.map((o) => o.id) : Object.keys(event.counts);
  const voters = event.voters;
  if (!voters || user === undefined) return ids.filter((id) => known.includes(id) && (event.counts[id] ?? 0) > 0);
  const listed = ids.filter((id) => voters[id]?.includes(user));
  // One option per voter: where they are listed is their choice.
  if (listed.length && poll && !poll.multiple) return listed;
  return ids.filter((id) => {
    const users = voters[id] ?? [];
    if (users.includes(user)) return true;
    return known.includes(id) && !complete(event, id, users);
  });
}

/** Whether `event` can be the answer to `user`'s vote for `optionIds`
 * (in the poll's order): an open poll, each chosen option counted, and,
 * where voters are named, `user` listed under no other option and under
 * each chosen one (unless its list leaves voters out). An event from
 * before the vote fails one of these as soon as the vote changes
 * anything; a repeat is answered to the voter alone. */
export function answersVote(event: PollUpdatedEvent, optionIds: readonly string[], user: string | undefined): boolean {
  if (event.closed) return false;
  if (optionIds.some((id) => (event.counts[id] ?? 0) < 1)) return false;
  const voters = event.voters;
  if (!voters || user === undefined) return true;
  for (const [id, users] of Object.entries(voters)) {
    const listed = users.includes(user);
    const chosen = optionIds.includes(id);
    if (listed && !chosen) return false;
    if (chosen && !listed && complete(event, id, users)) return false;
  }
  return true;
}
