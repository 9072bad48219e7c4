// GET /admin/sessions with the Redis binding store, against a real redis-server: SCAN steps over the binding keys
// (MATCH on the store's prefix), an opaque cursor, pages of at most `limit`, every session found once.
import { afterEach, describe, expect, it } from "vitest";
import { scanBindingPage, type BindingCursor } from "../../src/affinity/binding-scan.js";
import { BINDING_SCRIPTS, RedisBindings, type ScannedBinding } from "../../src/affinity/redis-bindings.js";
import { GatewayError } from "../../src/core/errors.js";
import type { RedisLink } from "../../src/store/redis-link.js";
import { chat, startCluster, type Cluster } from "../helpers/cluster.js";
import { quietRedisLink, useRedisServer } from "../helpers/redis-server.js";

const links: RedisLink[] = [];
const clusters: Cluster[] = [];
const redis = useRedisServer(async () => {
  for (const link of links) await link.close();
});

afterEach(async () => {
  for (const cluster of clusters.splice(0)) await cluster.close();
});

const TTL_MS = 3_600_000;
const NOW_MS = 1_000_000;

async function bindings(prefix: string): Promise<RedisBindings> {
  const link = quietRedisLink(redis.server.url, BINDING_SCRIPTS, 2000, "bindings");
  links.push(link);
  expect(await link.connected(10_000)).toBe(true);
  return new RedisBindings(link, prefix, TTL_MS);
}

/** Binds each session (the store's own write script), to backend e-0 or e-1 alternately. */
async function bindAll(remote: RedisBindings, ids: readonly string[]): Promise<void> {
  await Promise.all(
    ids.map((id, i) => {
      const { script, keys, args } = remote.write(id, `e-${i % 2}`, NOW_MS + TTL_MS, NOW_MS);
      return remote.link.run(script, keys, args);
    }),
  );
}

/** Every page from the start; the pages' sizes and the bindings in the order listed. */
async function pageThrough(
  remote: RedisBindings,
  limit: number,
  nowMs = NOW_MS,
): Promise<{ sizes: number[]; listed: ScannedBinding[] }> {
  const sizes: number[] = [];
  const listed: ScannedBinding[] = [];
  let from: BindingCursor | undefined;
  for (let page = 0; page < 10_000; page++) {
    const result = await scanBindingPage(
      (cursor, count, pending) => remote.scanStep(cursor, count, pending, nowMs),
      from,
      limit,
    );
    sizes.push(result.bindings.length);
    listed.push(...result.bindings);
    if (result.next === undefined) return { sizes, listed };
    from = result.next;
  }
  throw new RangeError("the scan never ended");
}

const ids = (n: number, tag: string): string[] => Array.from({ length: n }, (_, i) => `${tag}-${i}`);

describe.skipIf(redis.skip)("scanning the Redis bindings", () => {
  it("lists every session of its prefix exactly once over many pages, and nothing of other prefixes", async () => {
    const remote = await bindings("scan-a:");
    const other = await bindings("scan-b:");
    const sessions = [...ids(230, "s"), "claude#1234", "with|pipe"];
    await bindAll(remote, sessions);
    await bindAll(other, ids(50, "elsewhere"));
    for (const limit of [7, 1, 1000]) {
      const { sizes, listed } = await pageThrough(remote, limit);
      expect(Math.max(...sizes)).toBeLessThanOrEqual(limit);
      expect(listed.map((b) => b.sessionId).sort()).toEqual([...sessions].sort());
      if (limit < sessions.length) expect(sizes.length).toBeGreaterThan(sessions.length / limit - 1);
    }
    const { listed } = await pageThrough(remote, 50);
    const byId = new Map(listed.map((b) => [b.sessionId, b]));
    expect(byId.get("s-3")).toEqual({
      sessionId: "s-3",
      state: "live",
      backendId: "e-1",
      expiresAtMs: NOW_MS + TTL_MS,
      atMs: NOW_MS,
    });
  });

  it("reports each binding's state as a lookup would: live, lapsed, broken", async () => {
    const remote = await bindings("scan-states:");
    await bindAll(remote, ["a", "b", "c", "d"]); // a, c on e-0; b, d on e-1
    const breakOne = remote.breakBinding("a", "e-0", NOW_MS + 1);
    await remote.link.run(breakOne.script, breakOne.keys, breakOne.args);
    const breakBackend = remote.breakBackend("e-1", NOW_MS + 1);
    await remote.link.run(breakBackend.script, breakBackend.keys, breakBackend.args);
    const states = async (nowMs: number) =>
      Object.fromEntries(
        (await pageThrough(remote, 10, nowMs)).listed.map((b) => [b.sessionId, [b.state, b.backendId]]),
      );
    expect(await states(NOW_MS + 2)).toEqual({
      a: ["broken", ""],
      b: ["broken", "e-1"],
      c: ["live", "e-0"],
      d: ["broken", "e-1"],
    });
    expect((await states(NOW_MS + TTL_MS + 1))["c"]).toEqual(["expired", "e-0"]);
  });

  it("in a Redis of mostly other keys, pages may be short but paging still finds every session", async () => {
    const remote = await bindings("scan-sparse:");
    const noise = remote.link.client.pipeline();
    for (let i = 0; i < 4000; i++) noise.set(`unrelated:${i}`, "x");
    await noise.exec();
    const sessions = ids(20, "sparse");
    await bindAll(remote, sessions);
    const { sizes, listed } = await pageThrough(remote, 5);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(5);
    // a page stops after MAX_SCAN_STEPS steps, full or not
    expect(sizes.slice(0, -1).some((size) => size < 5)).toBe(true);
    expect(listed.map((b) => b.sessionId).sort()).toEqual([...sessions].sort());
  });

  it("rejects with store_unavailable when Redis does not answer", async () => {
    const remote = await bindings("scan-down:");
    await remote.link.close();
    const page = scanBindingPage(
      (cursor, count, pending) => remote.scanStep(cursor, count, pending, NOW_MS),
      undefined,
      10,
    );
    await expect(page).rejects.toBeInstanceOf(GatewayError);
    await expect(page).rejects.toMatchObject({ code: "store_unavailable", status: 503 });
  });
});

const TOKEN = "admin-sessions-redis-token-0123456789";

async function admin(url: string, path: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

interface Listed {
  session_id: string;
  backend_id: string | null;
  tier: string | null;
  last_turn_at_ms: number;
  receipts: number;
}

describe.skipIf(redis.skip)("GET /admin/sessions with affinity.store redis", () => {
  it("any replica pages through every replica's sessions, the cursor opaque", async () => {
    const overrides = {
      server: { admin_token: TOKEN },
      affinity: {
        store: { kind: "redis", url: redis.server.url, timeout_ms: 2000, key_prefix: "admin-it:" },
      },
    };
    const engines = [
      { id: "small-0", tier: "small" },
      { id: "small-1", tier: "small" },
    ];
    const serving = await startCluster(engines, overrides);
    clusters.push(serving);
    const listing = await startCluster(engines, overrides);
    clusters.push(listing);

    const sessions = [...ids(11, "agent"), "claude#1234"];
    for (const session of sessions) expect((await chat(serving.url, { session })).status).toBe(200);
    await serving.gateway.runtime.bindings.flush();
    await serving.gateway.runtime.receipts.memory.flush();

    const listed: Listed[] = [];
    let after: string | null = null;
    let pages = 0;
    do {
      const query: string = after === null ? "" : `&after=${encodeURIComponent(after)}`;
      const page = await admin(listing.url, `/admin/sessions?limit=5${query}`);
      expect(page.status).toBe(200);
      const body = page.body as { sessions: Listed[]; next_after: string | null; total: number | null };
      expect(body.sessions.length).toBeLessThanOrEqual(5);
      expect(body.total).toBeNull();
      listed.push(...body.sessions);
      after = body.next_after;
      pages++;
    } while (after !== null && pages < 100);
    expect(after).toBeNull();
    expect(pages).toBeGreaterThanOrEqual(3);
    expect(listed.map((s) => s.session_id).sort()).toEqual([...sessions].sort());
    for (const session of listed) {
      expect(["small-0", "small-1"]).toContain(session.backend_id);
      expect(session).toMatchObject({ tier: "small", receipts: 1 });
      expect(session.last_turn_at_ms).toBeGreaterThan(0);
    }

    // A session id is not a cursor with Redis, nor is anything else the gateway did not hand out.
    for (const bad of ["agent-3", "bm90LWpzb24", encodeURIComponent(btoa('{"c":"x","p":[]}'))]) {
      const refused = await admin(listing.url, `/admin/sessions?after=${bad}`);
      expect(refused.status).toBe(400);
      expect(refused.body).toMatchObject({ error: { code: "invalid_request", param: "after" } });
    }
    expect((await admin(listing.url, "/admin/sessions?limit=1001")).status).toBe(400);
  });
});
