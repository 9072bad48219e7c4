// The request that continues an answer on the next engine, per API: the conversation plus the answer so far as a
// prefill, as vLLM takes it (chat: a final assistant message with continue_final_message; Messages: a trailing
// assistant message; completions: prompt + text; Responses: as the chat request that renders its prompt), with
// max_tokens less what was generated already.
import { GatewayError } from "../../core/errors.js";
import type { Endpoint } from "../completion-request.js";
import { responsesAsChat } from "./responses-as-chat.js";
import { isRecord } from "./sse-events.js";
import type { AnswerTranscript } from "./transcript.js";

/**
 * @param firstBody what the first attempt would send this engine (its model id, the budget's output-limit clamp,
 *   the usage option): the continuation is that body plus the answer so far
 */
export function continuationBody(
  endpoint: Endpoint,
  firstBody: Buffer,
  transcript: AnswerTranscript,
): Buffer {
  const prefill = transcript.text;
  const parsed = JSON.parse(firstBody.toString("utf8")) as Record<string, unknown>;
  // The Responses API is continued through chat (responses-as-chat.ts).
  const body = endpoint === "responses" ? responsesAsChat(parsed) : parsed;
  // Nothing of the text to prefill (the cut came inside the first tool call): the engine answers again from the
  // start, and the splice relays only what extends the part the client holds.
  if (prefill === "") return endpoint === "responses" ? Buffer.from(JSON.stringify(body)) : firstBody;
  if (endpoint === "completions") {
    const prompt = body["prompt"];
    body["prompt"] = Array.isArray(prompt)
      ? [`${String(prompt[0])}${prefill}`]
      : `${String(prompt)}${prefill}`;
  } else if (endpoint === "chat" || endpoint === "responses") {
    // A client's own continue_final_message: its final assistant message is the start of this answer.
    const clientPrefill = body["continue_final_message"] === true;
    body["messages"] = withAssistantPrefill(body["messages"], prefill, "chat", clientPrefill);
    body["continue_final_message"] = true;
    body["add_generation_prompt"] = false;
  } else if (endpoint === "messages") {
    body["messages"] = withAssistantPrefill(body["messages"], prefill, "messages", true);
  } else {
    throw new GatewayError("internal_error", `no continuation for the ${endpoint} API`);
  }
  lowerMaxTokens(body, transcript.textEvents);
  return Buffer.from(JSON.stringify(body));
}

/**
 * The messages with the prefill as the final assistant message: appended to the client's own final assistant
 * message when there is one (a client's prefill, which the answer continues), else a new one.
 */
function withAssistantPrefill(
  messages: unknown,
  prefill: string,
  api: "chat" | "messages",
  lastIsPrefill: boolean,
): unknown[] {
  const list = Array.isArray(messages) ? [...(messages as unknown[])] : [];
  const last = list.at(-1);
  if (lastIsPrefill && isRecord(last) && last["role"] === "assistant") {
    const content = last["content"];
    if (typeof content === "string") {
      list[list.length - 1] = { ...last, content: content + prefill };
      return list;
    }
    if (Array.isArray(content)) {
      list[list.length - 1] = {
        ...last,
        content: [...(content as unknown[]), { type: "text", text: prefill }],
      };
      return list;
    }
  }
  list.push(
    api === "chat"
      ? { role: "assistant", content: prefill }
      : { role: "assistant", content: [{ type: "text", text: prefill }] },
  );
  return list;
}

/** The tokens already generated come off the limit (at least one token is left to generate). */
function lowerMaxTokens(body: Record<string, unknown>, generated: number): void {
  for (const field of ["max_tokens", "max_completion_tokens"]) {
    const limit = body[field];
    if (typeof limit === "number") body[field] = Math.max(1, limit - generated);
  }
}
