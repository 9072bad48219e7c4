// One user turn of a tool-using agent: model, tool calls, tool results, model ... until a text answer.
import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";
import type { ChatModel, ModelStep } from "./model-call.js";
import type { ToolCallRecord, Toolbox } from "./toolbox.js";

export interface TurnRecord {
  /** 1-based. */
  turn: number;
  steps: ModelStep[];
  toolCalls: ToolCallRecord[];
  answer: string;
  /** Ended with a text answer (not by a failed model call). */
  completed: boolean;
  error?: string;
}

export interface TurnOptions {
  model: ChatModel;
  toolbox: Toolbox;
  /** Model calls one turn may make; the last one is told to answer without tools. */
  maxSteps: number;
  /** Called after every model call (the live view). */
  onStep?: (step: ModelStep, calls: readonly ToolCallRecord[]) => void;
}

/**
 * Appends the user's message and everything the turn produces to `history` (the conversation the next turn
 * continues, so the prompt prefix only grows: what makes a session's engine cache pay off).
 */
export async function runTurn(
  history: ChatCompletionMessageParam[],
  userMessage: string,
  turn: number,
  options: TurnOptions,
): Promise<TurnRecord> {
  const record: TurnRecord = { turn, steps: [], toolCalls: [], answer: "", completed: false };
  history.push({ role: "user", content: userMessage });
  const tools = options.toolbox.definitions();
  for (let stepIndex = 1; stepIndex <= options.maxSteps; stepIndex++) {
    const step = await options.model({
      messages: history,
      tools,
      toolChoice: stepIndex === options.maxSteps ? "none" : "auto",
    });
    record.steps.push(step);
    if (step.error !== undefined) {
      options.onStep?.(step, []);
      record.error = step.error;
      return record;
    }
    if (step.toolCalls.length === 0) {
      history.push({ role: "assistant", content: step.content });
      options.onStep?.(step, []);
      record.answer = step.content;
      record.completed = true;
      return record;
    }
    history.push({
      role: "assistant",
      content: step.content === "" ? null : step.content,
      tool_calls: step.toolCalls.map((call) => ({
        id: call.id,
        type: "function",
        function: { name: call.name, arguments: call.arguments },
      })),
    });
    const calls: ToolCallRecord[] = [];
    // One after another, as the model listed them: a later call may depend on an earlier one's effect.
    for (const call of step.toolCalls) {
      const result = await options.toolbox.call(call.name, call.arguments);
      calls.push(result.record);
      history.push({ role: "tool", tool_call_id: call.id, content: result.output });
    }
    record.toolCalls.push(...calls);
    options.onStep?.(step, calls);
  }
  // Only reached when the last step still asked for tools despite tool_choice "none".
  record.error = `no text answer within ${options.maxSteps} model calls`;
  return record;
}
