// One receipt per turn: the session's previous turn is read when the request arrives, the receipt is computed
// once the engine's usage is known, and this turn is remembered for the next.
import { sessionPage, type SessionPage } from "./session-list.js";
import type { Hash64 } from "../affinity/hash.js";
import type { Endpoint } from "../gateway/completion-request.js";
import type { ReceiptFields } from "../gateway/response-metadata.js";
import { fingerprintOf, type ConversationFingerprint } from "./fingerprint.js";
import { nextEntry, type ReceiptMemory, type SessionReceipts } from "./receipt-memory.js";
import { receiptOf, turnRecordOf, type Receipt, type TurnPlacement } from "./receipt-rules.js";

export interface ReceiptSettings {
  /** KV block size of the engines: only whole blocks are reusable (vLLM's default is 16 tokens). */
  readonly blockTokens: number;
}

/** What a receipt needs of the engine's usage. */
export interface ReceiptUsage {
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly cachedTokens: number;
}

/** What a request offers to be receipted: its body, and the key of its prompt prefix when it has no session. */
export interface ReceiptRequest {
  readonly endpoint: Endpoint;
  readonly body: Record<string, unknown>;
  readonly prefixKey: Hash64 | undefined;
}

export class TurnReceipts {
  constructor(
    readonly memory: ReceiptMemory,
    private readonly settings: ReceiptSettings,
    private readonly nowMs: () => number,
  ) {}

  /**
   * Starts receipting a request: reads its session's (or its prefix key's) previous turn now, alongside
   * routing. Undefined when there is nothing to receipt against (a text completion, no key).
   */
  begin(sessionId: string | undefined, request: ReceiptRequest): PendingReceipt | undefined {
    // The key first: a request with neither a session nor a prefix key is never hashed.
    const key = sessionId ?? sessionlessKey(request.prefixKey);
    if (key === undefined) return undefined;
    const fingerprint = fingerprintOf(request.endpoint, request.body);
    if (fingerprint === undefined) return undefined;
    return new PendingReceipt(
      this.memory,
      key,
      fingerprint,
      this.memory.read(key),
      this.settings,
      this.nowMs,
    );
  }

  /** A page of the sessions remembered here (the admin API); undefined when they live in a shared store. */
  sessions(after: string | undefined, limit: number): SessionPage | undefined {
    const entries = this.memory.entries?.();
    return entries === undefined ? undefined : sessionPage(entries, after, limit);
  }

  /** The session's last receipts (the admin API). */
  async recent(sessionId: string): Promise<SessionReceipts | undefined> {
    return this.memory.read(sessionId);
  }
}

/** The key of a request without a session: its prompt prefix's (the placement key of such requests). */
function sessionlessKey(prefixKey: Hash64 | undefined): string | undefined {
  if (prefixKey === undefined) return undefined;
  return `prefix:${prefixKey.hi.toString(16).padStart(8, "0")}${prefixKey.lo.toString(16).padStart(8, "0")}`;
}

/** The `reading` of a receipt whose previous turn was read at once (one promise for all of them). */
const READ_AT_ONCE: Promise<void> = Promise.resolve();

export class PendingReceipt {
  private previous: SessionReceipts | undefined;
  /** The previous turn was read (or its store failed): the receipt can be computed. */
  loaded = false;
  private computed:
    | { receipt: Receipt; usage: ReceiptUsage; placement: TurnPlacement; responseId: string | undefined }
    | undefined;
  /** Resolves once the previous turn was read (never rejects). */
  readonly reading: Promise<void>;

  constructor(
    private readonly memory: ReceiptMemory,
    readonly key: string,
    private readonly fingerprint: ConversationFingerprint,
    read: SessionReceipts | undefined | Promise<SessionReceipts | undefined>,
    private readonly settings: ReceiptSettings,
    private readonly nowMs: () => number,
  ) {
    if (!(read instanceof Promise)) {
      this.previous = read;
      this.loaded = true;
      this.reading = READ_AT_ONCE;
      return;
    }
    this.reading = read.then(
      (entry) => {
        this.previous = entry;
        this.loaded = true;
      },
      () => {
        this.loaded = true; // a store that failed: receipted as a new session
      },
    );
  }

  /**
   * The receipt, synchronously, for the answer's body or its stream's last event, and the turn remembered for
   * the next at once (before the answer ends, so a next turn on another replica finds it). Undefined while the
   * previous turn is still being read (the request path awaits `reading` before any attempt; settle() awaits it).
   */
  now(usage: ReceiptUsage, placement: TurnPlacement, responseId?: string): Receipt | undefined {
    if (!this.loaded) return undefined;
    const done = this.computed;
    if (
      done !== undefined &&
      sameUsage(done.usage, usage) &&
      samePlacement(done.placement, placement) &&
      (responseId === undefined || responseId === done.responseId)
    )
      return done.receipt;
    const nowMs = this.nowMs();
    const receipt = receiptOf(
      this.previous?.last,
      this.fingerprint,
      placement,
      usage.cachedTokens,
      this.settings.blockTokens,
      nowMs,
    );
    const id = responseId ?? done?.responseId;
    this.computed = { receipt, usage, placement, responseId: id };
    const record = turnRecordOf(this.fingerprint, usage, placement, id, nowMs);
    this.memory.write(this.key, nextEntry(this.previous, record, receipt));
    return receipt;
  }

  /**
   * The turn answered with this usage: its receipt (computed and remembered now if the answer did not). At
   * once when the previous turn is in, as it always is once the request path awaited `reading`.
   */
  settle(
    usage: ReceiptUsage,
    placement: TurnPlacement,
    responseId: string | undefined,
  ): Receipt | Promise<Receipt> {
    if (this.loaded) return this.now(usage, placement, responseId)!;
    return this.reading.then(() => this.now(usage, placement, responseId)!);
  }
}

/** A receipt as the client sees it (x_agent_serve, headers). */
export function receiptFields(receipt: Receipt): ReceiptFields {
  return {
    reusable_tokens: receipt.reusableTokens,
    cached_tokens: receipt.cachedTokens,
    lost_tokens: receipt.lostTokens,
    lost_cause: receipt.lostCause,
    expected_cached_tokens: receipt.expectedCachedTokens,
  };
}

function samePlacement(a: TurnPlacement, b: TurnPlacement): boolean {
  return (
    a.backendId === b.backendId &&
    a.tier === b.tier &&
    a.reason === b.reason &&
    a.expectedCachedTokens === b.expectedCachedTokens
  );
}

function sameUsage(a: ReceiptUsage, b: ReceiptUsage): boolean {
  return (
    a.promptTokens === b.promptTokens &&
    a.completionTokens === b.completionTokens &&
    a.cachedTokens === b.cachedTokens
  );
}
