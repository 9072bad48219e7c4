// Seeded agent workloads: sessions of turns with a shared system prompt, user turns, tool calls, think time.
import { SeededRandom } from "../core/random.js";

export interface ToolCallStep {
  /** The assistant's tool call that ends this turn's reply, then the tool's result as the next message. */
  name: string;
  arguments: string;
  result: string;
}

export interface TurnPlan {
  userMessage: string;
  /** When set, the turn is a tool round: the history gains the call and its result after the reply. */
  toolCall?: ToolCallStep;
  maxTokens: number;
}

export interface SessionPlan {
  /** Stable within a run; includes the run id so that runs never share bindings on a long-lived gateway. */
  id: string;
  systemPrompt: string;
  turns: TurnPlan[];
  /** Pause between receiving a reply and sending the next turn (an agent thinking or running a tool). */
  thinkTimeMs: number;
}

export interface WorkloadSpec {
  seed: number;
  sessions: number;
  /** Turns per session: a fixed count, or an inclusive range drawn per session. */
  turns: number | { min: number; max: number };
  systemPromptChars: number;
  /** One system prompt for every session (the original's study), or one per session. */
  sharedSystemPrompt: boolean;
  userChars: number;
  maxTokens: number;
  /** Probability that a turn (after the first) is a tool round. */
  toolCallRate: number;
  /** Characters of a tool's result: file contents, search hits, program output. */
  toolResultChars?: { min: number; max: number };
  thinkTimeMs: number;
  /** Prefix of session ids, e.g. the run id and the condition. */
  idPrefix: string;
}

const WORDS = (
  "agent plan step tool call result search corpus file read write python run calculate answer check " +
  "verify context prompt token cache block engine request session reply summary detail error retry " +
  "metric latency budget queue schedule backend tier model gateway stream chunk report table value " +
  "document section policy rule example instruction constraint format output input list item note"
).split(" ");

const TOOLS = ["read_file", "search_corpus", "run_python", "calculator"] as const;

/** Deterministic prose of exactly `chars` characters from the seeded source. */
export function prose(random: SeededRandom, chars: number): string {
  let text = "";
  while (text.length < chars) {
    const sentence = Array.from({ length: 6 + random.int(10) }, () => WORDS[random.int(WORDS.length)]!).join(
      " ",
    );
    text += sentence.charAt(0).toUpperCase() + sentence.slice(1) + ". ";
  }
  return text.slice(0, chars);
}

function systemPromptFor(random: SeededRandom, chars: number): string {
  const tools = TOOLS.map((name) => `- ${name}(args): ${prose(random, 60)}`).join("\n");
  const head = `You are an autonomous agent. Use the tools below when needed.\nTools:\n${tools}\nInstructions: `;
  return head + prose(random, Math.max(0, chars - head.length));
}

/**
 * The same spec and seed always give the same sessions, prompts and order. Only `idPrefix` (which names the
 * run) changes the ids.
 */
export function generateWorkload(spec: WorkloadSpec): SessionPlan[] {
  const random = new SeededRandom(spec.seed);
  const resultChars = spec.toolResultChars ?? { min: 200, max: 600 };
  const shared = spec.sharedSystemPrompt ? systemPromptFor(random, spec.systemPromptChars) : undefined;
  const sessions: SessionPlan[] = [];
  for (let s = 0; s < spec.sessions; s++) {
    const turnCount =
      typeof spec.turns === "number"
        ? spec.turns
        : spec.turns.min + random.int(spec.turns.max - spec.turns.min + 1);
    const systemPrompt = shared ?? systemPromptFor(random, spec.systemPromptChars);
    const turns: TurnPlan[] = [];
    for (let t = 0; t < turnCount; t++) {
      const turn: TurnPlan = { userMessage: prose(random, spec.userChars), maxTokens: spec.maxTokens };
      if (t > 0 && random.next() < spec.toolCallRate) {
        const name = TOOLS[random.int(TOOLS.length)]!;
        turn.toolCall = {
          name,
          arguments: JSON.stringify({ query: prose(random, 40) }),
          result: prose(random, resultChars.min + random.int(resultChars.max - resultChars.min + 1)),
        };
      }
      turns.push(turn);
    }
    sessions.push({
      id: `${spec.idPrefix}-${String(s).padStart(4, "0")}`,
      systemPrompt,
      turns,
      thinkTimeMs: spec.thinkTimeMs,
    });
  }
  return sessions;
}
