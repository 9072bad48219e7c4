// Each placement stage on its own: the shared contracts, then what the stage itself promises.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { hashString } from "../../../src/affinity/hash.js";
import { boundedLoadFilter } from "../../../src/affinity/placement/filter-bounded-load.js";
import { eligibleFilter } from "../../../src/affinity/placement/filter-eligible.js";
import { freeSlotFilter } from "../../../src/affinity/placement/filter-free-slot.js";
import { kvBoundedLoadFilter } from "../../../src/affinity/placement/filter-kv-bounded-load.js";
import { hasFreeSlot, loadBound, loadOf } from "../../../src/affinity/placement/load.js";
import { maxScorePicker } from "../../../src/affinity/placement/pick-max-score.js";
import { clampScore, runPipeline } from "../../../src/affinity/placement/pipeline.js";
import { kvCacheScorer, UNKNOWN_KV_SCORE } from "../../../src/affinity/placement/score-kv-cache.js";
import { queueScorer } from "../../../src/affinity/placement/score-queue.js";
import { rendezvousScorer } from "../../../src/affinity/placement/score-rendezvous.js";
import { freeSlotScorer } from "../../../src/affinity/placement/score-free-slot.js";
import {
  isNewConversation,
  KV_PREFILL_WEIGHT,
  kvCostScorer,
  kvCostTokens,
  kvPlaceCostTokens,
} from "../../../src/affinity/placement/score-kv-cost.js";
import { prefillWorkTokens } from "../../../src/kv-events/pending-blocks.js";
import { leastLoadScorer } from "../../../src/affinity/placement/score-least-load.js";
import { kvCostPipeline, sessionPlacementPipeline } from "../../../src/affinity/placement/pipelines.js";
import type { PlacementRequest, Pipeline, Scorer } from "../../../src/affinity/placement/types.js";
import { rendezvousRanking } from "../../../src/affinity/rendezvous.js";
import { candidate, candidates } from "../helpers.js";
import { candidatesArb, exactLoadBound, keyArb, loadFactorArb, stateOf } from "./arbitraries.js";
import { filterContract } from "./filter.case.js";
import { scorerContract } from "./scorer.case.js";

const KEY = hashString("session-key");
const request = (exclude: string[] = []): PlacementRequest => ({
  tier: "t",
  sessionId: "s",
  prefixKey: undefined,
  exclude: new Set(exclude),
});

filterContract("eligibleFilter", eligibleFilter);
filterContract("boundedLoadFilter", boundedLoadFilter);
filterContract("freeSlotFilter", freeSlotFilter);
filterContract("kvBoundedLoadFilter", kvBoundedLoadFilter);
scorerContract("rendezvousScorer", rendezvousScorer);
scorerContract("queueScorer", queueScorer);
scorerContract("kvCacheScorer", kvCacheScorer);
scorerContract("freeSlotScorer", freeSlotScorer);
scorerContract("kvCostScorer", kvCostScorer);
scorerContract("leastLoadScorer", leastLoadScorer);

describe("kvCostScorer, leastLoadScorer and kvCostPipeline (placement by KV events)", () => {
  const kvRequest = (held: Record<string, number>, active: Record<string, number>): PlacementRequest => ({
    ...request(),
    cachedTokens: new Map(Object.entries(held)),
    activeWork: new Map(Object.entries(active)),
  });

  it("scores the cheapest engine (work ahead - 2 x tokens held) 1 and the dearest 0; all 1 when equal", () => {
    const list = [candidate("a"), candidate("b"), candidate("c")];
    // Costs: a 1000 - 10,000 = -9000, b 0 - 3000 = -3000, c (no events) 0.
    const scores = kvCostScorer(kvRequest({ a: 5_000, b: 1_500 }, { a: 1_000 }), stateOf(KEY, list), list);
    expect(scores).toEqual([1, 1 / 3, 0]);
    expect(kvCostScorer(kvRequest({}, {}), stateOf(KEY, list), list)).toEqual([1, 1, 1]);
  });

  it("scores the fewest requests in flight and queued 1 and the most 0", () => {
    const list = [candidate("a", { inflight: 4 }), candidate("b", { queued: 2 }), candidate("c")];
    expect(leastLoadScorer(request(), stateOf(KEY, list), list)).toEqual([0, 0.5, 1]);
  });

  it("picks the cheapest engine; the tie-breaks never outweigh a block of cost", () => {
    fc.assert(
      fc.property(
        candidatesArb(),
        keyArb,
        fc.array(fc.integer({ min: 0, max: 1_000_000 }), { minLength: 16, maxLength: 16 }),
        (list, key, numbers) => {
          const held: Record<string, number> = {};
          const active: Record<string, number> = {};
          // Costs in whole blocks, so any two that differ differ by a block at least.
          list.forEach((c, i) => {
            held[c.id] = (numbers[i % 16]! >> 4) << 4;
            active[c.id] = (numbers[(i + 7) % 16]! >> 4) << 4;
          });
          const kvReq = kvRequest(held, active);
          const chosen = runPipeline(kvCostPipeline, kvReq, stateOf(key, list), list);
          const eligible = list.filter((c) => c.state === "up");
          if (eligible.length === 0) {
            expect(chosen).toBeUndefined();
            return;
          }
          const cost = (id: string) => active[id]! - KV_PREFILL_WEIGHT * held[id]!;
          const min = Math.min(...eligible.map((c) => cost(c.id)));
          expect(cost(chosen!.id)).toBe(min);
          // Among the cheapest, the least loaded.
          const cheapest = eligible.filter((c) => cost(c.id) === min);
          expect(loadOf(chosen!)).toBe(Math.min(...cheapest.map(loadOf)));
        },
      ),
    );
  });

  it("takes a prompt that opens a conversation as new however much of it an engine holds, and charges its evictions", () => {
    const list = [candidate("a"), candidate("b")];
    // A sub-agent's first call (6,150 tokens) whose shared 6,000-token opening engine a holds; a has room for 50.
    const opening = (opens: boolean | undefined): PlacementRequest => ({
      ...kvRequest({ a: 6_000 }, {}),
      promptTokens: 6_150,
      roomTokens: new Map([["a", 50]]),
      opensConversation: opens,
    });
    expect(isNewConversation(opening(true))).toBe(true);
    // Cost: 2 x the 150 tokens to compute (no context weight here), plus the 100 that do not fit.
    expect(kvPlaceCostTokens(opening(true), list[0]!)).toBe(KV_PREFILL_WEIGHT * 150 + 100);
    // Not known to open one: holding half the prompt, engine a holds the conversation, and what it evicts is not counted.
    for (const opens of [false, undefined]) {
      expect(isNewConversation(opening(opens))).toBe(false);
      expect(kvPlaceCostTokens(opening(opens), list[0]!)).toBe(KV_PREFILL_WEIGHT * 150);
    }
  });
});

describe("kvCostTokens with a prefill context weight (attention counted)", () => {
  const weight = 2.7e-5;
  it("counts a token computed after a long context as more work, in the prompt's own prefill and in the work ahead", () => {
    // The work of 8,000 tokens after 150,000 held: 8,000 x (1 + weight x 154,000), about 41,300 tokens at no context.
    expect(prefillWorkTokens(8_000, 150_000, weight)).toBeCloseTo(8_000 * (1 + weight * 154_000), 6);
    expect(prefillWorkTokens(8_000, 150_000, 0)).toBe(8_000);
    const list = [candidate("a"), candidate("b")];
    // A sub-agent's 20,000-token call that both engines hold 12,000 of. Queued ahead: on a, a session's turn (8,000
    // tokens after 150,000: ~41,300 at no context); on b, two sub-agents' turns (16,000 tokens after 20,000: ~24,000).
    const call: PlacementRequest = {
      ...request(),
      cachedTokens: new Map([
        ["a", 12_000],
        ["b", 12_000],
      ]),
      activeWork: new Map([
        ["a", prefillWorkTokens(8_000, 150_000, weight)],
        ["b", 2 * prefillWorkTokens(8_000, 20_000, weight)],
      ]),
      promptTokens: 20_000,
      prefillContextWeight: weight,
    };
    expect(kvCostTokens(call, list[0]!)).toBeGreaterThan(kvCostTokens(call, list[1]!));
    expect(runPipeline(kvCostPipeline, call, stateOf(KEY, list), list)?.id).toBe("b");
    // Counted in tokens alone (weight 0), a's 8,000 look like less than b's 16,000.
    const byTokens: PlacementRequest = {
      ...call,
      activeWork: new Map([
        ["a", 8_000],
        ["b", 16_000],
      ]),
      prefillContextWeight: 0,
    };
    expect(runPipeline(kvCostPipeline, byTokens, stateOf(KEY, list), list)?.id).toBe("a");
  });
});

describe("kvBoundedLoadFilter (new placements by KV events)", () => {
  const held = (
    tokens: Record<string, number>,
    promptTokens: number | undefined,
    opensConversation?: boolean,
  ): PlacementRequest => ({
    ...request(),
    cachedTokens: new Map(Object.entries(tokens)),
    promptTokens,
    opensConversation,
  });

  it("keeps the backends within the load bound, and those holding at least half of a continued conversation", () => {
    fc.assert(
      fc.property(
        candidatesArb(),
        keyArb,
        loadFactorArb,
        fc.array(fc.integer({ min: 0, max: 200_000 }), { minLength: 16, maxLength: 16 }),
        fc.integer({ min: 1, max: 200_000 }),
        fc.boolean(),
        (list, key, c, numbers, prompt, opens) => {
          const state = stateOf(key, list, c);
          const tokens: Record<string, number> = {};
          list.forEach((cand, i) => (tokens[cand.id] = numbers[i % 16]!));
          const kept = kvBoundedLoadFilter(held(tokens, prompt, opens), state, list);
          const within = boundedLoadFilter(request(), state, list);
          for (const cand of list)
            expect(kept.includes(cand)).toBe(
              within.includes(cand) || (!opens && 2 * tokens[cand.id]! >= prompt),
            );
        },
      ),
    );
  });

  it("keeps a loaded engine holding a conversation, drops one holding only a shared prefix", () => {
    const list = [candidate("a", { inflight: 6 }), candidate("b"), candidate("c")];
    const state = stateOf(KEY, list, 1.25);
    const ids = (r: PlacementRequest) => kvBoundedLoadFilter(r, state, list).map((x) => x.id);
    expect(ids(held({ a: 90_000 }, 100_000))).toEqual(["a", "b", "c"]);
    expect(ids(held({ a: 20_000 }, 100_000))).toEqual(["b", "c"]);
    // Matched by session only (no prompt length): what an engine holds is the session's own conversation.
    expect(ids(held({ a: 16 }, undefined))).toEqual(["a", "b", "c"]);
  });

  it("counts the other replicas' requests where the fleet shares its sends: the bound is the fleet's", () => {
    const list = [
      candidate("a", { inflight: 1 }),
      candidate("b", { inflight: 1 }),
      candidate("c"),
      candidate("d"),
    ];
    const state = stateOf(KEY, list, 1.25);
    const fresh: PlacementRequest = { ...request(), cachedTokens: new Map(), promptTokens: 1_000 };
    const ids = (r: PlacementRequest) => kvBoundedLoadFilter(r, state, list).map((x) => x.id);
    // Alone: load 2 of 4 engines, bound ceil(1.25 x 3 / 4) = 1, a and b at 1 are full.
    expect(ids(fresh)).toEqual(["c", "d"]);
    // The other replicas run 5 more on a and 1 on c: bound ceil(1.25 x 9 / 4) = 3; a (6) is past it, b (1) is not.
    const fleet = {
      ...fresh,
      otherReplicasLoad: new Map([
        ["a", 5],
        ["c", 1],
      ]),
    };
    expect(ids(fleet)).toEqual(["b", "c", "d"]);
    // Nothing from the others: the replica's own bound.
    expect(ids({ ...fresh, otherReplicasLoad: new Map([["a", 0]]) })).toEqual(["c", "d"]);
  });

  it("keeps a new conversation within the bound even where its whole opening is held (a burst's sub-agents)", () => {
    const list = [candidate("a", { inflight: 6 }), candidate("b"), candidate("c")];
    const state = stateOf(KEY, list, 1.25);
    const ids = (r: PlacementRequest) => kvBoundedLoadFilter(r, state, list).map((x) => x.id);
    // A sub-agent's first call: a 6,000-token instruction its siblings share, a short task of its own.
    expect(ids(held({ a: 6_000 }, 6_150, true))).toEqual(["b", "c"]);
    expect(ids(held({ a: 6_000 }, 6_150, false))).toEqual(["a", "b", "c"]);
  });
});

describe("freeSlotScorer and sessionPlacementPipeline", () => {
  it("scores 1 exactly for the backends that can start a request now", () => {
    fc.assert(
      fc.property(candidatesArb(), keyArb, (list, key) => {
        const scores = freeSlotScorer(request(), stateOf(key, list), list);
        list.forEach((c, i) => expect(scores[i]).toBe(hasFreeSlot(c) ? 1 : 0));
      }),
    );
  });

  it("picks the first of the ranking within the bound with a free slot, else the first within the bound", () => {
    fc.assert(
      fc.property(candidatesArb({ weighted: true }), keyArb, loadFactorArb, (list, key, c) => {
        const state = stateOf(key, list, c);
        const within = rendezvousRanking(key, list).filter(
          (x) => x.state === "up" && loadOf(x) + 1 <= exactLoadBound(x, list, c),
        );
        const expected = within.find(hasFreeSlot) ?? within[0];
        expect(runPipeline(sessionPlacementPipeline, request(), state, list)?.id).toBe(expected?.id);
      }),
    );
  });
});

describe("eligibleFilter", () => {
  it("keeps exactly the up backends this request has not failed on", () => {
    fc.assert(
      fc.property(candidatesArb(), fc.nat(), (list, at) => {
        const excluded = list[at % list.length]!.id;
        const kept = eligibleFilter(request([excluded]), stateOf(KEY, list), list);
        expect(kept).toEqual(list.filter((c) => c.state === "up" && c.id !== excluded));
      }),
    );
  });
});

describe("boundedLoadFilter", () => {
  it("keeps exactly the backends with load + 1 <= ceil(c * w / W * (L + 1))", () => {
    // One hot backend with 8, three idle: L = 8, bound = ceil(1.25 * 9 / 4) = 3.
    const list = [candidate("hot", { inflight: 6, queued: 2 }), ...candidates(3)];
    const state = stateOf(KEY, list, 1.25);
    expect(list.map((c) => loadBound(c, state))).toEqual([3, 3, 3, 3]);
    expect(boundedLoadFilter(request(), state, list).map((c) => c.id)).toEqual([
      "engine-0",
      "engine-1",
      "engine-2",
    ]);
    // At load 2 of 3 a backend still takes one more: 2 + 1 <= 3.
    list[1]!.inflight = 2;
    expect(boundedLoadFilter(request(), stateOf(KEY, list, 1.25), list).map((c) => c.id)).toContain(
      "engine-0",
    );
  });

  it("scales the bound with weight: weight 3 of 4 carries three times the share", () => {
    const list = [
      candidate("big", { weight: 3, inflight: 8 }),
      candidate("small", { weight: 1, inflight: 2 }),
    ];
    // L = 10, W = 4: big's bound ceil(1 * 3 * 11 / 4) = 9, small's ceil(1 * 1 * 11 / 4) = 3.
    const state = stateOf(KEY, list, 1);
    expect(list.map((c) => loadBound(c, state))).toEqual([9, 3]);
    expect(boundedLoadFilter(request(), state, list).map((c) => c.id)).toEqual(["big", "small"]);
    list[0]!.inflight = 9;
    expect(boundedLoadFilter(request(), stateOf(KEY, list, 1), list).map((c) => c.id)).toEqual(["small"]);
  });

  it("is not loosened by binary rounding of c: five backends, L = 49, c = 1.1 give ceil(1.1 x 10) = 11", () => {
    const list = ["a", "b", "c", "d", "e"].map((id, i) =>
      candidate(id, { inflight: i === 0 ? 11 : 9 + (i % 2) }),
    );
    // 11 + 9 + 10 + 9 + 10 = 49; 1.1 x 50 / 5 is 11.000000000000002 in floating point.
    const state = stateOf(KEY, list, 1.1);
    expect(state.tierLoad).toBe(49);
    expect(loadBound(list[0]!, state)).toBe(11);
    expect(boundedLoadFilter(request(), state, list).map((c) => c.id)).not.toContain("a");
  });

  it("agrees with the bound computed in integers, for every load factor and weight the generators make", () => {
    fc.assert(
      fc.property(candidatesArb({ weighted: true }), keyArb, loadFactorArb, (list, key, c) => {
        const state = stateOf(key, list, c);
        for (const x of list) expect(loadBound(x, state)).toBe(exactLoadBound(x, list, c));
      }),
      { numRuns: 500 },
    );
  });

  it("always keeps some up backend when c >= 1 (so a walk of the ranking always ends)", () => {
    fc.assert(
      fc.property(candidatesArb({ weighted: true, allUp: true }), keyArb, loadFactorArb, (list, key, c) => {
        expect(boundedLoadFilter(request(), stateOf(key, list, c), list).length).toBeGreaterThan(0);
      }),
    );
  });

  it("keeps everything at load factor 0 (off)", () => {
    fc.assert(
      fc.property(candidatesArb(), keyArb, (list, key) => {
        expect(boundedLoadFilter(request(), stateOf(key, list, 0), list)).toEqual(list);
      }),
    );
  });
});

describe("freeSlotFilter", () => {
  it("keeps the backends that can start a request now: a free slot (waiters there are held by their own cap)", () => {
    const list = [
      candidate("free", { inflight: 3, maxInflight: 4 }),
      candidate("full", { inflight: 4, maxInflight: 4 }),
      // One request waits although a slot is free: only its agent's cap holds it (the dispatcher's invariant).
      candidate("capped", { inflight: 1, maxInflight: 4, queued: 1 }),
      candidate("full-queue", { inflight: 4, maxInflight: 4, queued: 2 }),
    ];
    expect(freeSlotFilter(request(), stateOf(KEY, list), list).map((c) => c.id)).toEqual(["free", "capped"]);
    expect(list.map(hasFreeSlot)).toEqual([true, false, true, false]);
    expect(list.map(loadOf)).toEqual([3, 4, 2, 6]);
  });
});

describe("rendezvousScorer", () => {
  it("orders backends exactly as the rendezvous ranking does, weighted or not", () => {
    fc.assert(
      fc.property(candidatesArb({ weighted: true }), keyArb, (list, key) => {
        const scores = rendezvousScorer(request(), stateOf(key, list), list);
        const byScore = list
          .map((c, i) => ({ c, s: scores[i]! }))
          .sort((a, b) => b.s - a.s || (a.c.id < b.c.id ? -1 : 1))
          .map((e) => e.c.id);
        expect(byScore).toEqual(rendezvousRanking(key, list).map((c) => c.id));
      }),
    );
  });

  it("keeps weighted HRW proportional: weights 1:2:3 win about 1/6, 2/6, 3/6 of 30,000 keys", () => {
    const list = [
      candidate("w1", { weight: 1 }),
      candidate("w2", { weight: 2 }),
      candidate("w3", { weight: 3 }),
    ];
    const pipeline: Pipeline = {
      filters: [],
      scorers: [{ scorer: rendezvousScorer, weight: 1 }],
      picker: maxScorePicker,
    };
    const wins = new Map<string, number>();
    for (let i = 0; i < 30_000; i++) {
      const key = hashString(`key-${i}`);
      const winner = runPipeline(pipeline, request(), stateOf(key, list), list)!.id;
      wins.set(winner, (wins.get(winner) ?? 0) + 1);
    }
    expect(Math.abs(wins.get("w1")! / 30_000 - 1 / 6)).toBeLessThan(0.01);
    expect(Math.abs(wins.get("w2")! / 30_000 - 2 / 6)).toBeLessThan(0.01);
    expect(Math.abs(wins.get("w3")! / 30_000 - 3 / 6)).toBeLessThan(0.01);
  });
});

describe("queueScorer and kvCacheScorer (the engine's own signals)", () => {
  const reading = (waitingRequests: number, kvCacheUsage: number, readAtMs = 9_000) => ({
    runningRequests: 4,
    waitingRequests,
    kvCacheUsage,
    readAtMs,
  });

  it("scores the shortest queue (gateway queue + engine waiting) 1 and the longest 0", () => {
    const list = [
      candidate("a", { queued: 2, engineLoad: reading(2, 0.5) }), // 4
      candidate("b", { queued: 0, engineLoad: reading(0, 0.5) }), // 0
      candidate("c", { queued: 1, engineLoad: reading(1, 0.5) }), // 2
    ];
    expect(queueScorer(request(), stateOf(KEY, list), list)).toEqual([0, 1, 0.5]);
    expect(queueScorer(request(), stateOf(KEY, list), [list[0]!])).toEqual([1]); // all equal
  });

  it("scores 1 - KV-cache usage; a missing or stale reading scores neutral", () => {
    const list = [
      candidate("a", { engineLoad: reading(0, 0.25) }),
      candidate("b", { engineLoad: undefined }),
      candidate("c", { engineLoad: reading(0, 0.9, 1_000) }), // read 9 s before now: stale (max age 5 s)
    ];
    expect(kvCacheScorer(request(), stateOf(KEY, list, 1.25, 10_000), list)).toEqual([
      0.75,
      UNKNOWN_KV_SCORE,
      UNKNOWN_KV_SCORE,
    ]);
    // The stale engine's waiting queue is ignored too.
    const queues = [candidate("x", { engineLoad: reading(50, 0, 1_000) }), candidate("y")];
    expect(queueScorer(request(), stateOf(KEY, queues, 1.25, 10_000), queues)).toEqual([1, 1]);
  });
});

describe("maxScorePicker and runPipeline", () => {
  it("picks the highest score; ties go to the smaller id; nothing from nothing", () => {
    const list = [candidate("b"), candidate("a"), candidate("c")];
    const state = stateOf(KEY, list);
    expect(maxScorePicker(request(), state, list, [0.2, 0.9, 0.1])!.id).toBe("a");
    expect(maxScorePicker(request(), state, list, [0.5, 0.5, 0.1])!.id).toBe("a");
    expect(maxScorePicker(request(), state, list, [0.5, 0.1, 0.5])!.id).toBe("b");
    expect(maxScorePicker(request(), state, [], [])).toBeUndefined();
  });

  it("clamps every score to [0, 1], so a scorer cannot outweigh its weight", () => {
    expect([-1, 0, 0.5, 1, 7, NaN, Infinity, -Infinity].map(clampScore)).toEqual([0, 0, 0.5, 1, 1, 0, 1, 0]);
    const wild: Scorer = (_r, _s, list) => list.map((c) => (c.id === "a" ? 1e9 : 0.9));
    const fair: Scorer = (_r, _s, list) => list.map((c) => (c.id === "a" ? 0 : 1));
    const list = [candidate("a"), candidate("b")];
    const pipeline: Pipeline = {
      filters: [],
      scorers: [
        { scorer: wild, weight: 1 },
        { scorer: fair, weight: 1 },
      ],
      picker: maxScorePicker,
    };
    // Unclamped, a's 1e9 would win; clamped, b has 0.9 + 1 against a's 1 + 0.
    expect(runPipeline(pipeline, request(), stateOf(KEY, list), list)!.id).toBe("b");
  });

  it("runs the filters in order and stops when one leaves nothing", () => {
    const seen: string[] = [];
    const pipeline: Pipeline = {
      filters: [
        (_r, _s, list) => (seen.push("first"), list.filter(() => false)),
        (_r, _s, list) => (seen.push("second"), list),
      ],
      scorers: [{ scorer: rendezvousScorer, weight: 1 }],
      picker: maxScorePicker,
    };
    const list = candidates(3);
    expect(runPipeline(pipeline, request(), stateOf(KEY, list), list)).toBeUndefined();
    expect(seen).toEqual(["first"]);
  });

  it("expresses a weighted scorer mix with a max-score pick (llm-d's shape: queue 2 : KV 2 here)", () => {
    const reading = (waitingRequests: number, kvCacheUsage: number) => ({
      runningRequests: 0,
      waitingRequests,
      kvCacheUsage,
      readAtMs: 10_000,
    });
    const list = [
      candidate("busy-queue", { engineLoad: reading(9, 0.1) }),
      candidate("full-cache", { engineLoad: reading(0, 0.95) }),
      candidate("balanced", { engineLoad: reading(2, 0.3) }),
    ];
    const mix: Pipeline = {
      filters: [eligibleFilter],
      scorers: [
        { scorer: queueScorer, weight: 2 },
        { scorer: kvCacheScorer, weight: 2 },
      ],
      picker: maxScorePicker,
    };
    // busy-queue: 2*0 + 2*0.9 = 1.8; full-cache: 2*1 + 2*0.05 = 2.1; balanced: 2*(7/9) + 2*0.7 = 2.96.
    expect(runPipeline(mix, request(), stateOf(KEY, list), list)!.id).toBe("balanced");
  });
});
