// The demo fleet end to end: 4 agents x 8 turns through the openai SDK, the gateway and simulated engines.
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runAgentDemo } from "../../src/agent/agent-run.js";
import { agentCommand } from "../../src/agent/command.js";
import { startEmbeddedDemo } from "../../src/agent/embedded-demo.js";
import type { FleetEvents } from "../../src/agent/fleet.js";
import { loadConfigFile } from "../../src/config/load.js";
import { metricValue, scrapeMetrics } from "../../src/metrics/prometheus-text.js";

const quietView = (): FleetEvents & { finish(): void } => ({ onStep() {}, onTurn() {}, finish() {} });

describe("agent fleet against the embedded demo", () => {
  it("4 agents x 8 turns: tools run, one engine per session, every call after the first a hit", async () => {
    // The demo as `npm start` configures it (three simulated engines), sped up, on OS-assigned ports.
    const demo = await startEmbeddedDemo(await loadConfigFile("configs/gateway.yaml"), { timeScale: 20 });
    try {
      const before = await scrapeMetrics(demo.url);
      const { result, runs } = await runAgentDemo({
        agents: 4,
        turns: 8,
        maxSteps: 6,
        maxTokens: 128,
        gatewayUrl: demo.url,
        model: "auto",
        tierHint: "small",
        apiKey: "unused",
        requestTimeoutMs: 60_000,
        seed: 42,
        runId: "fleet-test",
        view: quietView,
      });
      const after = await scrapeMetrics(demo.url);

      expect(runs).toHaveLength(4);
      expect(new Set(runs.map((run) => run.sessionId)).size).toBe(4);
      const turns = runs.flatMap((run) => run.turns);
      expect(turns).toHaveLength(32);
      expect(turns.every((turn) => turn.completed && turn.answer.length > 0)).toBe(true);

      // Tools ran for real: every turn called at least one, and the workspace and corpus tools read real data.
      expect(turns.every((turn) => turn.toolCalls.length > 0)).toBe(true);
      const calls = turns.flatMap((turn) => turn.toolCalls);
      expect(calls.some((call) => call.name === "read_file" && call.ok)).toBe(true);
      expect(calls.some((call) => call.name === "search_corpus" && call.ok)).toBe(true);
      const steps = turns.flatMap((turn) => turn.steps);
      expect(steps.length).toBeGreaterThan(32); // several model calls per turn: model, tools, model

      for (const run of runs) {
        const own = run.turns.flatMap((turn) => turn.steps);
        expect(new Set(own.map((step) => step.backend)).size).toBe(1);
        expect(own[0]).toMatchObject({ affinityHit: false, reason: "new_session" });
        // Every call after the session's first is a hit, the tool follow-ups inside one turn included.
        expect(own.slice(1).every((step) => step.affinityHit === true)).toBe(true);
        expect(own.slice(1).some((step) => step.cachedTokens > 0)).toBe(true);
      }
      // The gateway counted the same: one miss per session, a hit for every later call.
      const delta = (name: string): number =>
        metricValue(after, name, { tier: "small" }) - metricValue(before, name, { tier: "small" });
      expect(delta("agentserve_affinity_misses_total")).toBe(4);
      expect(delta("agentserve_affinity_hits_total")).toBe(steps.length - 4);

      expect(result.checks.map((check) => [check.claim, check.passed])).toEqual([
        ["every turn ended with a text answer", true],
        ["the agents called tools and the tools ran", true],
        ["each session stayed on one engine", true],
        ["every model call after a session's first was an affinity hit", true],
      ]);
      expect(result.data).toMatchObject({ agents: 4, turns: 32, completedTurns: 32, failedModelCalls: 0 });
    } finally {
      await demo.close();
    }
  }, 120_000);

  it("the command starts the demo itself, writes the report and exits 0", async () => {
    const out = await mkdtemp(join(tmpdir(), "agent-command-"));
    const written: string[] = [];
    const write = process.stdout.write.bind(process.stdout);
    process.stdout.write = ((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    }) as typeof process.stdout.write;
    let code: number;
    try {
      code = await agentCommand.run(["--agents", "2", "--turns", "2", "--time-scale", "20", "--out", out]);
    } finally {
      process.stdout.write = write;
    }
    try {
      expect(code).toBe(0);
      const text = written.join("");
      // Not a terminal here: one plain progress line per model call, then the summary.
      expect(text).toMatch(
        /agent-1 turn 1\/2 call 1: small-\d new_session {2}ttft \d+ ms {2}cached \d+\/\d+ {2}tools \w+/,
      );
      expect(text).toContain("PASS  every model call after a session's first was an affinity hit");
      const dir = /report: (.+)\/report\.md/.exec(text)![1]!;
      const report = await readFile(join(dir, "report.md"), "utf8");
      expect(report).toContain("# Demo agent fleet");
      expect(report).toContain("Reproduce: `agent-serve agent --agents 2 --turns 2 --time-scale 20 --out ");
      expect(report).toContain("| tool | calls | ok | error results | p50 duration |");
      const summary = JSON.parse(await readFile(join(dir, "summary.json"), "utf8")) as {
        results: { turns: number };
      };
      expect(summary.results.turns).toBe(4);
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  }, 120_000);
});
