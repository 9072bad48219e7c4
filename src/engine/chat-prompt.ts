// Renders chat messages to prompt token ids in ChatML, each piece tokenized on its own.
//
// Tokenizing message by message (never the whole conversation as one string) makes a conversation's ids a prefix
// of the ids of every longer conversation that starts with it: what prefix caching needs. Message text is never
// parsed for special tokens, so a user cannot forge a turn marker.
import type { ChatMessage } from "../surface/chat-messages.js";
import type { LlamaModel } from "./llama-binding.js";

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

  private turn(out: number[], role: string, content: string): void {
    out.push(...this.imStart, ...this.model.tokenize(`${role}\n`));
    if (content.length > 0) out.push(...this.model.tokenize(content));
    out.push(...this.imEnd, ...this.newline);
  }

  render(messages: readonly ChatMessage[], tools: readonly unknown[] | undefined): number[] {
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
    out.push(...this.imStart, ...this.model.tokenize("assistant\n"));
    return out;
  }
}
