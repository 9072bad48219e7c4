// Receipts across three gateway replicas: with the Redis store every replica reads the turn another one served,
// so a session's receipts are the same whichever replica serves each turn (in-process memory cannot be).
import { describe, expect, it } from "vitest";
import { useRedisServer } from "../helpers/redis-server.js";
import { startReplicas, type ReplicaFleet } from "../helpers/replicas.js";
import { SYSTEM, extend, reusableOf, tokensOf, turn, type Message, type Receipted } from "./helpers.js";

const redis = useRedisServer(async () => {
  await fleet?.close();
});
let fleet: ReplicaFleet | undefined;

/** Six turns of one session, turn i on replica i % 3; each turn's receipt and the one before it. */
async function sixTurns(f: ReplicaFleet, session: string): Promise<Receipted[]> {
  let messages: Message[] = [SYSTEM, { role: "user", content: "Plan the refactoring." }];
  const turns: Receipted[] = [];
  for (let i = 0; i < 6; i++) {
    const answered = await turn(f.url(i % 3), session, messages, { model: "sim-small" });
    turns.push(answered);
    messages = extend(messages, answered, `Step ${i + 1} done; next.`);
  }
  return turns;
}

describe("receipts across replicas", () => {
  it.skipIf(redis.skip)(
    "with Redis: every turn after the first reuses the previous one, whichever replica serves it",
    async () => {
      fleet = await startReplicas(["e-0", "e-1", "e-2"], 3, {
        affinity: {
          store: { kind: "redis", url: redis.server.url, timeout_ms: 500, key_prefix: "receipts-it:" },
        },
      });
      const turns = await sixTurns(fleet, "across");
      expect(turns[0]!.receipt.lost_cause).toBe("new_session");
      for (let i = 1; i < turns.length; i++) {
        expect(turns[i]!.backend).toBe(turns[0]!.backend);
        expect(turns[i]!.receipt).toMatchObject({
          reusable_tokens: reusableOf(tokensOf(turns[i - 1]!)),
          lost_tokens: 0,
          lost_cause: "none",
        });
      }
      // Any replica reads the session's receipts (what its admin API shows), oldest first here (the last 4).
      const admin = await fleet.replicas[2]!.runtime.receipts.recent("across");
      expect(admin?.receipts.map((r) => r.lostCause)).toEqual(["none", "none", "none", "none"]);
      await fleet.close();
      fleet = undefined;
    },
  );

  it("with in-process memory (the control): a replica that never saw the session receipts it as new", async () => {
    fleet = await startReplicas(["e-0", "e-1", "e-2"], 3, {});
    const turns = await sixTurns(fleet, "apart");
    expect(turns.slice(0, 3).map((t) => t.receipt.lost_cause)).toEqual([
      "new_session",
      "new_session",
      "new_session",
    ]);
    expect(turns.slice(3).map((t) => t.receipt.lost_cause)).toEqual(["none", "none", "none"]);
    await fleet.close();
    fleet = undefined;
  });
});
