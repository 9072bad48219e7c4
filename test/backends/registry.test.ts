import { describe, expect, it } from "vitest";
import { hashString } from "../../src/affinity/hash.js";
import { Backend } from "../../src/backends/backend.js";
import { BackendRegistry, type HealthTransition } from "../../src/backends/registry.js";
import { ManualClock } from "../../src/core/clock.js";
import type { BackendConfig } from "../../src/config/schema.js";

const THRESHOLDS = { failuresToMarkDown: 3, successesToMarkUp: 2 };

function config(id: string, tier: string, extra: Partial<BackendConfig> = {}): BackendConfig {
  return {
    id,
    tier,
    base_url: `http://127.0.0.1:9000/${id}`,
    model: tier === "big" ? "big-model" : "small-model",
    max_inflight: 64,
    weight: 1,
    ...extra,
  };
}

const DEFAULT = [config("big-0", "big"), config("small-0", "small"), config("small-1", "small")];

describe("Backend", () => {
  it("derives its scheduling state from health and the drain flag", () => {
    const backend = new Backend(config("b", "small"), { failuresToMarkDown: 1, successesToMarkUp: 1 });
    expect(backend.state).toBe("up");
    expect(backend.idHash).toEqual(hashString("b"));
    backend.drained = true;
    expect(backend.state).toBe("draining");
    backend.health.recordFailure();
    expect(backend.state).toBe("down"); // down wins over draining
    backend.drained = false;
    expect(backend.state).toBe("down");
    backend.health.recordSuccess();
    expect(backend.state).toBe("up");
  });
});

describe("BackendRegistry", () => {
  it("indexes backends by id, tier (config order) and model", () => {
    const registry = new BackendRegistry(DEFAULT, THRESHOLDS);
    expect(registry.tiers()).toEqual(["big", "small"]);
    expect(registry.tier("small").map((b) => b.id)).toEqual(["small-0", "small-1"]);
    expect(registry.tier("nope")).toEqual([]);
    expect(registry.hasTier("big")).toBe(true);
    expect(registry.hasTier("medium")).toBe(false);
    expect(registry.get("big-0")?.tier).toBe("big");
    expect(registry.get("nope")).toBeUndefined();
    expect(registry.tierOfModel("small-model")).toBe("small");
    expect(registry.tierOfModel("unknown")).toBeUndefined();
    expect(registry.models().sort()).toEqual(["big-model", "small-model"]);
    expect([...registry.all()].map((b) => b.id)).toEqual(["big-0", "small-0", "small-1"]);
  });

  it("publishes a transition only when the thresholds are crossed, with its cause", () => {
    const registry = new BackendRegistry(DEFAULT, THRESHOLDS);
    const seen: HealthTransition[] = [];
    registry.onHealthChange((t) => seen.push(t));
    const backend = registry.get("small-1")!;

    registry.recordOutcome(backend, false, "probe");
    registry.recordOutcome(backend, false, "probe");
    expect(seen).toEqual([]);
    registry.recordOutcome(backend, false, "probe");
    expect(seen).toEqual([{ backend, to: "down", cause: "probe" }]);
    expect(backend.state).toBe("down");
    registry.recordOutcome(backend, false, "probe");
    expect(seen).toHaveLength(1);

    registry.recordOutcome(backend, true, "probe");
    expect(seen).toHaveLength(1);
    registry.recordOutcome(backend, true, "probe");
    expect(seen[1]).toEqual({ backend, to: "up", cause: "probe" });
    expect(seen).toHaveLength(2);
  });

  it("ejects on consecutive request failures (probes in between do not reset them), never the tier's last", () => {
    const clock = new ManualClock(0);
    const ejection = { consecutiveFailures: 2, baseMs: 1000, maxMs: 8000, stallMs: 0 };
    const registry = new BackendRegistry(DEFAULT, { ...THRESHOLDS, ejection }, clock);
    const seen: HealthTransition[] = [];
    const withheld: string[] = [];
    registry.onHealthChange((t) => seen.push(t));
    registry.onEjectionWithheld((b, cause) => withheld.push(`${b.id}:${cause}`));
    const a = registry.get("small-0")!;
    const b = registry.get("small-1")!;
    registry.recordOutcome(a, false, "request");
    registry.recordOutcome(a, true, "probe");
    registry.recordOutcome(a, false, "request");
    expect(seen).toEqual([{ backend: a, to: "down", cause: "request", ejectedUntilMs: 1000 }]);
    // small-1 is now the tier's last available engine: its failures are reported, not acted on.
    registry.recordOutcome(b, false, "request");
    registry.recordOutcome(b, false, "request");
    expect(b.state).toBe("up");
    expect(withheld).toEqual(["small-1:request"]);
    // Nor is an engine whose only peer is draining (that peer takes no new sessions).
    const c = new BackendRegistry(DEFAULT, { ...THRESHOLDS, ejection }, clock);
    c.get("small-1")!.drained = true;
    c.recordOutcome(c.get("small-0")!, false, "request");
    c.recordOutcome(c.get("small-0")!, false, "request");
    expect(c.get("small-0")!.state).toBe("up");
    // The big tier's only engine is never ejected either.
    const big = registry.get("big-0")!;
    registry.recordOutcome(big, false, "request");
    registry.recordOutcome(big, false, "request");
    expect(big.state).toBe("up");
  });

  it("delivers to every listener and stops after unsubscribe, even when a listener unsubscribes itself", () => {
    const registry = new BackendRegistry(DEFAULT, { failuresToMarkDown: 1, successesToMarkUp: 1 });
    const log: string[] = [];
    const offA = registry.onHealthChange((t) => {
      log.push(`a:${t.backend.id}:${t.to}`);
      offA(); // one-shot
    });
    const offB = registry.onHealthChange((t) => log.push(`b:${t.backend.id}:${t.to}`));
    registry.recordOutcome(registry.get("small-0")!, false, "probe");
    registry.recordOutcome(registry.get("small-0")!, true, "probe");
    offB();
    offB(); // twice is harmless
    registry.recordOutcome(registry.get("small-0")!, false, "probe");
    expect(log).toEqual(["a:small-0:down", "b:small-0:down", "b:small-0:up"]);
  });

  it("reports whether any backend can take a request", () => {
    const registry = new BackendRegistry([config("only", "small")], {
      failuresToMarkDown: 1,
      successesToMarkUp: 1,
    });
    expect(registry.anyAvailable()).toBe(true);
    registry.get("only")!.drained = true;
    expect(registry.anyAvailable()).toBe(true); // draining still serves its pinned sessions
    registry.recordOutcome(registry.get("only")!, false, "probe");
    expect(registry.anyAvailable()).toBe(false);
  });

  it("reconfigure adds, updates in place, and returns the removed backends (a tier change is a removal)", () => {
    const registry = new BackendRegistry(DEFAULT, THRESHOLDS);
    const kept = registry.get("small-0")!;
    kept.inflight = 5;
    kept.drained = true;
    const moved = registry.get("big-0")!;

    const removed = registry.reconfigure(
      [
        config("small-0", "small", { base_url: "http://10.0.0.1:8002", weight: 2, max_inflight: 8 }),
        config("big-0", "small"), // same id, another tier
        config("small-2", "small"),
      ],
      { failuresToMarkDown: 1, successesToMarkUp: 1 },
    );

    expect(removed.map((b) => b.id).sort()).toEqual(["big-0", "small-1"]);
    expect(removed).toContain(moved);
    expect(registry.get("small-0")).toBe(kept); // same object: in-flight count and drain flag survive
    expect(kept).toMatchObject({ baseUrl: "http://10.0.0.1:8002", weight: 2, maxInflight: 8, inflight: 5 });
    expect(kept.drained).toBe(true);
    expect(registry.get("big-0")).not.toBe(moved);
    expect(registry.get("big-0")?.tier).toBe("small");
    expect(registry.tiers()).toEqual(["small"]);
    expect(registry.hasTier("big")).toBe(false);
    expect(
      registry
        .tier("small")
        .map((b) => b.id)
        .sort(),
    ).toEqual(["big-0", "small-0", "small-2"]);

    // An added backend takes no traffic until a probe says it answers (a request outcome is not enough).
    const added = registry.get("small-2")!;
    expect(added.state).toBe("down");
    const transitions: string[] = [];
    registry.onHealthChange((t) => transitions.push(`${t.backend.id}:${t.to}`));
    registry.recordOutcome(added, false, "probe");
    registry.recordOutcome(added, true, "request");
    expect(added.state).toBe("down");
    registry.recordOutcome(added, true, "probe");
    expect(added.state).toBe("up");
    // The new thresholds apply to kept and added backends alike.
    registry.recordOutcome(kept, false, "probe");
    registry.recordOutcome(added, false, "probe");
    expect(transitions).toEqual(["small-2:up", "small-0:down", "small-2:down"]);
  });

  it("reconfigure with the same list removes nothing", () => {
    const registry = new BackendRegistry(DEFAULT, THRESHOLDS);
    expect(registry.reconfigure(DEFAULT, THRESHOLDS)).toEqual([]);
    expect([...registry.all()].map((b) => b.id).sort()).toEqual(["big-0", "small-0", "small-1"]);
  });
});
