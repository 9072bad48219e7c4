// The LLM tier classifier: asks a small model which tier a request needs, when the rules do not decide.
//
// Cached by a hash of what it was asked, concurrent identical questions share one call, and it never fails or
// delays a request past its timeout: on timeout, error or an answer it cannot read, the rules' default stands.
import { createHash } from "node:crypto";
import { LRUCache } from "lru-cache";
import type { Clock, Timers } from "../core/clock.js";

export type ClassifierOutcome = "answered" | "cached" | "timeout" | "error" | "unparseable";

export interface ClassifierVerdict {
  tier: string;
  outcome: ClassifierOutcome;
}

/** Asks the engine; resolves with the model's text, rejects on failure. `signal` aborts the call. */
export type ClassifierAsk = (
  question: string,
  tiers: readonly string[],
  signal: AbortSignal,
) => Promise<string>;

export interface TierClassifierSettings {
  timeoutMs: number;
  cacheTtlMs: number;
  maxEntries: number;
}

export interface TierClassifierOptions extends TierClassifierSettings {
  /** The tiers it chooses between. */
  tiers: readonly string[];
  ask: ClassifierAsk;
  clock: Clock;
  /** Where the timeout is scheduled: the gateway's timers (a manual clock's in tests). */
  timers: Timers;
  /** Where outcomes and call latency go (metrics, logs). */
  record: (outcome: ClassifierOutcome, seconds: number | undefined) => void;
}

/** The answer a classifier model gives: `{"tier": "<name>"}` (the JSON schema it is held to). */
export function parseVerdict(text: string, tiers: readonly string[]): string | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text.trim());
  } catch {
    return undefined;
  }
  const tier =
    typeof parsed === "object" && parsed !== null ? (parsed as { tier?: unknown }).tier : undefined;
  return typeof tier === "string" && tiers.includes(tier) ? tier : undefined;
}

export class TierClassifier {
  private readonly cache: LRUCache<string, string>;
  /** Calls under way by question hash: a second identical question waits for the first one's verdict. */
  private readonly inFlight = new Map<string, Promise<ClassifierVerdict>>();

  constructor(private readonly options: TierClassifierOptions) {
    this.cache = new LRUCache<string, string>({
      max: options.maxEntries,
      ttl: Math.max(1, options.cacheTtlMs),
      perf: { now: () => options.clock.nowMs() },
      ttlResolution: 0,
    });
  }

  /**
   * The tier for `question`, one of `tiers`; `fallback` whenever the classifier cannot say. Never rejects.
   */
  async classify(question: string, fallback: string): Promise<ClassifierVerdict> {
    const tiers = this.options.tiers;
    const key = createHash("sha256").update(question).digest("hex");
    const cached = this.options.cacheTtlMs > 0 ? this.cache.get(key) : undefined;
    if (cached !== undefined) {
      this.options.record("cached", undefined);
      return { tier: cached, outcome: "cached" };
    }
    const running = this.inFlight.get(key);
    if (running !== undefined) {
      const verdict = await running;
      // A shared answer is a cache hit for this request; a shared failure is the same failure.
      if (verdict.outcome !== "answered") return { tier: fallback, outcome: verdict.outcome };
      this.options.record("cached", undefined);
      return { tier: verdict.tier, outcome: "cached" };
    }
    const call = this.call(key, question, tiers, fallback);
    this.inFlight.set(key, call);
    try {
      return await call;
    } finally {
      this.inFlight.delete(key);
    }
  }

  private async call(
    key: string,
    question: string,
    tiers: readonly string[],
    fallback: string,
  ): Promise<ClassifierVerdict> {
    const startedMs = this.options.clock.nowMs();
    const controller = new AbortController();
    let cancelTimeout: () => void = () => undefined;
    const timedOut = new Promise<"timeout">((resolve) => {
      cancelTimeout = this.options.timers.after(this.options.timeoutMs, () => resolve("timeout"));
    });
    let outcome: ClassifierOutcome;
    let tier = fallback;
    try {
      const answer = await Promise.race([this.options.ask(question, tiers, controller.signal), timedOut]);
      if (answer === "timeout") {
        outcome = "timeout";
      } else {
        const verdict = parseVerdict(answer, tiers);
        outcome = verdict === undefined ? "unparseable" : "answered";
        if (verdict !== undefined) {
          tier = verdict;
          if (this.options.cacheTtlMs > 0) this.cache.set(key, verdict);
        }
      }
    } catch {
      outcome = "error";
    } finally {
      cancelTimeout();
      controller.abort();
    }
    this.options.record(outcome, (this.options.clock.nowMs() - startedMs) / 1000);
    return { tier, outcome };
  }
}
