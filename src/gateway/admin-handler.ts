// /admin: backends and their state, the sessions (a page at a time) and one session's binding, drain/undrain, reload; bearer token required.
import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { GatewayError } from "../core/errors.js";
import type { GatewayParts, LiveState } from "./runtime.js";
import { writeJson } from "../core/write-json.js";
import { describeReceipts } from "../receipts/describe-receipts.js";
import { DEFAULT_SESSIONS_PAGE } from "../receipts/session-list.js";
import { listSessions } from "./admin-sessions.js";

export interface AdminActions {
  /** Re-reads and applies the config file; resolves to a short summary or rejects with the problems. */
  reload(): Promise<{ changed: string[] }>;
}

function digest(text: string): Buffer {
  return createHash("sha256").update(text).digest();
}

/** Constant-time: the comparison takes as long whatever prefix of the token a caller guessed. */
function tokenMatches(presented: string, expected: string): boolean {
  return timingSafeEqual(digest(presented), digest(expected));
}

function authorize(req: IncomingMessage, token: string | undefined): void {
  if (token === undefined) {
    throw new GatewayError(
      "forbidden",
      "the admin API is disabled: set server.admin_token or AGENT_SERVE_ADMIN_TOKEN",
    );
  }
  const header = req.headers.authorization;
  const presented = header?.startsWith("Bearer ") ? header.slice(7) : undefined;
  if (presented === undefined)
    throw new GatewayError("unauthorized", "admin API needs 'Authorization: Bearer <token>'");
  if (!tokenMatches(presented, token)) throw new GatewayError("forbidden", "wrong admin token");
}

/** What the admin API reads and changes of the gateway. */
export type AdminDeps = Pick<
  GatewayParts,
  "registry" | "scheduler" | "logger" | "receipts" | "bindings" | "clock"
>;

export async function handleAdmin(
  rt: AdminDeps,
  live: LiveState,
  actions: AdminActions,
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
): Promise<void> {
  authorize(req, live.settings.adminToken);
  const parts = path
    .split("/")
    .filter((p) => p !== "")
    .map(decodePart); // ["admin", ...]
  const method = req.method ?? "GET";

  if (parts.length === 2 && parts[1] === "backends") {
    requireMethod(method, "GET");
    return writeJson(res, 200, { backends: [...rt.registry.all()].map((b) => describeBackend(rt, b.id)) });
  }
  if (parts.length === 3 && parts[1] === "backends") {
    requireMethod(method, "GET");
    return writeJson(res, 200, describeBackend(rt, parts[2]!));
  }
  if (parts.length === 4 && parts[1] === "backends" && (parts[3] === "drain" || parts[3] === "undrain")) {
    requireMethod(method, "POST");
    const backend = rt.registry.get(parts[2]!);
    if (backend === undefined) throw new GatewayError("backend_not_found", `no backend '${parts[2]}'`);
    backend.drained = parts[3] === "drain";
    rt.logger.info({ backend: backend.id, drained: backend.drained }, "backend drain state changed");
    return writeJson(res, 200, describeBackend(rt, backend.id));
  }
  if (parts.length === 2 && parts[1] === "sessions") {
    requireMethod(method, "GET");
    const query = new URL(req.url ?? "/", "http://admin").searchParams;
    const limit = query.get("limit") ?? String(DEFAULT_SESSIONS_PAGE);
    return writeJson(res, 200, await listSessions(rt, query.get("after") ?? undefined, limit));
  }
  if (parts.length === 3 && parts[1] === "sessions") {
    requireMethod(method, "GET");
    const sessionId = parts[2]!;
    // The binding as every replica sees it (not refreshed), and the session's last receipts.
    const [bound, receipts] = await Promise.all([
      rt.scheduler.boundBackend(sessionId),
      rt.receipts.recent(sessionId),
    ]);
    if (bound === undefined && receipts === undefined)
      throw new GatewayError(
        "session_not_found",
        `session '${sessionId}' has no live binding and no receipts`,
      );
    const tier = bound === undefined ? undefined : rt.registry.get(bound)?.tier;
    return writeJson(res, 200, {
      session_id: sessionId,
      backend_id: bound ?? null,
      tier: tier ?? null,
      ranking:
        tier === undefined ? [] : rt.scheduler.ranking(sessionId, rt.registry.tier(tier)).map((b) => b.id),
      ...describeReceipts(receipts),
    });
  }
  if (parts.length === 2 && parts[1] === "reload") {
    requireMethod(method, "POST");
    try {
      return writeJson(res, 200, { reloaded: true, ...(await actions.reload()) });
    } catch (err) {
      throw new GatewayError("invalid_request", err instanceof Error ? err.message : String(err));
    }
  }
  throw new GatewayError("not_found", `no admin resource ${path}`);
}

function decodePart(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new GatewayError("invalid_request", `malformed percent-encoding in the admin path: '${part}'`);
  }
}

function requireMethod(actual: string, expected: string): void {
  if (actual !== expected)
    throw new GatewayError("method_not_allowed", `use ${expected} for this admin resource`);
}

function describeBackend(rt: AdminDeps, id: string): Record<string, unknown> {
  const backend = rt.registry.get(id);
  if (backend === undefined) throw new GatewayError("backend_not_found", `no backend '${id}'`);
  return {
    id: backend.id,
    tier: backend.tier,
    base_url: backend.baseUrl,
    model: backend.model,
    gpu: backend.gpu ?? null,
    state: backend.state,
    health: backend.health.health,
    failure_streak: backend.health.failureStreak,
    drained: backend.drained,
    inflight: backend.inflight,
    max_inflight: backend.maxInflight,
    weight: backend.weight,
    bindings: rt.scheduler.bindingsOf(backend.id),
  };
}
