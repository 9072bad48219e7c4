// When the owner store cannot name the engine that stores a response (Redis slow or restarted empty, the id
// forgotten), the engines are asked: the one that answers GET /v1/responses/{id} with 200 stores it. Each ask is
// an attempt (runAttempt, with stored-response-call.ts's plan), as every engine call is.
import type { ResponseOwnerStore } from "../affinity/response-owner-store.js";
import type { ResponseOwner, ResponseOwnerSettings } from "../affinity/response-owners.js";
import type { Backend } from "../backends/backend.js";
import type { BackendRegistry } from "../backends/registry.js";
import type { Timers } from "../core/clock.js";
import { GatewayError } from "../core/errors.js";
import { AttemptAbort } from "./attempt-abort.js";
import { runAttempt, type AttemptEnv } from "./attempt.js";
import { BufferedAnswer } from "./buffered-answer.js";
import { storedResponsePlan } from "./stored-response-call.js";
import type { UpstreamPools } from "./upstream-pools.js";

export interface OwnerSearchDeps {
  readonly registry: Pick<BackendRegistry, "all">;
  readonly pools: Pick<UpstreamPools, "get">;
  /** The live snapshot's attempt env (read per search: a reload's timeouts and limits apply at once). */
  readonly attemptEnv: () => AttemptEnv;
  /** How long the engines get to answer (the probe timeout: a stored response is read from memory). */
  readonly timeoutMs: () => number;
  /** Where that timeout is scheduled: the gateway's timers (a manual clock's in tests). */
  readonly timers: Timers;
  /** runAttempt unless a unit test drives the search with a fake. */
  readonly runAttempt?: typeof runAttempt;
}

/**
 * An owner store that, on a miss, asks every engine that is not down whether it stores the response (in
 * parallel, bounded by the timeout) and remembers the one that does. A miss the engines cannot resolve
 * either (the id was never stored, or its engine is gone) stays a miss: the request is routed as before and
 * the engine answers for the id. Costs nothing on a hit.
 */
export class SearchingOwnerStore implements ResponseOwnerStore {
  /** Misses that asked the engines, and how many of those found the owner (for tests and the soak). */
  readonly searches = { asked: 0, found: 0 };

  constructor(
    private readonly inner: ResponseOwnerStore,
    private readonly deps: OwnerSearchDeps,
  ) {}

  get shared(): boolean {
    return this.inner.shared;
  }

  get size(): number {
    return this.inner.size;
  }

  owner(responseId: string): ResponseOwner | undefined | Promise<ResponseOwner | undefined> {
    const known = this.inner.owner(responseId);
    if (known instanceof Promise) return known.then((owner) => owner ?? this.search(responseId));
    return known ?? this.search(responseId);
  }

  remember(responseId: string, owner: ResponseOwner): void | Promise<void> {
    return this.inner.remember(responseId, owner);
  }

  forget(responseId: string): void {
    this.inner.forget(responseId);
  }

  configure(settings: ResponseOwnerSettings): void {
    this.inner.configure(settings);
  }

  flush(): Promise<void> {
    return this.inner.flush?.() ?? Promise.resolve();
  }

  close(): Promise<void> {
    return this.inner.close?.() ?? Promise.resolve();
  }

  private async search(responseId: string): Promise<ResponseOwner | undefined> {
    const candidates = [...this.deps.registry.all()].filter((b) => b.state !== "down");
    if (candidates.length === 0) return undefined;
    const search = ++this.searches.asked;
    // One reason stops every ask still going: the timeout, or the search being over (one engine answered).
    let over: Error | undefined;
    const aborts = candidates.map(() => new AttemptAbort());
    const stop = (why: Error): void => {
      over ??= why;
      for (const abort of aborts) abort.abort(over);
    };
    const cancelTimeout = this.deps.timers.after(this.deps.timeoutMs(), () =>
      stop(new GatewayError("upstream_timeout", "no engine answered the owner search in time")),
    );
    try {
      const env = this.deps.attemptEnv();
      const asks = candidates.map((backend, i) =>
        this.stores(env, backend, responseId, {
          requestId: `owner-search-${search}-${backend.id}`,
          abort: aborts[i]!,
          cancelled: () => over,
        }),
      );
      const found = await Promise.any(asks).catch(() => undefined);
      if (found === undefined) return undefined;
      this.searches.found++;
      // The chain's own key is not known here: its turns count as a session from this one on.
      const owner = { backendId: found.id, sessionKey: `response-chain:${responseId}` };
      await this.inner.remember(responseId, owner);
      return owner;
    } finally {
      cancelTimeout();
      stop(new GatewayError("upstream_error", "the owner search is over"));
    }
  }

  /** Resolves the backend if it answers 200 for the id; rejects otherwise (its answer, a failure, a stop). */
  private async stores(
    env: AttemptEnv,
    backend: Backend,
    responseId: string,
    ask: { requestId: string; abort: AttemptAbort; cancelled: () => Error | undefined },
  ): Promise<Backend> {
    const answer = new BufferedAnswer("status");
    const plan = storedResponsePlan(this.deps.pools, {
      backend,
      method: "GET",
      responseId,
      action: "",
      query: "",
      startedAtMs: env.nowMs(),
      ...ask,
    });
    const { status } = await (this.deps.runAttempt ?? runAttempt)(env, plan, answer);
    if (status !== 200) throw new GatewayError("response_not_found", `${backend.id} answered ${status}`);
    return backend;
  }
}
