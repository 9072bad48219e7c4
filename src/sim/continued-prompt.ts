// A chat prompt, and what decides its reply: with vLLM's continue_final_message (or an Anthropic prefill) the
// final assistant message is left open and the reply goes on from it. A real engine decoding greedily goes on
// with the very answer it would have given without the open part; the simulator does the same: the reply is
// drawn for the prompt without that part, and its first tokens (those the open message already holds) are skipped.
import { assistantText, renderChat, type ChatMessage } from "./chat-template.js";
import { encode } from "./tokenizer.js";

export interface ChatPrompt {
  /** The prompt the engine computes (and caches): the open final message included. */
  promptTokenIds: number[];
  /** The prompt whose reply this is: without the open message, with the generation prompt. */
  seedPromptTokenIds: number[];
  /** The messages the reply plan reads (the open message aside). */
  planMessages: readonly ChatMessage[];
  /** Reply tokens the open message holds already: the reply goes on after them. */
  skipTokens: number;
}

export function chatPrompt(
  messages: readonly ChatMessage[],
  tools: unknown[] | undefined,
  options: { addGenerationPrompt: boolean; continueFinalMessage: boolean },
): ChatPrompt {
  const promptTokenIds = renderChat(messages, { tools, ...options });
  const open = messages[messages.length - 1];
  if (!options.continueFinalMessage || open === undefined || open.role !== "assistant") {
    return { promptTokenIds, seedPromptTokenIds: promptTokenIds, planMessages: messages, skipTokens: 0 };
  }
  const planMessages = messages.slice(0, -1);
  return {
    promptTokenIds,
    seedPromptTokenIds: renderChat(planMessages, { tools, addGenerationPrompt: true }),
    planMessages,
    skipTokens: encode(assistantText(open)).length,
  };
}
