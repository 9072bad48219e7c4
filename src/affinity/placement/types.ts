// The placement pipeline's vocabulary: candidates, the request, the per-decision state, and the stage types.
import type { Hash64 } from "../hash.js";
import type { RendezvousCandidate } from "../rendezvous.js";

/** up: takes new sessions; draining: keeps its pinned sessions, takes no new ones; down: takes nothing. */
export type BackendState = "up" | "down" | "draining";

/**
 * What an engine reports of its own load (vLLM's /metrics, read by the gateway's poller). Any field may be
 * missing (the engine does not export it, or was never read), and the whole reading may be old.
 */
export interface EngineSignals {
  readonly runningRequests: number | undefined;
  readonly waitingRequests: number | undefined;
  /** Fraction of KV-cache blocks in use, 0-1. */
  readonly kvCacheUsage: number | undefined;
  /** When it was read (clock ms). */
  readonly readAtMs: number;
}

/** One backend as placement sees it: identity and weight (rendezvous), health, and its load. */
export interface PlacementCandidate extends RendezvousCandidate {
  readonly state: BackendState;
  /** Requests this gateway has in flight on the backend now. */
  readonly inflight: number;
  /** Requests waiting at this gateway for a slot on the backend. */
  readonly queued: number;
  /**
   * Requests placed on the backend whose binding write is still under way (a store with a round trip, Redis):
   * placement-service.ts counts them until they are in flight, so a burst placed meanwhile sees its siblings.
   */
  placing?: number;
  /** Slots: beyond this many in flight a request waits at the gateway. */
  readonly maxInflight: number;
  /** The engine's last reading of itself, if any. */
  readonly engineLoad: EngineSignals | undefined;
}

/** What the client's request contributes to a placement decision (never raw headers). */
export interface PlacementRequest {
  readonly tier: string;
  readonly sessionId: string | undefined;
  /** Hash of the prompt's shared leading part (src/affinity/prefix-key.ts), when it has one. */
  readonly prefixKey: Hash64 | undefined;
  /** Backends that already failed this request. */
  readonly exclude: ReadonlySet<string>;
  /** Tokens of the prompt each engine that publishes KV events holds (absent: no such engine, or not asked). */
  readonly cachedTokens?: ReadonlyMap<string, number> | undefined;
  /**
   * The prefill each engine that publishes KV events has still to do for requests this gateway sent it (the work
   * ahead of this request there; src/kv-events/pending-blocks.ts), in tokens at no context (prefillWorkTokens).
   */
  readonly activeWork?: ReadonlyMap<string, number> | undefined;
  /** affinity.kv_events.prefill_context_weight: what a token of context adds to a prompt token's prefill work. */
  readonly prefillContextWeight?: number | undefined;
  /**
   * Prompt tokens each engine that publishes KV events can take before it must evict what it holds (its room
   * less the prefill sent there and not yet stored): what a new conversation would push out of it.
   */
  readonly roomTokens?: ReadonlyMap<string, number> | undefined;
  /** The prompt's length in tokens, when the gateway renders it (src/kv-events/prompt-blocks.ts). */
  readonly promptTokens?: number | undefined;
  /**
   * The prompt carries no earlier answer (src/kv-events/prompt-blocks.ts): what any engine holds of it is an
   * opening other conversations may share (a system prompt, a sub-agent's instructions), not this conversation.
   */
  readonly opensConversation?: boolean | undefined;
  /**
   * Requests other gateway replicas have in flight on each up engine that publishes KV events, when the replicas
   * share their sends (src/kv-events/shared-pending.ts): the KV load bound counts them with this replica's own.
   * Up engines only (load.ts, onUpBackends), the set the tier's load is summed over.
   */
  readonly otherReplicasLoad?: ReadonlyMap<string, number> | undefined;
}

/**
 * What one decision knows beyond the request and the candidates, computed once per decision: the key that
 * rendezvous ranks by, the tier's aggregate load (for the load bound), the settings and the time.
 */
export interface PlacementState {
  /** The session id's or the prompt prefix's hash: rendezvous ranks backends by it. */
  readonly key: Hash64;
  /** Bounded-load factor c (>= 1); 0 means no bound. */
  readonly loadFactor: number;
  /** Sum of load (in flight + queued) over the tier's up backends, this request not included. */
  readonly tierLoad: number;
  /** Sum of weights over the tier's up backends. */
  readonly tierWeight: number;
  readonly nowMs: number;
  /** Engine readings older than this are treated as missing. */
  readonly engineSignalMaxAgeMs: number;
}

/** Keeps the candidates that may take the request (order preserved). Pure. */
export type Filter = <C extends PlacementCandidate>(
  request: PlacementRequest,
  state: PlacementState,
  candidates: readonly C[],
) => readonly C[];

/** One score per candidate, in the candidates' order; the pipeline clamps each to [0, 1]. Pure. */
export type Scorer = (
  request: PlacementRequest,
  state: PlacementState,
  candidates: readonly PlacementCandidate[],
) => readonly number[];

export interface WeightedScorer {
  readonly scorer: Scorer;
  readonly weight: number;
}

/** Chooses one of the (filtered, scored) candidates; `scores[i]` is the weighted sum for candidates[i]. */
export type Picker = <C extends PlacementCandidate>(
  request: PlacementRequest,
  state: PlacementState,
  candidates: readonly C[],
  scores: readonly number[],
) => C | undefined;

/** filter -> score -> pick. */
export interface Pipeline {
  readonly filters: readonly Filter[];
  readonly scorers: readonly WeightedScorer[];
  readonly picker: Picker;
}
