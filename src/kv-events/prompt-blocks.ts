// A prompt's block content keys, as an engine's index keys what it holds: the token ids the engine would compute,
// cut into full blocks and chained (src/kv-events/engine-index.ts).
//
// The token ids come from the simulator's own path (its request parsers, chat template and tokenizer), so for a
// simulated engine they are exactly the ids it caches. A real vLLM tokenizes with its model's tokenizer, which the
// gateway does not have: its blocks never match these keys, and placement falls back to what the engine's events
// say of the request's session (EngineIndex.sessionBlocks). docs/kv-events.md says why and what that costs.
import type { Endpoint } from "../gateway/completion-request.js";
import { hashBlock } from "../sim/block-hash.js";
import { renderChat } from "../sim/chat-template.js";
import { parseMessagesRequest, promptTools } from "../surface/messages-request.js";
import { parseChatRequest, parseCompletionRequest } from "../surface/request-parser.js";
import { encode } from "../sim/tokenizer.js";
import { rootKeyOf } from "./engine-index.js";

export interface PromptBlocks {
  /** The prompt's length in tokens. */
  readonly promptTokens: number;
  /** Content keys of its reusable full blocks (never the block holding the last token), in order. */
  readonly keys: Float64Array;
  readonly blockSizeTokens: number;
  /**
   * The prompt opens a conversation: it carries no earlier answer (system, tools, user messages only), so what an
   * engine holds of it is an opening other conversations may share, never this conversation's own turns. False
   * or absent where that is not known (a raw completions prompt, another replica's send).
   */
  readonly opensConversation?: boolean;
}

/** A rendered prompt: its token ids, its cache salt, and whether it opens a conversation (PromptBlocks). */
export interface RenderedPrompt {
  readonly tokens: number[];
  readonly cacheSalt: string | undefined;
  readonly opensConversation: boolean;
}

/** No earlier answer among the messages: no assistant turn and no tool result. */
function opensConversation(messages: readonly { role: string }[]): boolean {
  return messages.every((m) => m.role !== "assistant" && m.role !== "tool" && m.role !== "function");
}

/** The prompt's token ids as the simulated engine renders them, or undefined (another API, invalid, several prompts). */
export function simulatedPromptTokens(
  endpoint: Endpoint,
  body: Record<string, unknown>,
): RenderedPrompt | undefined {
  try {
    switch (endpoint) {
      case "chat": {
        const request = parseChatRequest(body);
        const tokens = renderChat(request.messages, {
          tools: request.tools,
          addGenerationPrompt: request.addGenerationPrompt,
        });
        return {
          tokens,
          cacheSalt: request.cacheSalt,
          opensConversation: opensConversation(request.messages),
        };
      }
      case "completions": {
        const request = parseCompletionRequest(body);
        const [prompt] = request.prompts;
        if (request.prompts.length !== 1 || prompt === undefined) return undefined;
        return {
          tokens: typeof prompt === "string" ? encode(prompt) : prompt,
          cacheSalt: request.cacheSalt,
          opensConversation: false,
        };
      }
      case "messages": {
        const request = parseMessagesRequest(body);
        return {
          tokens: renderChat(request.messages, { tools: promptTools(request) }),
          cacheSalt: undefined,
          opensConversation: opensConversation(request.messages),
        };
      }
      default:
        // The Responses API's prompt may continue a stored response the gateway never saw.
        return undefined;
    }
  } catch {
    return undefined;
  }
}

/** The content keys of a prompt's reusable full blocks. */
export function promptBlocksOf(
  tokens: readonly number[],
  blockSizeTokens: number,
  cacheSalt: string | undefined,
  opensConversation = false,
): PromptBlocks {
  const count = tokens.length <= 1 ? 0 : Math.floor((tokens.length - 1) / blockSizeTokens);
  const keys = new Float64Array(count);
  let parent = rootKeyOf(cacheSalt === undefined ? null : [cacheSalt]);
  for (let index = 0; index < count; index++) {
    parent = hashBlock(parent, tokens, index * blockSizeTokens, blockSizeTokens);
    keys[index] = parent;
  }
  return { promptTokens: tokens.length, keys, blockSizeTokens, opensConversation };
}

/** A request's prompt blocks, computed once per block size (placement asks per attempt). */
export class LazyPromptBlocks {
  private computed: PromptBlocks | null | undefined; // null: computed, and there are none

  constructor(
    private readonly endpoint: Endpoint,
    private readonly body: Record<string, unknown>,
  ) {}

  of(blockSizeTokens: number): PromptBlocks | undefined {
    if (
      this.computed === undefined ||
      (this.computed !== null && this.computed.blockSizeTokens !== blockSizeTokens)
    ) {
      const prompt = simulatedPromptTokens(this.endpoint, this.body);
      this.computed =
        prompt === undefined
          ? null
          : promptBlocksOf(prompt.tokens, blockSizeTokens, prompt.cacheSalt, prompt.opensConversation);
    }
    return this.computed ?? undefined;
  }
}
