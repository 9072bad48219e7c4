// Which session a request belongs to, from the signals clients already send (affinity.session_keys, in order).
import { hashString } from "../affinity/hash.js";
import { contentText, isRecord } from "../affinity/prefix-key.js";
import type { SessionKeyConfig } from "../config/schema.js";
import { GatewayError } from "../core/errors.js";
import type { DistinctHeaders } from "./client-auth.js";
import { MAX_SESSION_ID_BYTES, printable, single } from "./client-headers.js";

export interface SessionIdentity {
  /** The affinity key: the client's session id, or that id and its thread (see threadKey). */
  key: string;
  /** The client's session id as sent: one program, sub-agents and side requests included (its flow). */
  clientId: string;
  /** Which entry named it, e.g. `header:x-claude-code-session-id`, `body:prompt_cache_key`. */
  source: string;
}

/** What a Responses chain's root would be: only a Responses request that is or continues a stored one has one. */
export type ChainDecides = "responses_chain";

/**
 * Characters of each part of a thread's root hashed into its key at most: of its system prompt (with the messages
 * before the first user turn), and of its first user turn. Capped apart, not together: a coding agent's system
 * prompt with its tool definitions runs past 20,000 characters (Claude Code's, and its task agents'), and a cap
 * on the whole root cut every sub-agent's task off, so a burst's sub-agents all got one key and one engine (the
 * kvevents study: 8 to 24 sub-agent calls at once on the parent's engine, docs/kv-events.md, sixth round).
 */
const THREAD_ROOT_PART_MAX_CHARS = 8_192;

/**
 * A thread's root: its system prompt (Anthropic `system`, Responses `instructions`, the messages before the
 * first user turn) and its first user turn, each to THREAD_ROOT_PART_MAX_CHARS. Every later turn of a
 * conversation repeats it, while a coding agent's sub-agents, sharing the session id and often the system
 * prompt, differ in their first turn (each sub-agent's task) and side requests (titles, summaries) in both.
 */
export function threadRootText(body: Record<string, unknown>): string {
  const cap = (text: string): string => text.slice(0, THREAD_ROOT_PART_MAX_CHARS);
  let head = contentText(body["system"]);
  if (typeof body["instructions"] === "string") head += body["instructions"];
  const messages = body["messages"] ?? body["input"];
  if (typeof messages === "string") return cap(head) + "\u0002" + cap(messages);
  if (!Array.isArray(messages)) return cap(head);
  for (const message of messages) {
    if (!isRecord(message)) continue;
    const text = contentText(message["content"]);
    if (message["role"] === "user") return cap(head) + "\u0002" + cap(text);
    if (head.length < THREAD_ROOT_PART_MAX_CHARS) head += "\u0002" + text;
  }
  return cap(head);
}

/** `session#thread`: the session id and 8 hex digits of its thread's root. */
export function threadKey(sessionId: string, body: Record<string, unknown>): string {
  const { hi } = hashString(threadRootText(body));
  return `${sessionId}#${(hi >>> 0).toString(16).padStart(8, "0")}`;
}

/** The value at a dotted path of the body, when it is there (undefined otherwise). */
function fieldAt(body: Record<string, unknown>, path: string): unknown {
  let value: unknown = body;
  for (const name of path.split(".")) {
    if (!isRecord(value)) return undefined;
    value = value[name];
  }
  return value;
}

/**
 * A session id carried inside a string field: JSON with the named member (Claude Code's metadata.user_id,
 * `{"device_id":...,"session_id":"..."}`), or older Claude Code's `user_<hash>_account_<uuid>_session_<uuid>`.
 * undefined when the string holds neither: then the entry does not name the session and the next one decides.
 */
export function embeddedSessionId(text: string, member: string): string | undefined {
  if (text.startsWith("{")) {
    try {
      const parsed: unknown = JSON.parse(text);
      const value = isRecord(parsed) ? parsed[member] : undefined;
      return typeof value === "string" ? value : undefined;
    } catch {
      return undefined;
    }
  }
  const marker = `_${member.replace(/_id$/, "")}_`;
  const at = text.lastIndexOf(marker);
  return at < 0 ? undefined : text.slice(at + marker.length);
}

function validated(name: string, value: string): string {
  return printable(name, value, MAX_SESSION_ID_BYTES, "invalid_request");
}

/**
 * The first entry of `keys` the request carries names its session (a value that is present but malformed is a
 * 400 naming where it came from, never skipped). A `responses_chain` entry reached while `chained` is true
 * hands the decision to the chain (src/gateway/response-chain.ts); undefined: no session.
 */
export function identifySession(
  headers: DistinctHeaders,
  body: Record<string, unknown>,
  keys: readonly SessionKeyConfig[],
  chained: boolean,
): SessionIdentity | ChainDecides | undefined {
  for (const entry of keys) {
    let id: string | undefined;
    let source: string;
    if ("header" in entry) {
      source = `header:${entry.header}`;
      const value = single(headers, entry.header);
      if (value === undefined) continue;
      id = printable(entry.header, value, MAX_SESSION_ID_BYTES);
    } else if ("body" in entry) {
      source = `body:${entry.body}`;
      const value = fieldAt(body, entry.body);
      if (value === undefined || value === null) continue;
      if (typeof value !== "string") {
        throw new GatewayError("invalid_request", `'${entry.body}' must be a string`, { param: entry.body });
      }
      const named = entry.json === undefined ? value : embeddedSessionId(value, entry.json);
      if (named === undefined) continue;
      id = validated(entry.body, named);
    } else {
      if (chained) return "responses_chain";
      continue;
    }
    return { key: entry.split_threads ? threadKey(id, body) : id, clientId: id, source };
  }
  return undefined;
}
