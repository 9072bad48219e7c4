// Test fixture for receipts: conversations that grow turn by turn, and the receipt read from an answer.
import { expect } from "vitest";
import { SMALL_MODEL } from "../helpers/cluster.js";

export type Message = { role: string; content: string };

export interface Receipted {
  status: number;
  backend: string;
  reason: string;
  reply: string;
  usage: {
    prompt_tokens: number;
    completion_tokens: number;
    prompt_tokens_details?: { cached_tokens: number };
  };
  receipt: { reusable_tokens: number; cached_tokens: number; lost_tokens: number; lost_cause: string };
  headers: Headers;
}

/** Whole 16-token blocks of a sequence less its last token: what an engine can serve of it again. */
export function reusableOf(tokens: number): number {
  return Math.floor((tokens - 1) / 16) * 16;
}

/** One non-streaming chat turn; fails the test unless the answer is a 200 with a receipt. */
export async function turn(
  url: string,
  session: string | undefined,
  messages: Message[],
  extra: { model?: string; headers?: Record<string, string>; maxTokens?: number } = {},
): Promise<Receipted> {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(session === undefined ? {} : { "x-session-id": session }),
      ...extra.headers,
    },
    body: JSON.stringify({ model: extra.model ?? SMALL_MODEL, messages, max_tokens: extra.maxTokens ?? 12 }),
  });
  const text = await response.text();
  expect(response.status, text).toBe(200);
  const json = JSON.parse(text) as {
    choices: { message: { content: string } }[];
    usage: Receipted["usage"];
    x_agent_serve: Receipted["receipt"] & { backend_id: string; reason: string };
  };
  const meta = json.x_agent_serve;
  return {
    status: response.status,
    backend: meta.backend_id,
    reason: meta.reason,
    reply: json.choices[0]!.message.content,
    usage: json.usage,
    receipt: {
      reusable_tokens: meta.reusable_tokens,
      cached_tokens: meta.cached_tokens,
      lost_tokens: meta.lost_tokens,
      lost_cause: meta.lost_cause,
    },
    headers: response.headers,
  };
}

/** The conversation after a turn: its messages, the reply, and the next user message. */
export function extend(messages: Message[], answered: Receipted, next: string): Message[] {
  return [...messages, { role: "assistant", content: answered.reply }, { role: "user", content: next }];
}

export function tokensOf(answered: Receipted): number {
  return answered.usage.prompt_tokens + answered.usage.completion_tokens;
}

export const SYSTEM: Message = {
  role: "system",
  content: "You are a careful coding agent. Read the files you are given and answer briefly. ".repeat(4),
};
