// Decides what a chat choice will say before it is generated: a tool call, structured JSON, or pseudo-text.
import { SeededRandom } from "../core/random.js";
import { replySeed } from "./request-factory.js";
import { structuredText, type OutputFormat } from "./structured-output.js";
import { mixSeed } from "./text-generator.js";
import {
  planToolCalls,
  type ToolCallPlan,
  type ToolCallRates,
  type ToolChoice,
  type ToolFunction,
} from "./tool-calls.js";
import type { ChatMessage } from "./chat-template.js";
import type { SimScript } from "./script.js";
import { scriptedReply } from "./script-player.js";

/** Salts the reply seed so tool and JSON draws do not reuse the pseudo-text's random stream. */
const PLAN_SALT = 0x746f6f6c;

/** What a chat request says about its reply, in either API. */
export interface ReplyRequest {
  messages: readonly ChatMessage[];
  toolFunctions: readonly ToolFunction[];
  toolChoice: ToolChoice;
  parallelToolCalls: boolean;
  outputFormat: OutputFormat;
}

export interface ReplyScript {
  /** The exact reply text (the engine generates its tokens, then end-of-turn). */
  text: string;
  /** Set when the text is a tool call the parser turns into `tool_calls`. */
  toolPlan?: ToolCallPlan;
}

/**
 * The scripted reply of one choice, or undefined for pseudo-text; the same prompt and seed give the same plan. With
 * a `--script`, its turn comes first (see script-player.ts).
 */
export function planChatReply(
  request: ReplyRequest,
  rates: ToolCallRates,
  seedInput: { promptTokenIds: readonly number[]; seed: number; choiceIndex: number },
  script?: SimScript,
): ReplyScript | undefined {
  if (script) {
    const turn = scriptedReply(script, request);
    if (turn) return turn;
  }
  const offersTools = request.toolFunctions.length > 0 && request.toolChoice !== "none";
  // The common case (no tools, free text) skips the prompt hash: it is the hot path of every plain request.
  if (!offersTools && request.outputFormat.kind === "text") return undefined;
  const random = new SeededRandom(mixSeed(replySeed(seedInput), PLAN_SALT));
  const last = request.messages[request.messages.length - 1];
  const toolPlan = planToolCalls(
    {
      tools: request.toolFunctions,
      choice: request.toolChoice,
      afterToolResult: last !== undefined && (last.role === "tool" || last.role === "function"),
      parallelAllowed: request.parallelToolCalls,
      rates,
    },
    random,
  );
  if (toolPlan) return { text: toolPlan.text, toolPlan };
  const json = structuredText(request.outputFormat, random);
  return json === undefined ? undefined : { text: json };
}
