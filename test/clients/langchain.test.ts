// LangChain JS (@langchain/openai's ChatOpenAI, Chat Completions and Responses) on the shared client cases.
import {
  AIMessage,
  AIMessageChunk,
  HumanMessage,
  SystemMessage,
  ToolMessage,
} from "@langchain/core/messages";
import type { BaseMessage } from "@langchain/core/messages";
import { ChatOpenAI } from "@langchain/openai";
import {
  runClientCases,
  type AgentServeSeen,
  type ChatCall,
  type Message,
  type RespondCall,
  type Target,
  type TurnOutcome,
  type Usage,
} from "./cases.js";
import { installedVersion } from "./versions.js";

interface WithAgentServe {
  x_agent_serve?: { affinity_hit: boolean; session_id: string | null };
  response?: WithAgentServe;
}

/** With `__includeRawResponse`, ChatOpenAI keeps the raw body or chunk in `additional_kwargs.__raw_response`. */
function seenIn(message: BaseMessage, from: AgentServeSeen["from"]): AgentServeSeen | undefined {
  const raw = message.additional_kwargs["__raw_response"] as WithAgentServe | undefined;
  const meta = raw?.x_agent_serve ?? raw?.response?.x_agent_serve;
  return meta === undefined
    ? undefined
    : { affinityHit: meta.affinity_hit, sessionId: meta.session_id, from };
}

/**
 * ChatOpenAI's Responses path keeps no raw body or event; the openai client it builds takes a `fetch`, which sees
 * the X-Agent-Serve-* headers of each response.
 */
function headerRecorder(seen: AgentServeSeen[]): typeof fetch {
  return async (input, init) => {
    const response = await fetch(input, init);
    const hit = response.headers.get("x-agent-serve-affinity-hit");
    if (hit !== null) {
      const sessionId = response.headers.get("x-agent-serve-session-id");
      seen.push({ affinityHit: hit === "true", sessionId, from: "header" });
    }
    return response;
  };
}

function model(
  target: Target,
  options: { maxTokens?: number; streamUsage?: boolean; responses?: boolean; fetch?: typeof fetch },
): ChatOpenAI {
  return new ChatOpenAI({
    model: target.model,
    apiKey: "sk-local",
    maxRetries: 0,
    // LangChain hands `configuration` to the openai client: its defaultHeaders carry the session id.
    configuration: {
      baseURL: target.baseURL,
      defaultHeaders: { "X-Session-Id": target.sessionId },
      ...(options.fetch ? { fetch: options.fetch } : {}),
    },
    __includeRawResponse: true,
    ...(options.maxTokens === undefined ? {} : { maxTokens: options.maxTokens }),
    ...(options.streamUsage === undefined ? {} : { streamUsage: options.streamUsage }),
    ...(options.responses ? { useResponsesApi: true } : {}),
  });
}

function toLangChain(messages: Message[]): BaseMessage[] {
  return messages.map((m) => {
    switch (m.role) {
      case "system":
        return new SystemMessage(m.content);
      case "user":
        return new HumanMessage(m.content);
      case "tool":
        return new ToolMessage({ content: m.content, tool_call_id: m.toolCallId });
      case "assistant":
        return new AIMessage({
          content: m.content,
          tool_calls: (m.toolCalls ?? []).map((c) => ({
            id: c.id,
            name: c.name,
            args: JSON.parse(c.arguments) as Record<string, unknown>,
            type: "tool_call" as const,
          })),
        });
    }
  });
}

function usageOf(message: AIMessage): Usage | undefined {
  const usage = message.usage_metadata;
  if (!usage) return undefined;
  const cached = usage.input_token_details?.cache_read;
  return {
    promptTokens: usage.input_tokens,
    completionTokens: usage.output_tokens,
    ...(cached === undefined ? {} : { cachedTokens: cached }),
  };
}

function outcome(message: AIMessage, id: string, agentServe: AgentServeSeen | undefined): TurnOutcome {
  const usage = usageOf(message);
  const finish = message.response_metadata["finish_reason"] ?? message.response_metadata["status"];
  return {
    id,
    text: typeof message.content === "string" ? message.content : message.text,
    ...(typeof finish === "string" ? { finishReason: finish } : {}),
    toolCalls: (message.tool_calls ?? []).map((c) => ({
      id: c.id ?? "",
      name: c.name,
      arguments: JSON.stringify(c.args),
    })),
    ...(usage ? { usage } : {}),
    ...(agentServe ? { agentServe } : {}),
  };
}

async function streamed(
  chat: ChatOpenAI,
  input: BaseMessage[] | string,
  options: Record<string, unknown>,
): Promise<{ message: AIMessageChunk; agentServe: AgentServeSeen | undefined }> {
  let message: AIMessageChunk | undefined;
  let agentServe: AgentServeSeen | undefined;
  for await (const chunk of await chat.stream(input, options)) {
    agentServe ??= seenIn(chunk, "chunk");
    message = message === undefined ? chunk : message.concat(chunk);
  }
  if (!message) throw new Error("empty stream");
  return { message, agentServe };
}

const library = {
  name: `@langchain/openai ${installedVersion("@langchain/openai")} (@langchain/core ${installedVersion("@langchain/core")})`,
  canStreamWithoutUsage: true,
  async chat(target: Target, call: ChatCall): Promise<TurnOutcome> {
    const base = model(target, {
      ...(call.maxTokens === undefined ? {} : { maxTokens: call.maxTokens }),
      streamUsage: call.includeUsage,
    });
    const chat = call.tools
      ? base.bindTools(
          call.tools.map((t) => ({
            type: "function" as const,
            function: { name: t.name, description: t.description, parameters: t.parameters },
          })),
        )
      : base;
    const messages = toLangChain(call.messages);
    if (!call.stream) {
      const message = await chat.invoke(messages);
      return outcome(message, message.id ?? "", seenIn(message, "body"));
    }
    let message: AIMessageChunk | undefined;
    let agentServe: AgentServeSeen | undefined;
    for await (const chunk of await chat.stream(messages)) {
      agentServe ??= seenIn(chunk, "chunk");
      message = message === undefined ? chunk : message.concat(chunk);
    }
    if (!message) throw new Error("empty stream");
    return outcome(message, message.id ?? "", agentServe);
  },
  async respond(target: Target, call: RespondCall): Promise<TurnOutcome> {
    const seen: AgentServeSeen[] = [];
    const chat = model(target, { maxTokens: call.maxTokens, responses: true, fetch: headerRecorder(seen) });
    const options =
      call.previousResponseId === undefined ? {} : { previous_response_id: call.previousResponseId };
    const message = call.stream
      ? (await streamed(chat, call.input, options)).message
      : await chat.invoke(call.input, options);
    return outcome(message, String(message.response_metadata["id"] ?? message.id), seen[0]);
  },
};

runClientCases(library);
