// The prompt text the re-implemented routers route by: SGLang's routing text, and the serialised prompt llm-d hashes.

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function partsText(content: unknown): string | undefined {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return undefined;
  const texts: string[] = [];
  for (const part of content)
    if (isRecord(part) && typeof part["text"] === "string") texts.push(part["text"]);
  return texts.join(" ");
}

function promptText(prompt: unknown): string {
  if (typeof prompt === "string") return prompt;
  if (Array.isArray(prompt)) return prompt.map((p) => (typeof p === "string" ? p : String(p))).join(" ");
  return "";
}

/**
 * sgl-router's `extract_text_for_routing`: a chat request's message texts joined by spaces (an assistant
 * message contributes its content and reasoning, and nothing when both are empty, as for a bare tool call);
 * a completion's prompt (an array joined by spaces); the Responses API's instructions and input text.
 */
export function routingText(endpoint: string, body: Record<string, unknown>): string {
  if (endpoint === "completions") return promptText(body["prompt"]);
  if (endpoint === "responses") {
    const input = body["input"];
    const instructions = typeof body["instructions"] === "string" ? body["instructions"] : "";
    const text = typeof input === "string" ? input : JSON.stringify(input ?? "");
    return instructions === "" ? text : `${instructions} ${text}`;
  }
  const messages = body["messages"];
  if (!Array.isArray(messages)) return "";
  const texts: string[] = [];
  // Anthropic Messages carry the system prompt beside the messages.
  const system = endpoint === "messages" ? partsText(body["system"]) : undefined;
  if (system !== undefined && system !== "") texts.push(system);
  for (const message of messages) {
    if (!isRecord(message)) continue;
    if (message["role"] === "assistant") {
      const content = partsText(message["content"]) ?? "";
      const reasoning = typeof message["reasoning_content"] === "string" ? message["reasoning_content"] : "";
      if (content !== "" || reasoning !== "") texts.push(`${content} ${reasoning}`.trim());
    } else {
      const text = partsText(message["content"]);
      if (text !== undefined) texts.push(text);
    }
  }
  return texts.join(" ");
}

/** What llm-d's prefix scorer hashes: a completion's prompt, else the JSON of the messages (or input). */
export function promptBytes(endpoint: string, body: Record<string, unknown>): string {
  if (endpoint === "completions") return promptText(body["prompt"]);
  const value = endpoint === "responses" ? body["input"] : body["messages"];
  return JSON.stringify(value ?? "");
}
