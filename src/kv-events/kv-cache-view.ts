// The gateway's view of every engine's prefix cache: one subscriber and one index per engine that publishes
// KV events, and the question placement asks: how many tokens of this prompt does each engine hold?
//
// Each gateway replica subscribes on its own (no shared state): every replica hears every engine's events.
import { systemClock, systemTimers, type Clock, type Timers } from "../core/clock.js";
import { EngineIndex } from "./engine-index.js";
import { EngineSubscriber, type KvEventSource, type SubscriberStats } from "./engine-subscriber.js";
import { DEFAULT_PENDING_TTL_MS, PendingBlocks } from "./pending-blocks.js";
import type { PromptBlocks } from "./prompt-blocks.js";
import type { PendingShare, SharedPendingMessage, SharedSend } from "./shared-pending.js";
import type { DecodedBatch } from "./wire.js";

/**
 * How long a request that counts on another replica's send of the same prefix to the same engine waits after that
 * send's message arrived, so that the other request reaches the engine first, as its prediction assumes
 * (docs/kv-events.md, "Announced, then predicted"). The other replica sends as soon as its own message comes back
 * from the channel, about when it reaches this one; a few milliseconds cover its path to the engine on a busy
 * machine, and cost nothing beside a prefill of thousands of tokens.
 */
export const SHARED_SEND_HEAD_START_MS = 10;

/**
 * How long an announced send waits for its own message back from the channel once Redis has answered it. It comes
 * within microseconds while the channel is heard; the bound only covers a subscription renewed between the two.
 */
const ECHO_WAIT_MS = 1_000;

export interface KvEventsBackend {
  readonly id: string;
  readonly source: KvEventSource;
  /** Most blocks the engine's index keeps (about the engine's KV capacity). */
  readonly maxBlocks: number;
}

export interface KvCacheViewOptions {
  readonly replayTimeoutMs: number;
  /** Time for the pending entries' TTL (src/kv-events/pending-blocks.ts); the system clock unless given. */
  readonly clock?: Clock;
  /** Timers on the same clock (a send's head start: SHARED_SEND_HEAD_START_MS); the system's unless given. */
  readonly timers?: Timers;
  /** How long a sent prompt's blocks may stay pending unreleased (DEFAULT_PENDING_TTL_MS unless given). */
  readonly pendingTtlMs?: number;
  readonly onError?: (backendId: string, err: unknown) => void;
  readonly onApplied?: (backendId: string, seq: bigint, batch: DecodedBatch) => void;
  /** This replica's name in shared pending-send messages (share()); unique per process. */
  readonly replicaId?: string;
}

/** What one engine holds of a request, in tokens; `via` says how it was matched. */
export interface HeldPrefix {
  readonly tokens: number;
  readonly via: "tokens" | "session";
}

interface Subscription {
  readonly backend: KvEventsBackend;
  readonly subscriber: EngineSubscriber;
  /** Prompts this gateway sent the engine whose blocks its events have not all reported yet. */
  readonly pending: PendingBlocks;
  /** Content key -> requests of this gateway in flight there whose prompt holds it (the engine cannot evict it). */
  readonly inFlight: Map<number, number>;
  /** The other replicas' requests in flight there, as their shared sends tell (applyShared). */
  otherRequests: number;
}

/** Ends a sent prompt's pending entry (its request ended); calling it twice is harmless. */
export type ReleasePending = () => void;

/** A prompt placed on an engine (KvCacheView.place), pending there until its release. */
export interface PlacedPrompt {
  /**
   * The prediction for a request sent now: the tokens of the prompt the engine holds or will have computed ahead
   * of it (the index, and prompts already sent there, by this replica or others), less what the `aheadTokens` of
   * prefill ahead of it will evict. Prompts placed and not yet sent do not count: a request sent before them
   * reaches the engine first (a sessionless call sent while a new session's binding is written).
   */
  expectedAtSend(aheadTokens: number): number;
  /**
   * Tells the other replicas its request is about to leave, before it is predicted: the promise settles once its
   * message has come back from the fleet's channel, after every send the channel ordered ahead of it (the ones the
   * prediction made then counts, and no later one), and, where it counts on one sent a moment ago, after that
   * one's head start to the engine (docs/kv-events.md, "Announced, then predicted"). Undefined when no replicas
   * share their sends (nothing to wait for).
   */
  announce(): Promise<void> | undefined;
  /**
   * Its request is on its way: it counts for later predictions (the other replicas were told by announce()).
   * `heldTokens`: the prediction it was sent with (expectedAtSend), the part of it the engine will not compute.
   */
  markSent(heldTokens?: number): void;
  /** Its request ended (answered, failed, cancelled). */
  release: ReleasePending;
}

/** A prompt another replica sent, as this view tracks it until its end comes (or the pending TTL passes). */
interface SharedEntry {
  readonly engine: string;
  /** Its PendingBlocks id on that engine (undefined: nothing to wait for, only its end's touch matters). */
  readonly pendingId: number | undefined;
  /** The prompt's keys: all of them when the index held the anchor's chain, else those from the anchor on. */
  readonly keys: Float64Array;
  /** The key before `keys` (undefined when `keys` is the whole prompt). */
  readonly anchor: number | undefined;
  /**
   * The blocks before the anchor, once this replica's index holds the anchor's chain (in use while the request
   * runs); undefined until then, or when `keys` is the whole prompt.
   */
  prefix: Float64Array | undefined;
  /** How many blocks precede `keys` (the sender's offset; 0 when `keys` is the whole prompt). */
  readonly offset: number;
  readonly receivedAtMs: number;
}

export class KvCacheView {
  private readonly subscriptions = new Map<string, Subscription>();
  private appliedWaiters: (() => void)[] = [];
  private readonly clock: Clock;
  private readonly timers: Timers;
  /** Where this replica's sends are told to the others (a Redis channel), when the fleet shares them. */
  private pendingShare: PendingShare | undefined;
  private nextSendId = 1;
  /** "replica/id" -> the other replicas' sends not yet ended, oldest first. */
  private readonly shared = new Map<string, SharedEntry>();
  /** The other replicas' sends heard so far: each one's place in the order the fleet's channel gave them. */
  private othersHeard = 0;
  /**
   * This replica's announced sends awaiting their own message back from the channel -> what is told, when it
   * comes, how many of the others' sends came before it (Infinity: it will not come).
   */
  private readonly echoes = new Map<number, (othersAhead: number) => void>();

  constructor(private readonly options: KvCacheViewOptions) {
    this.clock = options.clock ?? systemClock;
    this.timers = options.timers ?? systemTimers;
  }

  /**
   * Tells the other replicas every prompt sent from now on, and its end, through `share` (shared-pending.ts);
   * their messages come in through applyShared().
   */
  share(share: PendingShare): void {
    this.pendingShare = share;
  }

  /**
   * Another replica sent a prompt to an engine, or its request ended: its blocks count as pending there, its
   * prefill as work ahead, and at its end its blocks become the engine's most recently used, as for this
   * replica's own sends. This replica's own messages, and engines it does not subscribe to, are skipped.
   */
  applyShared(message: SharedPendingMessage): void {
    if (message.replica === this.options.replicaId) {
      // An announcement of ours back from the channel: the others' sends heard before it are the ones the channel
      // ordered before it, those its prediction counts.
      const echoed = message.kind === "sent" ? this.echoes.get(message.id) : undefined;
      if (echoed !== undefined) {
        this.echoes.delete(message.id);
        echoed(this.othersHeard);
      }
      return;
    }
    const nowMs = this.clock.nowMs();
    this.purgeShared(nowMs);
    const name = `${message.replica}/${message.id}`;
    if (message.kind === "ended") {
      const entry = this.shared.get(name);
      if (entry !== undefined) this.endShared(name, entry, true);
      return;
    }
    const subscription = this.subscriptions.get(message.engine);
    if (subscription === undefined || this.shared.has(name)) return;
    const size = subscription.subscriber.index.blockSizeTokens;
    if (size !== 0 && size !== message.blockSizeTokens) return;
    const { index } = subscription.subscriber;
    const tailKeys = Float64Array.from(message.tailKeys);
    const other = { order: ++this.othersHeard, atMs: nowMs };
    // The blocks before the anchor are the engine's (the sender found them there): with their chain from the
    // index, the prompt is tracked whole, its shared prefix (a system prompt) in use while it runs. A prefix the
    // sender found pending (computed there for another request, not yet reported) is not in the index yet: its
    // keys come from that pending prompt. Tracked by its anchor only, the prefix was not in use in the eviction
    // forecast once the other request ended, while the engine still could not evict it.
    const prefix =
      message.anchor === undefined
        ? undefined
        : (index.chainTo(message.anchor, message.offset) ??
          pendingPrefix(subscription.pending, message.anchor, message.offset, nowMs));
    let keys = tailKeys;
    let anchor = message.anchor;
    let pendingId: number | undefined;
    if (prefix !== undefined) {
      keys = new Float64Array(prefix.length + tailKeys.length);
      keys.set(prefix);
      keys.set(tailKeys, prefix.length);
      anchor = undefined;
      const blocks = { promptTokens: message.promptTokens, keys, blockSizeTokens: message.blockSizeTokens };
      pendingId = subscription.pending.add(blocks, message.offset, nowMs, true, other);
    } else pendingId = subscription.pending.addShared({ ...message, tailKeys }, nowMs, other);
    acquireInFlight(subscription.inFlight, keys);
    subscription.otherRequests++;
    this.shared.set(name, {
      engine: message.engine,
      pendingId,
      keys,
      anchor,
      prefix: undefined,
      offset: message.offset,
      receivedAtMs: nowMs,
    });
  }

  /** The other replicas' messages may have been missed (the channel dropped): forget their sends. */
  forgetShared(): void {
    for (const [name, entry] of this.shared) this.endShared(name, entry, false);
    // Announcements still on their way will not come back on the lost subscription.
    for (const echoed of this.echoes.values()) echoed(Infinity);
    this.echoes.clear();
  }

  private endShared(name: string, entry: SharedEntry, touch: boolean): void {
    this.shared.delete(name);
    const subscription = this.subscriptions.get(entry.engine);
    if (subscription === undefined) return;
    subscription.otherRequests = Math.max(0, subscription.otherRequests - 1);
    if (entry.pendingId !== undefined) subscription.pending.release(entry.pendingId);
    releaseInFlight(subscription.inFlight, entry.keys);
    if (entry.prefix !== undefined) releaseInFlight(subscription.inFlight, entry.prefix);
    if (!touch) return;
    const index = subscription.subscriber.index;
    index.touch(entry.keys, entry.keys.length);
    if (entry.anchor !== undefined) index.touchChain(entry.anchor);
  }

  /**
   * Another replica's send tracked by its anchor only (this replica's index did not hold the blocks before it
   * when its message came: the sender had applied the engine's events sooner) gets its prefix marked in use as
   * soon as the index holds the anchor's chain. Without it the eviction forecast took a running request's 100k-
   * token history as evictable, ahead of the blocks the engine really evicts (the kvevents study's 3-replica
   * over-predictions, docs/kv-events.md, seventh round).
   */
  private completeShared(engine: string, subscription: Subscription): void {
    const { index } = subscription.subscriber;
    for (const entry of this.shared.values()) {
      if (entry.engine !== engine || entry.anchor === undefined || entry.prefix !== undefined) continue;
      if (!index.holds(entry.anchor)) continue;
      const prefix = index.chainTo(entry.anchor, entry.offset);
      if (prefix === undefined) continue;
      entry.prefix = prefix;
      acquireInFlight(subscription.inFlight, prefix);
    }
  }

  /** Sends whose end never came (a replica died) leave after the pending TTL, as their pending blocks do. */
  private purgeShared(nowMs: number): void {
    const ttlMs = this.options.pendingTtlMs ?? DEFAULT_PENDING_TTL_MS;
    for (const [name, entry] of this.shared) {
      if (entry.receivedAtMs + ttlMs > nowMs) return;
      this.endShared(name, entry, false);
    }
  }

  /** Resolves after the next batch any engine's subscriber applies (tools and tests wait on it, not on time). */
  nextApplied(): Promise<void> {
    return new Promise((resolve) => this.appliedWaiters.push(resolve));
  }

  /**
   * Subscribes to exactly these engines: new ones are subscribed, gone ones closed, and one whose address
   * changed is subscribed anew (its index starts empty).
   */
  configure(backends: readonly KvEventsBackend[]): void {
    const wanted = new Map(backends.map((backend) => [backend.id, backend]));
    for (const [id, subscription] of this.subscriptions) {
      const next = wanted.get(id);
      if (next === undefined || !sameSource(next, subscription.backend)) {
        subscription.subscriber.close();
        this.subscriptions.delete(id);
      }
    }
    for (const backend of backends) {
      if (this.subscriptions.has(backend.id)) continue;
      const inFlight = new Map<number, number>();
      // Blocks of prompts in flight that the engine evicted in the batch being applied: it evicted them before
      // scheduling their request, which will compute them again (pending-blocks.ts, progressed).
      const evicted = new Set<number>();
      const index = new EngineIndex(backend.maxBlocks, undefined, (key) => {
        if (inFlight.has(key)) evicted.add(key);
      });
      const pending = new PendingBlocks(backend.maxBlocks, this.options.pendingTtlMs);
      const subscriber = new EngineSubscriber(backend.source, index, {
        replayTimeoutMs: this.options.replayTimeoutMs,
        onError: (err) => this.options.onError?.(backend.id, err),
        onApplied: (seq, batch) => {
          pending.progressed((key) => index.holds(key), this.clock.nowMs(), evicted);
          evicted.clear();
          if (this.shared.size > 0) {
            const subscription = this.subscriptions.get(backend.id);
            if (subscription !== undefined) this.completeShared(backend.id, subscription);
          }
          this.options.onApplied?.(backend.id, seq, batch);
          if (this.appliedWaiters.length === 0) return;
          const waiters = this.appliedWaiters;
          this.appliedWaiters = [];
          for (const resolve of waiters) resolve();
        },
      });
      this.subscriptions.set(backend.id, { backend, subscriber, pending, inFlight, otherRequests: 0 });
    }
  }

  /** Whether placement can know what this engine holds. */
  has(backendId: string): boolean {
    return this.subscriptions.has(backendId);
  }

  get size(): number {
    return this.subscriptions.size;
  }

  /** The block size the engine's events use (0 until its first BlockStored). */
  blockSizeOf(backendId: string): number {
    return this.subscriptions.get(backendId)?.subscriber.index.blockSizeTokens ?? 0;
  }

  /**
   * Tokens of the prompt the engine holds as a leading run of full blocks, undefined when it publishes no
   * events. By the prompt's blocks when they are known and match anything (blocks of prompts sent there and
   * not yet reported count as held: pending-blocks.ts); else by the session's chain.
   */
  held(
    backendId: string,
    blocks: PromptBlocks | undefined,
    sessionId: string | undefined,
  ): HeldPrefix | undefined {
    const subscription = this.subscriptions.get(backendId);
    if (subscription === undefined) return undefined;
    const index = subscription.subscriber.index;
    const size = index.blockSizeTokens;
    if (blocks !== undefined && (size === 0 || size === blocks.blockSizeTokens)) {
      const matched = this.matchedWithPending(subscription, blocks, false);
      if (matched > 0 || sessionId === undefined)
        return { tokens: matched * blocks.blockSizeTokens, via: "tokens" };
    }
    if (sessionId === undefined) return { tokens: 0, via: "session" };
    return { tokens: index.sessionBlocks(sessionId) * size, via: "session" };
  }

  /**
   * The gateway placed this prompt on the engine: its blocks count as held there, for placement, until the release
   * is called (the request ended) or the TTL passes (pending-blocks.ts). Once its request is on its way
   * (PlacedPrompt.markSent) they count for predictions too, travel to the other replicas, and are in use there
   * until the release (the engine cannot evict them), which makes them its most recently used. Undefined: nothing
   * to track (the engine publishes no events, or uses another block size).
   *
   * `expectedTokens`: what the eviction forecast said the engine will still hold of it when it schedules it
   * (forecastHeld); the prefill past that, not past what it holds now, is the work this request adds there.
   */
  place(backendId: string, blocks: PromptBlocks, expectedTokens?: number): PlacedPrompt | undefined {
    const subscription = this.subscriptions.get(backendId);
    if (subscription === undefined) return undefined;
    const size = subscription.subscriber.index.blockSizeTokens;
    if (size !== 0 && size !== blocks.blockSizeTokens) return undefined;
    const held = this.matchedWithPending(subscription, blocks, false);
    const { pending, inFlight, subscriber } = subscription;
    const computed =
      expectedTokens === undefined
        ? held
        : Math.min(held, Math.floor(expectedTokens / blocks.blockSizeTokens));
    const id = pending.add(blocks, computed, this.clock.nowMs(), false);
    const keys = blocks.keys;
    // Told to the other replicas (announce): what tells them its end.
    let shareEnd: (() => void) | undefined;
    let sent = false;
    let released = false;
    // Leading blocks held or pending there as last seen (at the send, once predicted): what the other replicas
    // are not told again (shareSend).
    let heldBlocksSeen = held;
    // Once announced: the other replicas' sends ahead of it in the fleet's order, the ones its prediction counts.
    let othersAhead = Infinity;
    return {
      expectedAtSend: (aheadTokens) => {
        heldBlocksSeen = this.matchedWithPending(subscription, blocks, true, othersAhead);
        return this.forecastHeld(backendId, blocks, heldBlocksSeen * blocks.blockSizeTokens, aheadTokens);
      },
      announce: () => {
        const sharing = this.sharing;
        if (released || shareEnd !== undefined || sharing === undefined) return undefined;
        heldBlocksSeen = this.matchedWithPending(subscription, blocks, true);
        const told = this.shareSend(backendId, blocks, heldBlocksSeen, sharing);
        shareEnd = told.end;
        return this.echoOf(told.id, told.delivered, sharing.share).then((ahead) => {
          othersAhead = ahead;
          return this.headStart(subscription, blocks, ahead);
        });
      },
      markSent: (heldTokens) => {
        if (released || sent) return;
        sent = true;
        const heldBlocks =
          heldTokens === undefined ? computed : Math.floor(heldTokens / blocks.blockSizeTokens);
        if (id !== undefined) pending.markSent(id, heldBlocks);
        // In use at the engine from now: not before, or the forecast for its own send (expectedAtSend) would
        // find its blocks in use, hence never evicted.
        acquireInFlight(inFlight, keys);
      },
      release: () => {
        if (released) return;
        released = true;
        if (id !== undefined) pending.release(id);
        // Announced and then dropped (its slot went away, the client left): the others forget it.
        shareEnd?.();
        if (!sent) return; // never sent: the engine never saw it
        releaseInFlight(inFlight, keys);
        subscriber.index.touch(keys, keys.length);
      },
    };
  }

  /**
   * Where this prompt would count on blocks that only another replica's send of the last SHARED_SEND_HEAD_START_MS
   * gives (a sibling sub-agent's first call, sent a moment ago by another replica to the same engine), waits out
   * the rest of that time: the engine then has the other request first, and computes the shared blocks for it.
   * Without the wait the two requests raced to the engine, and the one predicted to find the blocks often came
   * first and computed them itself (docs/kv-events.md, "Announced, then predicted").
   */
  private headStart(
    subscription: Subscription,
    blocks: PromptBlocks,
    othersAhead: number,
  ): Promise<void> | undefined {
    const nowMs = this.clock.nowMs();
    const sinceMs = nowMs - SHARED_SEND_HEAD_START_MS;
    const fresh = subscription.pending.freshOthers(blocks.keys, nowMs, sinceMs, othersAhead);
    if (fresh === undefined) return undefined;
    const { index } = subscription.subscriber;
    if (index.matchedBlocks(blocks.keys, fresh.freshRun) <= index.matchedBlocks(blocks.keys, fresh.olderRun))
      return undefined; // the engine holds those blocks already
    const waitMs = fresh.latestAtMs + SHARED_SEND_HEAD_START_MS - nowMs;
    return new Promise((resolve) => this.timers.after(waitMs, resolve));
  }

  /**
   * How many of the other replicas' sends the channel ordered before this replica's send `id`: the count heard
   * when its own message comes back (the channel keeps its order on the subscriber connection, which an answer
   * on the publishing connection does not tell: Redis may answer the publisher before it writes to the
   * subscribers). Infinity when it will not come back (the channel is not heard, or stops being heard: every send
   * heard counts then).
   */
  private echoOf(id: number, delivered: Promise<void>, share: PendingShare): Promise<number> {
    let cancelWait: (() => void) | undefined;
    const echoed = new Promise<number>((resolve) =>
      this.echoes.set(id, (ahead) => {
        cancelWait?.();
        resolve(ahead);
      }),
    );
    return delivered.then(() => {
      const comes = this.echoes.get(id);
      if (comes === undefined) return echoed; // it came already
      if (!share.hearing) {
        this.echoes.delete(id);
        return Infinity;
      }
      cancelWait = this.timers.after(ECHO_WAIT_MS, () => {
        this.echoes.delete(id);
        comes(Infinity);
      });
      return echoed;
    });
  }

  /** The fleet's channel and this replica's name in it, when replicas share their sends. */
  private get sharing(): { share: PendingShare; replica: string } | undefined {
    const share = this.pendingShare;
    const replica = this.options.replicaId;
    return share === undefined || replica === undefined ? undefined : { share, replica };
  }

  /**
   * Tells the other replicas of a send (its blocks past the `held` it found): `delivered` settles as
   * PendingShare.publish says, `end` tells them its end.
   */
  private shareSend(
    backendId: string,
    blocks: PromptBlocks,
    held: number,
    { share, replica }: { share: PendingShare; replica: string },
  ): { id: number; delivered: Promise<void>; end: () => void } {
    const id = this.nextSendId++;
    const offset = Math.min(held, blocks.keys.length);
    const send: SharedSend = {
      kind: "sent",
      replica,
      id,
      engine: backendId,
      offset,
      anchor: offset === 0 ? undefined : blocks.keys[offset - 1],
      tailKeys: Array.from(blocks.keys.subarray(offset)),
      promptTokens: blocks.promptTokens,
      blockSizeTokens: blocks.blockSizeTokens,
    };
    return {
      id,
      delivered: share.publish(send),
      end: () => void share.publish({ kind: "ended", replica, id, engine: backendId }),
    };
  }

  /**
   * What the engine will still hold of `heldTokens` (a leading run of the prompt, as held() said) when it
   * schedules the request, behind `aheadTokens` of prefill sent before it: an engine that has filled its cache
   * evicts its least recently used blocks to make room for that work, and the prompt's own may be among them
   * (src/kv-events/engine-index.ts, forecastRun). Unchanged while the engine has never evicted.
   */
  forecastHeld(backendId: string, blocks: PromptBlocks, heldTokens: number, aheadTokens: number): number {
    const subscription = this.subscriptions.get(backendId);
    if (subscription === undefined || aheadTokens <= 0) return heldTokens;
    const { index } = subscription.subscriber;
    const size = blocks.blockSizeTokens;
    const evictions = Math.ceil(aheadTokens / size) - index.roomBlocks();
    if (!(evictions > 0)) return heldTokens;
    const run = Math.floor(heldTokens / size);
    const inFlight = subscription.inFlight;
    const kept = index.forecastRun(blocks.keys, run, evictions, (key) => inFlight.has(key));
    return kept * size;
  }

  /**
   * Prompt tokens the engine has still to compute for the prompts this gateway sent it (the prefill work ahead
   * of a new request there), undefined when it publishes no events. Only prompts whose blocks are known count.
   */
  activeTokens(backendId: string): number | undefined {
    return this.subscriptions.get(backendId)?.pending.remainingTokens(this.clock.nowMs());
  }

  /** activeTokens in tokens at no context (pending-blocks.ts, prefillWorkTokens): the KV cost's work ahead. */
  activeWork(backendId: string, contextWeight: number): number | undefined {
    return this.subscriptions.get(backendId)?.pending.remainingTokens(this.clock.nowMs(), contextWeight);
  }

  /**
   * The other replicas' requests in flight on the engine, from their shared sends (share()); undefined when the
   * fleet does not share its sends or the engine publishes no events. The load bound counts them beside this
   * replica's own (placement/filter-kv-bounded-load.ts): without them each of three replicas sees a third of an
   * engine's requests.
   */
  otherReplicasRequests(backendId: string): number | undefined {
    if (this.pendingShare === undefined) return undefined;
    return this.subscriptions.get(backendId)?.otherRequests;
  }

  /**
   * Prompt tokens the engine can take before it must evict what it holds: its room (engine-index.ts, roomBlocks)
   * less the prefill this gateway sent it and not yet seen stored. Undefined when it publishes no events or has
   * not yet said its block size.
   */
  roomTokens(backendId: string): number | undefined {
    const subscription = this.subscriptions.get(backendId);
    if (subscription === undefined) return undefined;
    const { index } = subscription.subscriber;
    if (index.blockSizeTokens === 0) return undefined;
    const ahead = subscription.pending.remainingTokens(this.clock.nowMs());
    return Math.max(0, index.roomBlocks() * index.blockSizeTokens - ahead);
  }

  stats(): { backendId: string; blocks: number; subscriber: Readonly<SubscriberStats> }[] {
    return [...this.subscriptions.values()].map(({ backend, subscriber }) => ({
      backendId: backend.id,
      blocks: subscriber.index.size,
      subscriber: subscriber.stats,
    }));
  }

  /** Leading blocks of the prompt held or pending: a pending prompt's shared run, then the index from there. */
  private matchedWithPending(
    subscription: Subscription,
    blocks: PromptBlocks,
    sentOnly: boolean,
    othersUpTo = Infinity,
  ): number {
    const pendingRun = subscription.pending.sharedBlocks(
      blocks.keys,
      this.clock.nowMs(),
      sentOnly,
      othersUpTo,
    );
    return subscription.subscriber.index.matchedBlocks(blocks.keys, pendingRun);
  }

  close(): void {
    for (const echoed of this.echoes.values()) echoed(Infinity);
    this.echoes.clear();
    for (const { subscriber } of this.subscriptions.values()) subscriber.close();
    this.subscriptions.clear();
    this.shared.clear();
    void this.pendingShare?.close();
    this.pendingShare = undefined;
  }
}

/** The first `length` keys of a pending prompt ending at `lastKey`, as a copy (kv-cache-view.ts, applyShared). */
function pendingPrefix(
  pending: PendingBlocks,
  lastKey: number,
  length: number,
  nowMs: number,
): Float64Array | undefined {
  const keys = pending.prefixTo(lastKey, length, nowMs);
  if (keys === undefined) return undefined;
  const prefix = new Float64Array(length);
  for (let at = 0; at < length; at++) prefix[at] = keys[at] as number;
  return prefix;
}

function acquireInFlight(inFlight: Map<number, number>, keys: ArrayLike<number>): void {
  for (let index = 0; index < keys.length; index++) {
    const key = keys[index] as number;
    inFlight.set(key, (inFlight.get(key) ?? 0) + 1);
  }
}

function releaseInFlight(inFlight: Map<number, number>, keys: ArrayLike<number>): void {
  for (let index = 0; index < keys.length; index++) {
    const key = keys[index] as number;
    const count = (inFlight.get(key) ?? 1) - 1;
    if (count <= 0) inFlight.delete(key);
    else inFlight.set(key, count);
  }
}

function sameSource(a: KvEventsBackend, b: KvEventsBackend): boolean {
  return (
    a.source.endpoint === b.source.endpoint &&
    a.source.replayEndpoint === b.source.replayEndpoint &&
    a.source.topic === b.source.topic &&
    a.maxBlocks === b.maxBlocks
  );
}
