// A gateway's shutdown: stop accepting, let requests finish within a grace, end the rest, release everything.
import type { Server } from "node:http";
import { GatewayError } from "../core/errors.js";
import { cancelRequest, type RequestContext } from "./request-context.js";

/** After the grace, how long cancelled requests get to write their last bytes before connections close. */
const SHUTDOWN_FLUSH_MS = 500;

/** The requests a server is running: how many, and a wait for the last one to end. */
export class InFlightRequests {
  private active = 0;
  /** Requests in progress, so that a shutdown's end can close each one properly (streams with an error event). */
  readonly live = new Set<RequestContext>();
  /** Resolved (and cleared) when the last in-flight request ends: shutdown waits on it. */
  private onIdle: (() => void) | undefined;

  /** A request of the API server began (server.ts calls it: no listener of its own per request). */
  started(): void {
    this.active++;
  }

  /** That request's response closed. */
  ended(): void {
    if (--this.active === 0) this.onIdle?.();
  }

  get count(): number {
    return this.active;
  }

  /** Resolves when no request is in flight, or after `ms`, whichever comes first. */
  async idle(ms: number): Promise<void> {
    if (this.active === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await new Promise<void>((resolve) => {
      this.onIdle = resolve;
      // The system's timer: the shutdown's grace is the process's, bounded in wall time whatever the clock.
      timer = setTimeout(resolve, ms);
    });
    clearTimeout(timer);
    this.onIdle = undefined;
  }
}

/**
 * Closes the servers: in-flight requests get `graceMs` to finish; then each one still running ends as a failure
 * would end it (a stream gets an SSE error event and [DONE]) and gets a short flush before connections close.
 * `release` then stops every timer and connection of the gateway's services.
 */
export async function shutDown(
  servers: { api: Server; admin: Server | undefined },
  requests: InFlightRequests,
  graceMs: number,
  release: () => Promise<void>,
): Promise<void> {
  const { api, admin } = servers;
  const closed = new Promise<void>((resolve) => api.close(() => resolve()));
  api.closeIdleConnections();
  const adminClosed = new Promise<void>((resolve) =>
    admin === undefined ? resolve() : admin.close(() => resolve()),
  );
  admin?.closeAllConnections();
  await requests.idle(graceMs);
  if (requests.count > 0) {
    const reason = new GatewayError("shutting_down", "the gateway shut down before the answer was complete");
    for (const ctx of [...requests.live]) cancelRequest(ctx, reason);
    await requests.idle(SHUTDOWN_FLUSH_MS);
  }
  api.closeAllConnections();
  await release();
  await closed;
  await adminClosed;
}
