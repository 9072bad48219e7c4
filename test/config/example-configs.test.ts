// The example configs the docs walk through load as they are, and say what the recipes need of them.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { isLoopbackHost, openExposureProblem } from "../../src/config/exposure.js";
import { loadConfigFile } from "../../src/config/load.js";

describe("configs/replicas.yaml (docs/operations.md, two replicas on one machine)", () => {
  it("loads, starts on loopback, and shares both stores through one Redis under different prefixes", async () => {
    const config = await loadConfigFile("configs/replicas.yaml", {});
    expect(isLoopbackHost(config.server.host)).toBe(true);
    expect(openExposureProblem(config)).toBeUndefined();
    const [bindings, budgets] = [config.affinity.store, config.admission.store];
    expect(bindings.kind).toBe("redis");
    expect(budgets.kind).toBe("redis");
    if (bindings.kind !== "redis" || budgets.kind !== "redis") return;
    expect(bindings.url).toBe(budgets.url);
    expect(bindings.key_prefix).not.toBe(budgets.key_prefix);
    // `start` runs the engines for replica A; replica B's `gateway` uses the same ones.
    expect(config.backends.every((b) => b.simulate !== undefined)).toBe(true);
  });

  it("is the file the recipe's three commands use, with the second replica on another port", async () => {
    const doc = readFileSync("docs/operations.md", "utf8");
    const section = doc.slice(
      doc.indexOf("## Two replicas on one machine"),
      doc.indexOf("## Production checklist"),
    );
    expect(section).toContain("agent-serve start --config configs/replicas.yaml");
    expect(section).toContain("AGENT_SERVE_PORT=8010 agent-serve gateway --config configs/replicas.yaml");
    const config = await loadConfigFile("configs/replicas.yaml", { AGENT_SERVE_PORT: "8010" });
    expect(config.server.port).toBe(8010);
    expect(section).toMatch(/redis-server --port 6379/);
    if (config.affinity.store.kind === "redis") expect(config.affinity.store.url).toContain(":6379");
  });
});
