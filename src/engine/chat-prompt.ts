// Renders chat messages to prompt token ids in ChatML, each piece tokenized on its own.
//
// Tokenizing message by message (never the whole conversation as one string) makes a conversation's ids a prefix
// of the ids of every longer conversation that starts with it: what prefix caching needs. Message text is never
// parsed for special tokens, so a user cannot forge a turn marker.
//
// vLLM's continue_final_message (and an Anthropic prefill) leaves the final assistant message open: its text is
// the prompt's end, with no end-of-turn and no new assistant header, as Hugging Face's apply_chat_template cuts
// the rendered chat right after that message's content. The open text is tokenized as one piece, so the prompt
// is the one the engine had when it generated that text only where the text re-tokenizes to the ids it was
// generated as (docs/real-engine.md, "Continuing an answer").
import type { ChatMessage } from "../surface/chat-messages.js";
import type { LlamaModel } from "./llama-binding.js";

export interface ChatRenderOptions {
  addGenerationPrompt?: boolean;
  continueFinalMessage?: boolean;
}

const IM_START = "<|im_start|>";
const IM_END = "<|im_end|>";

export class ChatPrompt {
  private readonly imStart: number[];
  private readonly imEnd: number[];
  private readonly newline: number[];

  constructor(private readonly model: LlamaModel) {
    // A model without ChatML control tokens still gets the same layout, as plain text.
    this.imStart = this.special(IM_START);
    this.imEnd = this.special(IM_END);
    this.newline = model.tokenize("\n");
  }

  private special(marker: string): number[] {
    const ids = this.model.tokenize(marker, true);
    return ids.length === 1 ? ids : this.model.tokenize(marker);
  }

  /** One turn; an `open` one (a continued final message) ends with its text. */
  private turn(out: number[], role: string, content: string, open = false): void {
    out.push(...this.imStart, ...this.model.tokenize(`${role}\n`));
    if (content.length > 0) out.push(...this.model.tokenize(content));
    if (!open) out.push(...this.imEnd, ...this.newline);
  }

  /**
   * @param options vLLM's add_generation_prompt (default true: the prompt ends with a new assistant header) and
   *   continue_final_message (default false: the final message, an assistant's, is left open and goes on)
   */
  render(
    messages: readonly ChatMessage[],
    tools: readonly unknown[] | undefined,
    options: ChatRenderOptions = {},
  ): number[] {
    const out: number[] = [];
    const toolsText =
      tools && tools.length > 0
        ? `\n\n# Tools\n\n<tools>\n${tools.map((tool) => JSON.stringify(tool)).join("\n")}\n</tools>`
        : "";
    const first = messages[0];
    if (toolsText && first?.role !== "system" && first?.role !== "developer")
      this.turn(out, "system", toolsText);
    messages.forEach((message, index) => {
      switch (message.role) {
        case "system":
        case "developer":
          this.turn(out, "system", index === 0 ? message.content + toolsText : message.content);
          break;
        case "assistant": {
          const calls = (message.toolCalls ?? []).map(
            (call) =>
              `<tool_call>\n${JSON.stringify({ name: call.function.name, arguments: call.function.arguments })}\n</tool_call>`,
          );
          this.turn(
            out,
            "assistant",
            [message.content, ...calls].filter((part) => part.length > 0).join("\n"),
            options.continueFinalMessage === true && index === messages.length - 1,
          );
          break;
        }
        case "tool":
        case "function":
          this.turn(out, "user", `<tool_response>\n${message.content}\n</tool_response>`);
          break;
        default:
          this.turn(out, "user", message.content);
      }
    });
    if (options.addGenerationPrompt ?? true) out.push(...this.imStart, ...this.model.tokenize("assistant\n"));
    return out;
  }
}
