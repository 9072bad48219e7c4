// The admin API: bearer token, backend listing, session binding, drain and undrain.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chat, metaOf, startCluster, type Cluster } from "../helpers/cluster.js";

const TOKEN = "test-admin-token-0123456789";

describe("admin API", () => {
  let cluster: Cluster;
  const admin = (path: string, method = "GET", token: string | null = TOKEN) =>
    fetch(`${cluster.url}/admin${path}`, {
      method,
      headers: token === null ? {} : { authorization: `Bearer ${token}` },
    });

  beforeAll(async () => {
    cluster = await startCluster(
      [
        { id: "small-0", tier: "small" },
        { id: "small-1", tier: "small" },
      ],
      { server: { admin_token: TOKEN } },
    );
  });
  afterAll(() => cluster.close());

  it("refuses calls without the token (401) or with a wrong one (403)", async () => {
    expect((await admin("/backends", "GET", null)).status).toBe(401);
    expect((await admin("/backends", "GET", "wrong-token-wrong-token")).status).toBe(403);
  });

  it("lists backends with state, in-flight and binding counts", async () => {
    await chat(cluster.url, { session: "admin-list" });
    const body = (await (await admin("/backends")).json()) as { backends: Record<string, unknown>[] };
    expect(body.backends.map((b) => b["id"])).toEqual(["small-0", "small-1"]);
    expect(body.backends.every((b) => b["state"] === "up" && b["inflight"] === 0)).toBe(true);
    expect(body.backends.reduce((sum, b) => sum + (b["bindings"] as number), 0)).toBeGreaterThanOrEqual(1);
  });

  it("shows one session's binding and ranking, 404 for an unknown session", async () => {
    const { json } = await chat(cluster.url, { session: "admin-show" });
    const response = await admin("/sessions/admin-show");
    expect(response.status).toBe(200);
    const body = (await response.json()) as { backend_id: string; ranking: string[]; tier: string };
    expect(body.backend_id).toBe(metaOf(json).backend_id);
    expect(body.ranking[0]).toBe(body.backend_id);
    expect(body.tier).toBe("small");
    expect((await admin("/sessions/never-seen")).status).toBe(404);
  });

  it("drain keeps pinned sessions and sends new sessions elsewhere; undrain restores", async () => {
    const pinned = metaOf((await chat(cluster.url, { session: "drain-pinned" })).json).backend_id;
    expect((await admin(`/backends/${pinned}/drain`, "POST")).status).toBe(200);
    expect(metaOf((await chat(cluster.url, { session: "drain-pinned" })).json)).toMatchObject({
      backend_id: pinned,
      affinity_hit: true,
    });
    for (let i = 0; i < 12; i++) {
      expect(metaOf((await chat(cluster.url, { session: `drain-new-${i}` })).json).backend_id).not.toBe(
        pinned,
      );
    }
    const state = (await (await admin(`/backends/${pinned}`)).json()) as { state: string };
    expect(state.state).toBe("draining");
    expect((await admin(`/backends/${pinned}/undrain`, "POST")).status).toBe(200);
    const after = (await (await admin(`/backends/${pinned}`)).json()) as { state: string };
    expect(after.state).toBe("up");
  });

  it("answers 404 for unknown backends and 405 for a wrong method", async () => {
    expect((await admin("/backends/nope/drain", "POST")).status).toBe(404);
    expect((await admin("/backends/small-0/drain", "GET")).status).toBe(405);
  });
});
