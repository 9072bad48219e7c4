// When the owner store cannot name the engine that stores a response (Redis slow or restarted empty, the id
// forgotten), the engines are asked: the one that answers GET /v1/responses/{id} with 200 stores it.
import type { ResponseOwnerStore } from "../affinity/response-owner-store.js";
import type { ResponseOwner, ResponseOwnerSettings } from "../affinity/response-owners.js";
import type { Backend } from "../backends/backend.js";
import { GatewayError } from "../core/errors.js";
import type { BackendRegistry } from "../backends/registry.js";
import type { UpstreamPools } from "./upstream-pools.js";

export interface OwnerSearchDeps {
  readonly registry: Pick<BackendRegistry, "all">;
  readonly pools: Pick<UpstreamPools, "get">;
  /** How long the engines get to answer (the probe timeout: a stored response is read from memory). */
  readonly timeoutMs: () => number;
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
    this.searches.asked++;
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), this.deps.timeoutMs());
    try {
      const asks = candidates.map((backend) => this.stores(backend, responseId, controller.signal));
      const found = await Promise.any(asks).catch(() => undefined);
      if (found === undefined) return undefined;
      this.searches.found++;
      // The chain's own key is not known here: its turns count as a session from this one on.
      const owner = { backendId: found.id, sessionKey: `response-chain:${responseId}` };
      await this.inner.remember(responseId, owner);
      return owner;
    } finally {
      clearTimeout(timer);
      controller.abort();
    }
  }

  /** Resolves the backend if it answers 200 for the id; rejects otherwise. */
  private async stores(backend: Backend, responseId: string, signal: AbortSignal): Promise<Backend> {
    const { pool, basePath } = this.deps.pools.get(backend);
    const answer = await pool.request({
      method: "GET",
      path: `${basePath}/v1/responses/${encodeURIComponent(responseId)}`,
      headers: backend.upstreamHeaders,
      signal,
    });
    await answer.body.dump();
    if (answer.statusCode !== 200)
      throw new GatewayError("response_not_found", `${backend.id} answered ${answer.statusCode}`);
    return backend;
  }
}
