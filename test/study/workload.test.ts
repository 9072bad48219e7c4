// The workload generator is deterministic and shaped as asked.
import { describe, expect, it } from "vitest";
import { generateWorkload, type WorkloadSpec } from "../../src/study/workload.js";

const SPEC: WorkloadSpec = {
  seed: 7,
  sessions: 12,
  turns: 6,
  systemPromptChars: 3000,
  sharedSystemPrompt: true,
  userChars: 300,
  maxTokens: 256,
  toolCallRate: 0,
  thinkTimeMs: 0,
  idPrefix: "run-a",
};

describe("generateWorkload", () => {
  it("gives the same sessions, prompts and order for the same seed; only the id prefix names the run", () => {
    const a = generateWorkload(SPEC);
    const b = generateWorkload({ ...SPEC, idPrefix: "run-b" });
    expect(b.map((s) => s.turns)).toEqual(a.map((s) => s.turns));
    expect(b.map((s) => s.systemPrompt)).toEqual(a.map((s) => s.systemPrompt));
    expect(a.map((s) => s.id)).toEqual(
      Array.from({ length: 12 }, (_, i) => `run-a-${String(i).padStart(4, "0")}`),
    );
    expect(generateWorkload({ ...SPEC, seed: 8 })[0]!.turns[0]!.userMessage).not.toBe(
      a[0]!.turns[0]!.userMessage,
    );
  });

  it("makes prompts of the requested sizes and shares the system prompt when asked", () => {
    const sessions = generateWorkload(SPEC);
    expect(sessions).toHaveLength(12);
    expect(new Set(sessions.map((s) => s.systemPrompt)).size).toBe(1);
    expect(sessions[0]!.systemPrompt.length).toBe(3000);
    for (const session of sessions) {
      expect(session.turns).toHaveLength(6);
      for (const turn of session.turns) expect(turn.userMessage.length).toBe(300);
    }
    const own = generateWorkload({ ...SPEC, sharedSystemPrompt: false });
    expect(new Set(own.map((s) => s.systemPrompt)).size).toBe(12);
  });

  it("draws turn counts from a range and adds tool rounds at the given rate, never on the first turn", () => {
    const sessions = generateWorkload({
      ...SPEC,
      sessions: 200,
      turns: { min: 15, max: 25 },
      toolCallRate: 0.5,
      toolResultChars: { min: 500, max: 2500 },
    });
    const counts = sessions.map((s) => s.turns.length);
    expect(Math.min(...counts)).toBe(15);
    expect(Math.max(...counts)).toBe(25);
    const later = sessions.flatMap((s) => s.turns.slice(1));
    const tools = later.filter((t) => t.toolCall !== undefined);
    expect(tools.length / later.length).toBeGreaterThan(0.45);
    expect(tools.length / later.length).toBeLessThan(0.55);
    expect(sessions.every((s) => s.turns[0]!.toolCall === undefined)).toBe(true);
    for (const t of tools) {
      expect(t.toolCall!.result.length).toBeGreaterThanOrEqual(500);
      expect(t.toolCall!.result.length).toBeLessThanOrEqual(2500);
      expect(() => JSON.parse(t.toolCall!.arguments) as unknown).not.toThrow();
    }
  });
});
