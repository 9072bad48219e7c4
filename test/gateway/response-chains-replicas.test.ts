// Responses API chains across three replicas on a real redis-server: every turn continues previous_response_id
// through the next replica, without a session header, and is answered by the engine that stores the chain.
import { afterEach, describe, expect, it } from "vitest";
import { useRedisServer } from "../helpers/redis-server.js";
import { MODEL, startReplicas, type ReplicaFleet } from "../helpers/replicas.js";
import type { SearchingOwnerStore } from "../../src/gateway/owner-search.js";

const redis = useRedisServer();
let fleet: ReplicaFleet | undefined;
let prefixCounter = 0;

afterEach(async () => {
  await fleet?.close();
  fleet = undefined;
});

const ENGINES = ["e-0", "e-1", "e-2", "e-3"];
const CHAINS = 12;
const TURNS = 6;

interface Turn {
  status: number;
  backend: string | null;
  responseId: string | undefined;
  text: string;
}

/** One Responses turn on `url`; a stream is read to its end and its response.completed gives the id. */
async function respond(
  url: string,
  previous: string | undefined,
  stream: boolean,
  turn: number,
): Promise<Turn> {
  const response = await fetch(`${url}/v1/responses`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: MODEL,
      input: `turn ${turn}: go on`,
      max_output_tokens: 4,
      stream,
      ...(previous === undefined ? {} : { previous_response_id: previous }),
    }),
  });
  const text = await response.text();
  let responseId: string | undefined;
  if (response.status === 200 && !stream) responseId = (JSON.parse(text) as { id: string }).id;
  if (response.status === 200 && stream) {
    for (const line of text.split("\n")) {
      if (!line.startsWith("data:") || !line.includes("response.completed")) continue;
      responseId = (JSON.parse(line.slice(5)) as { response: { id: string } }).response.id;
    }
  }
  return {
    status: response.status,
    backend: response.headers.get("x-agent-serve-backend"),
    responseId,
    text,
  };
}

/** How many owner-store misses, over the replicas, asked the engines (owner-search.ts). */
function searches(f: ReplicaFleet): number {
  return f.replicas.reduce(
    (sum, r) => sum + (r.runtime.responseOwners as SearchingOwnerStore).searches.asked,
    0,
  );
}

/** CHAINS chains of TURNS turns, each turn through the next replica; the turns answered and by whom. */
async function chains(f: ReplicaFleet): Promise<{ answered: number; turns: number; sameEngine: number }> {
  let answered = 0;
  let turns = 0;
  let sameEngine = 0;
  await Promise.all(
    Array.from({ length: CHAINS }, async (_, chain) => {
      let previous: string | undefined;
      let engine: string | null = null;
      for (let turn = 0; turn < TURNS; turn++) {
        const result = await respond(
          f.url((chain + turn) % f.size),
          previous,
          (chain + turn) % 2 === 0,
          turn,
        );
        turns++;
        if (result.status !== 200 || result.responseId === undefined) break; // the chain is lost here
        answered++;
        if (turn === 0) engine = result.backend;
        else if (result.backend === engine) sameEngine++;
        previous = result.responseId;
      }
    }),
  );
  return { answered, turns, sameEngine };
}

describe.skipIf(redis.skip)("Responses chains across replicas", () => {
  it("answers every turn of every chain through any replica (redis store), on the chain's engine", async () => {
    fleet = await startReplicas(ENGINES, 3, {
      affinity: {
        store: { kind: "redis", url: redis.server.url, timeout_ms: 500, key_prefix: `rc${prefixCounter++}:` },
      },
      health: { probe_interval_seconds: 3600 },
    });
    const { answered, turns, sameEngine } = await chains(fleet);
    expect(turns).toBe(CHAINS * TURNS);
    expect(answered).toBe(CHAINS * TURNS);
    expect(sameEngine).toBe(CHAINS * (TURNS - 1));
    // The shared store named the owner: the engines were asked for none of it (a store call slower than its
    // timeout on a loaded machine may fall back to asking them; rarely).
    expect(searches(fleet)).toBeLessThanOrEqual((CHAINS * (TURNS - 1)) / 10);
  });

  it("control: with the memory store each turn through another replica has to ask the engines", async () => {
    fleet = await startReplicas(ENGINES, 3, { health: { probe_interval_seconds: 3600 } });
    const { answered } = await chains(fleet);
    // Answered all the same, by asking every engine which one stores the response: no replica knew it.
    expect(answered).toBe(CHAINS * TURNS);
    expect(searches(fleet)).toBe(CHAINS * (TURNS - 1));
  });
});
