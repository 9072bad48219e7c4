// GET /admin/sessions: the sessions a replica remembers, a page at a time; and a session id holding '#' looked up
// percent-encoded (%23), as docs/operations.md says.
import { afterEach, describe, expect, it } from "vitest";
import { sessionPage } from "../../src/receipts/session-list.js";
import type { SessionReceipts } from "../../src/receipts/receipt-memory.js";
import { SMALL_MODEL, startCluster, type Cluster } from "../helpers/cluster.js";

const TOKEN = "admin-sessions-token-0123456789";

let cluster: Cluster | undefined;
afterEach(async () => {
  await cluster?.close();
  cluster = undefined;
});

async function admin(path: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${cluster!.url}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function chat(sessionId: string): Promise<void> {
  const res = await fetch(`${cluster!.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-session-id": sessionId },
    body: JSON.stringify({ model: SMALL_MODEL, max_tokens: 2, messages: [{ role: "user", content: "hi" }] }),
  });
  expect(res.status).toBe(200);
  await res.text();
}

function entry(backendId: string, atMs: number): SessionReceipts {
  return {
    last: { items: 1, chain: "c", promptTokens: 1, tokens: 2, backendId, tier: "small", atMs },
    receipts: [],
  };
}

describe("GET /admin/sessions", () => {
  it("pages by session id, leaving out sessionless prefix keys", () => {
    const entries: [string, SessionReceipts][] = [
      ["c", entry("e1", 3)],
      ["prefix:00ff", entry("e0", 9)],
      ["a", entry("e0", 1)],
      ["b", entry("e1", 2)],
    ];
    const first = sessionPage(entries, undefined, 2);
    expect(first.sessions.map((s) => s.session_id)).toEqual(["a", "b"]);
    expect(first).toMatchObject({ next_after: "b", total: 3 });
    const second = sessionPage(entries, first.next_after!, 2);
    expect(second.sessions).toEqual([
      { session_id: "c", backend_id: "e1", tier: "small", last_turn_at_ms: 3, receipts: 0 },
    ]);
    expect(second.next_after).toBeNull();
    expect(sessionPage(entries, "zzz", 2).sessions).toEqual([]);
  });

  it("lists the sessions this replica served; an id with '#' is found at %23", async () => {
    cluster = await startCluster([{ id: "small-0", tier: "small" }], { server: { admin_token: TOKEN } });
    const ids = ["session-a", "session-b", "claude#1234", "session-c"];
    for (const id of ids) await chat(id);
    const first = await admin("/admin/sessions?limit=3");
    expect(first.status).toBe(200);
    const page = first.body as { sessions: { session_id: string; backend_id: string }[]; next_after: string };
    expect(page.sessions.map((s) => s.session_id)).toEqual(["claude#1234", "session-a", "session-b"]);
    expect(page.sessions[0]!.backend_id).toBe("small-0");
    const rest = await admin(`/admin/sessions?limit=3&after=${encodeURIComponent(page.next_after)}`);
    expect((rest.body["sessions"] as { session_id: string }[]).map((s) => s.session_id)).toEqual([
      "session-c",
    ]);
    expect(rest.body["next_after"]).toBeNull();

    // '#' starts a URL's fragment: unencoded, the id is cut at it; encoded, the session is found.
    expect((await admin(`/admin/sessions/${encodeURIComponent("claude#1234")}`)).body).toMatchObject({
      session_id: "claude#1234",
      backend_id: "small-0",
    });
    expect((await admin("/admin/sessions?limit=0")).status).toBe(400);
  });
});
