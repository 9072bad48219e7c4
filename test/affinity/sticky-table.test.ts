import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { BROKEN, EXPIRED, type BindingLookup } from "../../src/affinity/binding-store.js";
import type { Hash64 } from "../../src/affinity/hash.js";
import { hashSession } from "../../src/affinity/rendezvous.js";
import { StickyTable } from "../../src/affinity/sticky-table.js";
import { TEST_HASH_KEY } from "./helpers.js";

function newTable(maxBindings: number): StickyTable {
  return new StickyTable(maxBindings, TEST_HASH_KEY);
}

/** Binds as the scheduler does on a miss: with the session's rendezvous hash as its placement. */
function set(table: StickyTable, session: string, backend: string, expiresAtMs: number, nowMs: number): void {
  table.bind(session, hashSession(session), backend, expiresAtMs, nowMs);
}

describe("StickyTable basics", () => {
  it("rejects a cap that is not a positive integer", () => {
    for (const bad of [0, -1, 1.5, Number.NaN]) expect(() => newTable(bad)).toThrow(RangeError);
  });

  it("binds, looks up without refreshing, reports expiry exactly at expiresAtMs, and forgets on delete", () => {
    const table = newTable(10);
    expect(table.get("s", 0)).toBeUndefined();
    set(table, "s", "b1", 100, 0);
    expect(table.get("s", 99)).toBe("b1");
    expect(table.get("s", 100)).toBe(EXPIRED);
    expect(table.size).toBe(1); // remembered until reclaimed, so the next request can say "rebind_expired"
    set(table, "s", "b1", 300, 150); // refresh
    expect(table.get("s", 299)).toBe("b1");
    set(table, "s", "b2", 400, 160); // rebind
    expect(table.get("s", 200)).toBe("b2");
    expect(table.countFor("b1")).toBe(0);
    expect(table.countFor("b2")).toBe(1);
    table.delete("s");
    expect(table.get("s", 200)).toBeUndefined();
    expect(table.size).toBe(0);
    expect(table.countFor("b2")).toBe(0);
    table.delete("never-seen"); // a no-op
    expect(table.countFor("never-seen-backend")).toBe(0);
  });

  it("grows past its initial slots and keeps every binding", () => {
    const table = newTable(5_000);
    for (let i = 0; i < 5_000; i++) set(table, `s${i}`, `b${i % 7}`, 1_000 + i, 0);
    expect(table.size).toBe(5_000);
    expect(table.evictions).toBe(0);
    let wrong = 0;
    for (let i = 0; i < 5_000; i++) if (table.get(`s${i}`, 0) !== `b${i % 7}`) wrong++;
    expect(wrong).toBe(0);
    let total = 0;
    for (let b = 0; b < 7; b++) total += table.countFor(`b${b}`);
    expect(total).toBe(5_000);
  });

  it("refuses a 65,536th backend holding bindings at once (the tombstone value is reserved)", () => {
    const table = newTable(0x10000);
    for (let i = 0; i < 0xffff; i++) set(table, `s${i}`, `b${i}`, 10, 0);
    expect(table.get("s0", 0)).toBe("b0");
    expect(() => set(table, "s-new", "one-too-many", 10, 0)).toThrow(RangeError);
    // Rebinding within the known backends still works, and one freed index is enough for a new id.
    set(table, "s0", "b1", 10, 0);
    set(table, "s-new", "one-more", 10, 0);
    expect(table.get("s-new", 0)).toBe("one-more");
    expect(table.get("s1", 0)).toBe("b1");
  });
});

describe("StickyTable capacity (max_bindings)", () => {
  it("never exceeds the cap: it evicts the least recently used binding and counts it", () => {
    const table = newTable(3);
    set(table, "a", "b1", 1_000, 0);
    set(table, "b", "b1", 1_000, 1);
    set(table, "c", "b2", 1_000, 2);
    set(table, "a", "b1", 1_000, 3); // a is now the most recently used
    expect(table.get("b", 4)).toBe("b1"); // get() does not refresh recency
    set(table, "d", "b2", 1_000, 5);
    expect(table.size).toBe(3);
    expect(table.evictions).toBe(1);
    expect(table.get("b", 5)).toBeUndefined(); // least recently set
    expect(["a", "c", "d"].map((s) => table.get(s, 5))).toEqual(["b1", "b2", "b2"]);
    expect(table.countFor("b1")).toBe(1);
    expect(table.countFor("b2")).toBe(2);

    for (let i = 0; i < 100; i++) {
      set(table, `x${i}`, "b3", 1_000, 6 + i);
      expect(table.size).toBeLessThanOrEqual(3);
    }
    expect(table.evictions).toBe(101);
    expect(table.countFor("b1") + table.countFor("b2") + table.countFor("b3")).toBe(3);
  });

  it("grows up to a cap that is not a power of two, then evicts", () => {
    const table = newTable(3_000);
    for (let i = 0; i < 3_500; i++) set(table, `s${i}`, "b", 10_000, i);
    expect(table.size).toBe(3_000);
    expect(table.evictions).toBe(500);
    expect(table.get("s499", 3_500)).toBeUndefined();
    expect(table.get("s500", 3_500)).toBe("b");
  });

  it("makes room with expired bindings before evicting a live one", () => {
    const table = newTable(2);
    set(table, "old", "b", 10, 0);
    set(table, "live", "b", 1_000, 5);
    set(table, "new", "b", 1_000, 20); // "old" lapsed at 10: reclaimed, not evicted
    expect(table.evictions).toBe(0);
    expect(table.get("live", 20)).toBe("b");
    expect(table.get("new", 20)).toBe("b");
    expect(table.get("old", 20)).toBeUndefined();
  });
});

describe("StickyTable sweep", () => {
  it("reclaims expired bindings oldest first, up to the limit, without touching live ones", () => {
    const table = newTable(100);
    for (let i = 0; i < 10; i++) set(table, `old${i}`, "b1", 100, 0);
    for (let i = 0; i < 10; i++) set(table, `live${i}`, i % 2 ? "b1" : "b2", 150, 50);
    expect(table.sweep(120, 3)).toBe(3);
    expect(table.get("old0", 120)).toBeUndefined();
    expect(table.get("old3", 120)).toBe(EXPIRED);
    expect(table.sweep(120, 1_000)).toBe(7);
    expect(table.size).toBe(10);
    for (let i = 0; i < 10; i++) expect(table.get(`live${i}`, 120)).toBe(i % 2 ? "b1" : "b2");
    expect(table.countFor("b1")).toBe(5);
    expect(table.countFor("b2")).toBe(5);
    expect(table.sweep(120, 1_000)).toBe(0);
    expect(table.sweep(150, 1_000)).toBe(10);
    expect(table.size).toBe(0);
  });

  it("reclaims expired tombstones too", () => {
    const table = newTable(10);
    set(table, "s", "b", 100, 0);
    expect(table.breakBackend("b", 50)).toBe(1);
    expect(table.sweep(99, 10)).toBe(0);
    expect(table.get("s", 99)).toBe(BROKEN);
    expect(table.sweep(100, 10)).toBe(1);
    expect(table.size).toBe(0);
  });

  it("stops at the oldest live binding (after a TTL change, a shorter-lived newer one waits, never shown live)", () => {
    const table = newTable(10);
    set(table, "long", "b", 1_000, 0);
    set(table, "short", "b", 10, 1);
    expect(table.sweep(20, 10)).toBe(0);
    expect(table.get("short", 20)).toBe(EXPIRED);
  });
});

describe("StickyTable breaking bindings", () => {
  function populated() {
    const table = newTable(100);
    for (let i = 0; i < 30; i++) set(table, `s${i}`, `b${i % 3}`, 1_000, 0);
    set(table, "lapsed", "b0", 10, 0);
    return table;
  }

  it("breakBackend breaks only that backend's live bindings, returns how many, reclaims its lapsed ones", () => {
    const table = populated();
    expect(table.countFor("b0")).toBe(11);
    expect(table.breakBackend("b0", 20)).toBe(10);
    expect(table.countFor("b0")).toBe(0);
    expect(table.countFor("b1")).toBe(10);
    expect(table.countFor("b2")).toBe(10);
    expect(table.size).toBe(30); // 10 tombstones + 20 live; the lapsed one is gone
    expect(table.get("lapsed", 20)).toBeUndefined();
    for (let i = 0; i < 30; i++) expect(table.get(`s${i}`, 20)).toBe(i % 3 === 0 ? BROKEN : `b${i % 3}`);
    expect(table.breakBackend("b0", 20)).toBe(0);
    expect(table.breakBackend("unknown", 20)).toBe(0);
  });

  it("breakBinding breaks a live binding only when it points at the named backend", () => {
    const table = populated();
    expect(table.breakBinding("s0", "b1", 20)).toBe(false); // bound to b0
    expect(table.breakBinding("nope", "b0", 20)).toBe(false);
    expect(table.breakBinding("s0", "unknown", 20)).toBe(false);
    expect(table.breakBinding("lapsed", "b0", 20)).toBe(false); // lapsed, not broken by anything
    expect(table.get("lapsed", 20)).toBe(EXPIRED);
    expect(table.breakBinding("s0", "b0", 20)).toBe(true);
    expect(table.breakBinding("s0", "b0", 20)).toBe(false); // already a tombstone
    expect(table.get("s0", 20)).toBe(BROKEN);
    expect(table.countFor("b0")).toBe(10); // 9 live + the lapsed one, not yet reclaimed
  });

  it("re-sets a tombstone to any backend (the same one included), and deletes or evicts it cleanly", () => {
    const table = newTable(3);
    set(table, "s", "b0", 1_000, 0);
    table.breakBinding("s", "b0", 1);
    set(table, "s", "b1", 1_000, 2);
    expect(table.get("s", 2)).toBe("b1");
    expect([table.countFor("b0"), table.countFor("b1")]).toEqual([0, 1]);
    table.breakBackend("b1", 3);
    set(table, "s", "b1", 1_000, 4);
    expect(table.get("s", 4)).toBe("b1");
    expect(table.countFor("b1")).toBe(1);

    table.breakBinding("s", "b1", 5);
    table.delete("s");
    expect(table.size).toBe(0);
    expect(table.countFor("b1")).toBe(0);

    set(table, "t", "b0", 1_000, 6);
    table.breakBinding("t", "b0", 6);
    for (const s of ["u", "v", "w"]) set(table, s, "b2", 1_000, 7); // evicts the tombstone "t" (LRU)
    expect(table.get("t", 7)).toBeUndefined();
    expect(table.evictions).toBe(1);
    expect(table.countFor("b2")).toBe(3);
  });

  it("moveSessions moves exactly the live bindings of one backend that the predicate picks by placement", () => {
    const table = populated();
    table.breakBinding("s3", "b0", 20);
    const offered: string[] = [];
    const byPlacement = new Map<string, string>();
    for (let i = 0; i < 30; i++) byPlacement.set(placementKey(hashSession(`s${i}`)), `s${i}`);
    const moved = table.moveSessions("b0", "b9", 20, (placement) => {
      const session = byPlacement.get(placementKey(placement))!;
      offered.push(session);
      return session !== "s6";
    });
    expect(offered.sort()).toEqual(["s0", "s12", "s15", "s18", "s21", "s24", "s27", "s6", "s9"]);
    expect(moved).toBe(8);
    expect(table.get("s0", 20)).toBe("b9");
    expect(table.get("s0", 1_000)).toBe(EXPIRED); // a move changes where, not until when
    expect(table.get("s6", 20)).toBe("b0");
    expect(table.get("s3", 20)).toBe(BROKEN);
    expect([table.countFor("b0"), table.countFor("b9")]).toEqual([2, 8]); // s6 and the lapsed one stay
    expect(table.moveSessions("unknown", "b1", 20, () => true)).toBe(0);
    expect(table.moveSessions("b1", "b1", 20, () => true)).toBe(0);
  });

  it("refresh extends a live binding and makes it the most recently used; it never revives a broken one", () => {
    const table = newTable(2);
    set(table, "a", "b0", 100, 0);
    set(table, "b", "b0", 100, 1);
    table.refresh("a", 500);
    expect(table.get("a", 400)).toBe("b0");
    set(table, "c", "b0", 600, 2); // evicts "b", not the refreshed "a"
    expect(table.get("b", 2)).toBeUndefined();
    expect(table.breakBinding("a", "b0", 3)).toBe(true);
    table.refresh("a", 900);
    expect(table.get("a", 3)).toBe(BROKEN);
    table.refresh("never-seen", 900);
    expect(table.size).toBe(2);
  });
});

function placementKey(placement: Hash64): string {
  return `${placement.hi >>> 0}:${placement.lo >>> 0}`;
}

describe("StickyTable index under churn", () => {
  it("agrees with a Map through growth and 200,000 random binds and deletes over 3,000 ids", () => {
    const table = newTable(3_000);
    const model = new Map<string, string>();
    const ids = Array.from({ length: 3_000 }, (_, i) => `session-${i}-${(i * 2654435761) >>> 0}`);
    let state = 12345;
    const next = (n: number) => {
      state = (Math.imul(state, 1103515245) + 12345) >>> 0;
      return state % n;
    };
    for (let step = 0; step < 200_000; step++) {
      const id = ids[next(ids.length)]!;
      if (next(3) === 0) {
        table.delete(id);
        model.delete(id);
      } else {
        const backend = `b${next(5)}`;
        set(table, id, backend, 1_000_000, 0);
        model.set(id, backend);
      }
    }
    expect(table.size).toBe(model.size);
    expect(table.evictions).toBe(0);
    let wrong = 0;
    for (const id of ids) if (table.get(id, 0) !== model.get(id)) wrong++;
    expect(wrong).toBe(0);
  });

  it("tells apart ids that differ in one character, and non-Latin-1 ids from their byte look-alikes", () => {
    const table = newTable(10);
    set(table, "\u0100", "wide", 100, 0);
    set(table, "\u0000\u0001", "bytes", 100, 0);
    set(table, "session-a", "b1", 100, 0);
    expect(table.get("session-b", 0)).toBeUndefined();
    expect(["\u0100", "\u0000\u0001", "session-a"].map((id) => table.get(id, 0))).toEqual([
      "wide",
      "bytes",
      "b1",
    ]);
  });
});

// ---- Model-based property test: StickyTable against a plain Map that keeps LRU order by reinsertion. ----

interface ModelEntry {
  backend: string;
  placement: Hash64;
  expiresAtMs: number;
  broken: boolean;
}

/** The BindingStore contract, as simply as it can be said. Map order is recency order (oldest first). */
class ModelStore {
  readonly entries = new Map<string, ModelEntry>();
  evictions = 0;
  constructor(private readonly cap: number) {}

  get(session: string, nowMs: number): BindingLookup {
    const entry = this.entries.get(session);
    if (entry === undefined) return undefined;
    if (entry.broken) return BROKEN;
    return entry.expiresAtMs <= nowMs ? EXPIRED : entry.backend;
  }

  set(session: string, backend: string, expiresAtMs: number, nowMs: number): void {
    if (!this.entries.delete(session)) {
      this.sweep(nowMs, 4);
      if (this.entries.size >= this.cap) {
        this.entries.delete(this.entries.keys().next().value!);
        this.evictions++;
      }
    }
    this.entries.set(session, { backend, placement: hashSession(session), expiresAtMs, broken: false });
  }

  delete(session: string): void {
    this.entries.delete(session);
  }

  breakBinding(session: string, backend: string, nowMs: number): boolean {
    const entry = this.entries.get(session);
    if (entry === undefined || entry.broken || entry.backend !== backend || entry.expiresAtMs <= nowMs)
      return false;
    entry.broken = true;
    return true;
  }

  breakBackend(backend: string, nowMs: number): number {
    let broken = 0;
    for (const [session, entry] of [...this.entries]) {
      if (entry.broken || entry.backend !== backend) continue;
      if (entry.expiresAtMs <= nowMs) this.entries.delete(session);
      else {
        entry.broken = true;
        broken++;
      }
    }
    return broken;
  }

  countFor(backend: string): number {
    let n = 0;
    for (const entry of this.entries.values()) if (!entry.broken && entry.backend === backend) n++;
    return n;
  }

  refresh(session: string, expiresAtMs: number): void {
    const entry = this.entries.get(session);
    if (entry === undefined || entry.broken) return;
    this.entries.delete(session);
    this.entries.set(session, { ...entry, expiresAtMs });
  }

  moveSessions(from: string, to: string, nowMs: number, shouldMove: (placement: Hash64) => boolean): number {
    if (from === to) return 0;
    const moving = [...this.entries.values()].filter(
      (e) => !e.broken && e.backend === from && e.expiresAtMs > nowMs && shouldMove(e.placement),
    );
    for (const entry of moving) entry.backend = to;
    return moving.length;
  }

  sweep(nowMs: number, maxEntries: number): number {
    let reclaimed = 0;
    for (const [session, entry] of this.entries) {
      if (reclaimed >= maxEntries || entry.expiresAtMs > nowMs) break;
      this.entries.delete(session);
      reclaimed++;
    }
    return reclaimed;
  }
}

const SESSIONS = Array.from({ length: 12 }, (_, i) => `session-${i}`);
const BACKENDS = ["b0", "b1", "b2", "b3"];

type Op =
  | { op: "set"; session: number; backend: number; ttl: number }
  | { op: "get"; session: number }
  | { op: "refresh"; session: number; ttl: number }
  | { op: "move"; from: number; to: number; parity: number }
  | { op: "delete"; session: number }
  | { op: "breakBinding"; session: number; backend: number }
  | { op: "breakBackend"; backend: number }
  | { op: "sweep"; max: number }
  | { op: "advance"; ms: number };

const session = fc.nat({ max: SESSIONS.length - 1 });
const backend = fc.nat({ max: BACKENDS.length - 1 });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      op: fc.constant("set" as const),
      session,
      backend,
      ttl: fc.integer({ min: 1, max: 60 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("get" as const), session }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("delete" as const), session }) },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant("refresh" as const),
      session,
      ttl: fc.integer({ min: 1, max: 60 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant("move" as const),
      from: backend,
      to: backend,
      parity: fc.nat({ max: 1 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("breakBinding" as const), session, backend }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("breakBackend" as const), backend }) },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant("sweep" as const), max: fc.integer({ min: 0, max: 6 }) }),
  },
  {
    weight: 3,
    arbitrary: fc.record({ op: fc.constant("advance" as const), ms: fc.integer({ min: 0, max: 30 }) }),
  },
);

describe("StickyTable against a reference model", () => {
  it("agrees with a Map-based model on every operation, and countFor sums to the live-or-unreclaimed total", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.boolean(),
        fc.array(opArb, { minLength: 1, maxLength: 150 }),
        (cap, fixedTtl, ops) => {
          const table = newTable(cap);
          const model = new ModelStore(cap);
          let nowMs = 0;
          for (const step of ops) {
            switch (step.op) {
              case "set": {
                // Half the runs use one TTL (as in production); the other half mix TTLs, as after a reload.
                const expiresAtMs = nowMs + (fixedTtl ? 25 : step.ttl);
                set(table, SESSIONS[step.session]!, BACKENDS[step.backend]!, expiresAtMs, nowMs);
                model.set(SESSIONS[step.session]!, BACKENDS[step.backend]!, expiresAtMs, nowMs);
                break;
              }
              case "get":
                expect(table.get(SESSIONS[step.session]!, nowMs)).toBe(
                  model.get(SESSIONS[step.session]!, nowMs),
                );
                break;
              case "refresh": {
                const expiresAtMs = nowMs + (fixedTtl ? 25 : step.ttl);
                table.refresh(SESSIONS[step.session]!, expiresAtMs);
                model.refresh(SESSIONS[step.session]!, expiresAtMs);
                break;
              }
              case "move": {
                const pick = (p: Hash64) => (p.lo & 1) === step.parity;
                const [from, to] = [BACKENDS[step.from]!, BACKENDS[step.to]!];
                expect(table.moveSessions(from, to, nowMs, pick)).toBe(
                  model.moveSessions(from, to, nowMs, pick),
                );
                break;
              }
              case "delete":
                table.delete(SESSIONS[step.session]!);
                model.delete(SESSIONS[step.session]!);
                break;
              case "breakBinding": {
                const s = SESSIONS[step.session]!;
                const b = BACKENDS[step.backend]!;
                expect(table.breakBinding(s, b, nowMs)).toBe(model.breakBinding(s, b, nowMs));
                break;
              }
              case "breakBackend":
                expect(table.breakBackend(BACKENDS[step.backend]!, nowMs)).toBe(
                  model.breakBackend(BACKENDS[step.backend]!, nowMs),
                );
                break;
              case "sweep":
                expect(table.sweep(nowMs, step.max)).toBe(model.sweep(nowMs, step.max));
                break;
              case "advance":
                nowMs += step.ms;
                break;
            }
            // After every step, the whole observable state agrees.
            expect(table.size).toBe(model.entries.size);
            expect(table.size).toBeLessThanOrEqual(cap);
            expect(table.evictions).toBe(model.evictions);
            for (const s of SESSIONS) expect(table.get(s, nowMs)).toBe(model.get(s, nowMs));
            let sum = 0;
            for (const b of BACKENDS) {
              expect(table.countFor(b)).toBe(model.countFor(b));
              sum += table.countFor(b);
            }
            const tombstones = [...model.entries.values()].filter((e) => e.broken).length;
            expect(sum).toBe(table.size - tombstones);
          }
        },
      ),
      { seed: 42, numRuns: 200 },
    );
  });
});

describe("StickyTable backend indices (engines that come and go)", () => {
  it("outlives 65,535 engine ids: indices of backends nothing points at are reused", () => {
    const table = new StickyTable(1000, TEST_HASH_KEY);
    table.bind("long-lived", hashSession("long-lived"), "engine-keep", 1e12, 0);
    for (let i = 0; i < 70_000; i++) {
      const engine = `pod-${i}`;
      table.bind(`s-${i % 50}`, hashSession(`s-${i % 50}`), engine, 1e12, i);
      // The pod goes away: its bindings break (the session moves on with its next bind).
      if (i % 2 === 0) table.breakBackend(engine, i);
    }
    expect(table.get("long-lived", 1)).toBe("engine-keep");
    expect(table.countFor("engine-keep")).toBe(1);
    // The last pods' sessions point where they were bound; a broken one says so.
    expect(table.get("s-49", 1)).toBe("pod-69999");
    expect(table.get("s-48", 1)).toBe(BROKEN);
    expect(table.countFor("pod-69999")).toBe(1);
    expect(table.countFor("pod-69998")).toBe(0);
  });
});
