// A chat conversation as both engines read it from a request (OpenAI chat and Anthropic Messages alike).

export interface ChatToolCall {
  id?: string;
  type?: string;
  function: { name: string; arguments: string };
}

export interface ChatMessage {
  role: "system" | "developer" | "user" | "assistant" | "tool" | "function";
  /** Text of the message; parts were already joined by the request parser. */
  content: string;
  toolCalls?: ChatToolCall[];
}
