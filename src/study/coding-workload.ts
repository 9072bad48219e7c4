// Seeded coding-agent sessions: one agent application's long prompt, turns that grow the history with tool
// results, think times from seconds to minutes, and bursts of parallel sub-agents with a prompt of their own.
import { SeededRandom } from "../core/random.js";
import { prose } from "./workload.js";

export interface CodingWorkloadSpec {
  seed: number;
  sessions: number;
  /** Main-thread model calls per session, an inclusive range drawn per session. */
  turns: { min: number; max: number };
  /** The agent's system prompt with its tool definitions, shared by every session (one agent application). */
  systemPromptChars: number;
  /** The sub-agents' own system prompt (one for all of them, as a coding agent's task agent has). */
  subagentPromptChars: number;
  /** A tool result's size (file contents, command output): what makes the history grow. */
  toolResultChars: { min: number; max: number };
  /** Reply length per call in tokens, sent as max_tokens with ignore_eos so the engine writes exactly that. */
  replyTokens: { min: number; max: number };
  /** Share of sessions that fan out one burst of sub-agents during their middle third. */
  burstShare: number;
  /** Sub-agents per burst: log-normal with this median and 90th percentile, clamped to [min, max]. */
  burstSize: { median: number; p90: number; min: number; max: number };
  /** Model calls per sub-agent, an inclusive range. */
  subagentTurns: { min: number; max: number };
  /** Pause before a main-thread call: mostly a tool running, sometimes a person reading and typing. */
  thinkSeconds: {
    short: { min: number; max: number };
    long: { min: number; max: number };
    longShare: number;
  };
  /** Pause between a sub-agent's calls (its tools running). */
  subagentThinkSeconds: { min: number; max: number };
  /**
   * Context the session's first call carries besides the request (files read, a resumed conversation), an
   * inclusive range per session; none when absent. What makes a session's prompt start large.
   */
  openingContextChars?: { min: number; max: number };
  /** Prefix of session ids: names the run and the condition. */
  idPrefix: string;
}

export interface CodingCall {
  /** The message that precedes this call: the user's request or the previous call's tool result. */
  message: { kind: "user"; text: string } | { kind: "tool"; name: string; arguments: string; result: string };
  replyTokens: number;
  /** Simulated ms to wait before sending this call. */
  thinkMs: number;
}

/** A sub-agent: its first call's message is its task, from the parent. */
export interface SubagentPlan {
  calls: CodingCall[];
}

export interface CodingSessionPlan {
  id: string;
  systemPrompt: string;
  calls: CodingCall[];
  /** After the call at this index (0-based), the session fans out these sub-agents and waits for them all. */
  burst?: { afterCall: number; subagents: SubagentPlan[]; systemPrompt: string };
}

const TOOLS = ["Read", "Grep", "Bash", "Edit", "Glob"] as const;

/** A coding agent's prompt: instructions, then tool definitions as JSON schemas, to `chars` characters. */
function agentPrompt(random: SeededRandom, chars: number, role: string): string {
  const tools = TOOLS.map(
    (name) =>
      `{"name":"${name}","description":"${prose(random, 400)}","input_schema":{"type":"object","properties":` +
      `{"path":{"type":"string"},"pattern":{"type":"string"},"command":{"type":"string"}}}}`,
  ).join("\n");
  const head = `You are ${role}. You help with software engineering tasks in the user's repository.\n${tools}\n`;
  return head + prose(random, Math.max(0, chars - head.length));
}

function between(random: SeededRandom, range: { min: number; max: number }): number {
  return range.min + random.int(range.max - range.min + 1);
}

function uniformSeconds(random: SeededRandom, range: { min: number; max: number }): number {
  return (range.min + random.next() * (range.max - range.min)) * 1000;
}

/** A standard normal draw (Box-Muller) from the seeded source. */
function normal(random: SeededRandom): number {
  const u = Math.max(random.next(), Number.EPSILON);
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random.next());
}

/** Burst sizes are heavy-tailed: a median of a few sub-agents, a tail of tens (log-normal, clamped). */
export function burstSize(random: SeededRandom, spec: CodingWorkloadSpec["burstSize"]): number {
  const sigma = Math.log(spec.p90 / spec.median) / 1.2816;
  const drawn = Math.round(spec.median * Math.exp(sigma * normal(random)));
  return Math.min(spec.max, Math.max(spec.min, drawn));
}

function toolCall(random: SeededRandom, spec: CodingWorkloadSpec): CodingCall["message"] {
  const name = TOOLS[random.int(TOOLS.length)]!;
  return {
    kind: "tool",
    name,
    arguments: JSON.stringify({ path: `src/${prose(random, 12).replace(/\W/g, "_")}.ts` }),
    result: prose(random, between(random, spec.toolResultChars)),
  };
}

/**
 * The same spec and seed give the same sessions, prompts, calls and bursts; only `idPrefix` changes the ids, so
 * every condition of a study replays one workload.
 */
export function generateCodingWorkload(spec: CodingWorkloadSpec): CodingSessionPlan[] {
  const random = new SeededRandom(spec.seed);
  const systemPrompt = agentPrompt(random, spec.systemPromptChars, "an interactive coding agent");
  const subagentPrompt = agentPrompt(
    random,
    spec.subagentPromptChars,
    "a task agent working for another agent",
  );
  const sessions: CodingSessionPlan[] = [];
  for (let s = 0; s < spec.sessions; s++) {
    const count = between(random, spec.turns);
    const calls: CodingCall[] = [];
    for (let c = 0; c < count; c++) {
      const long = random.next() < spec.thinkSeconds.longShare;
      const opening = c === 0 ? spec.openingContextChars : undefined;
      calls.push({
        // The first call and the person's later requests are user turns; the rest carry a tool's result.
        message:
          c === 0 || long
            ? {
                kind: "user",
                text:
                  prose(random, 200 + random.int(600)) +
                  (opening === undefined ? "" : `\n${prose(random, between(random, opening))}`),
              }
            : toolCall(random, spec),
        replyTokens: between(random, spec.replyTokens),
        thinkMs:
          c === 0 ? 0 : uniformSeconds(random, long ? spec.thinkSeconds.long : spec.thinkSeconds.short),
      });
    }
    const session: CodingSessionPlan = {
      id: `${spec.idPrefix}-${String(s).padStart(3, "0")}`,
      systemPrompt,
      calls,
    };
    if (random.next() < spec.burstShare && count >= 3) {
      const third = Math.max(1, Math.floor(count / 3));
      const subagents = Array.from({ length: burstSize(random, spec.burstSize) }, () => ({
        calls: Array.from({ length: between(random, spec.subagentTurns) }, (_, i) => ({
          message:
            i === 0
              ? { kind: "user" as const, text: prose(random, 300 + random.int(500)) }
              : toolCall(random, spec),
          replyTokens: between(random, spec.replyTokens),
          thinkMs: i === 0 ? 0 : uniformSeconds(random, spec.subagentThinkSeconds),
        })),
      }));
      session.burst = { afterCall: third + random.int(third), subagents, systemPrompt: subagentPrompt };
    }
    sessions.push(session);
  }
  return sessions;
}
