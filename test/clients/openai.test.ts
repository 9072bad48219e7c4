// The official openai SDK (6, and 7 through an npm alias) on the shared client cases.
import OpenAI from "openai";
// The aliased newer majors (openai-v7, ai-v7, ...) come from test/clients/package.json: `npm ci --prefix test/clients` (as .ci/run does).
import OpenAIv7 from "openai-v7";
import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionCreateParamsStreaming,
  ChatCompletionMessageParam,
  ChatCompletionTool,
} from "openai/resources/chat/completions";
import type { Response as ResponseObject, ResponseStreamEvent } from "openai/resources/responses/responses";
import {
  runClientCases,
  type AgentServeSeen,
  type ChatCall,
  type ClientLibrary,
  type Message,
  type RespondCall,
  type Target,
  type ToolCall,
  type ToolSpec,
  type TurnOutcome,
  type Usage,
} from "./cases.js";
import { installedVersion } from "./versions.js";

/** The gateway's metadata as it appears on a body, a chunk or an event. */
interface WithAgentServe {
  x_agent_serve?: { affinity_hit: boolean; session_id: string | null };
}

function seen(
  meta: WithAgentServe["x_agent_serve"],
  from: AgentServeSeen["from"],
): AgentServeSeen | undefined {
  return meta === undefined
    ? undefined
    : { affinityHit: meta.affinity_hit, sessionId: meta.session_id, from };
}

function client(OpenAIClass: typeof OpenAI, target: Target): OpenAI {
  // The SDK's own header option carries the session id.
  return new OpenAIClass({
    baseURL: target.baseURL,
    apiKey: "sk-local",
    maxRetries: 0,
    defaultHeaders: { "X-Session-Id": target.sessionId },
  });
}

export function toOpenAIMessages(messages: Message[]): ChatCompletionMessageParam[] {
  return messages.map((m): ChatCompletionMessageParam => {
    if (m.role === "tool") return { role: "tool", tool_call_id: m.toolCallId, content: m.content };
    if (m.role === "assistant" && m.toolCalls && m.toolCalls.length > 0) {
      return {
        role: "assistant",
        content: m.content === "" ? null : m.content,
        tool_calls: m.toolCalls.map((c) => ({
          id: c.id,
          type: "function",
          function: { name: c.name, arguments: c.arguments },
        })),
      };
    }
    return { role: m.role, content: m.content };
  });
}

function toOpenAITools(tools: ToolSpec[]): ChatCompletionTool[] {
  return tools.map((t) => ({
    type: "function",
    function: { name: t.name, description: t.description, parameters: t.parameters },
  }));
}

function usageOf(usage: ChatCompletion["usage"] | null | undefined): Usage | undefined {
  if (!usage) return undefined;
  const cached = usage.prompt_tokens_details?.cached_tokens;
  return {
    promptTokens: usage.prompt_tokens,
    completionTokens: usage.completion_tokens,
    ...(cached === undefined ? {} : { cachedTokens: cached }),
  };
}

function baseParams(target: Target, call: ChatCall): ChatCompletionCreateParamsNonStreaming {
  return {
    model: target.model,
    messages: toOpenAIMessages(call.messages),
    ...(call.tools ? { tools: toOpenAITools(call.tools) } : {}),
    ...(call.maxTokens === undefined ? {} : { max_tokens: call.maxTokens }),
  };
}

function streamParams(target: Target, call: ChatCall): ChatCompletionCreateParamsStreaming {
  return {
    ...baseParams(target, call),
    stream: true,
    ...(call.includeUsage ? { stream_options: { include_usage: true } } : {}),
  };
}

function completionOutcome(completion: ChatCompletion, agentServe: AgentServeSeen | undefined): TurnOutcome {
  const choice = completion.choices[0]!;
  const usage = usageOf(completion.usage);
  return {
    id: completion.id,
    text: choice.message.content ?? "",
    finishReason: choice.finish_reason,
    toolCalls: (choice.message.tool_calls ?? []).flatMap((c) =>
      c.type === "function" ? [{ id: c.id, name: c.function.name, arguments: c.function.arguments }] : [],
    ),
    ...(usage ? { usage } : {}),
    ...(agentServe ? { agentServe } : {}),
  };
}

/** Folds chunks the way a careful client does (tool calls by index, usage from whichever chunk has it). */
class ChunkFold {
  id = "";
  text = "";
  finishReason: string | undefined;
  usage: Usage | undefined;
  agentServe: AgentServeSeen | undefined;
  private readonly calls = new Map<number, ToolCall>();

  add(chunk: ChatCompletionChunk): void {
    if (this.id === "") this.id = chunk.id;
    this.agentServe ??= seen((chunk as WithAgentServe).x_agent_serve, "chunk");
    this.usage = usageOf(chunk.usage) ?? this.usage;
    const choice = chunk.choices[0];
    if (!choice) return;
    this.text += choice.delta.content ?? "";
    if (choice.finish_reason) this.finishReason = choice.finish_reason;
    for (const call of choice.delta.tool_calls ?? []) {
      const known = this.calls.get(call.index) ?? { id: "", name: "", arguments: "" };
      if (call.id) known.id = call.id;
      known.name += call.function?.name ?? "";
      known.arguments += call.function?.arguments ?? "";
      this.calls.set(call.index, known);
    }
  }

  outcome(): TurnOutcome {
    return {
      id: this.id,
      text: this.text,
      toolCalls: [...this.calls.entries()].sort((a, b) => a[0] - b[0]).map(([, c]) => c),
      ...(this.finishReason ? { finishReason: this.finishReason } : {}),
      ...(this.usage ? { usage: this.usage } : {}),
      ...(this.agentServe ? { agentServe: this.agentServe } : {}),
    };
  }
}

function responseOutcome(response: ResponseObject, agentServe: AgentServeSeen | undefined): TurnOutcome {
  const toolCalls: ToolCall[] = [];
  // output_text is a convenience the SDK adds to create()'s result only, not to a stream's final response.
  let text = "";
  for (const item of response.output) {
    if (item.type === "function_call") {
      toolCalls.push({ id: item.call_id, name: item.name, arguments: item.arguments });
    }
    if (item.type === "message") {
      for (const part of item.content) if (part.type === "output_text") text += part.text;
    }
  }
  const usage = response.usage;
  return {
    id: response.id,
    text,
    finishReason: response.status ?? "",
    toolCalls,
    ...(usage
      ? {
          usage: {
            promptTokens: usage.input_tokens,
            completionTokens: usage.output_tokens,
            cachedTokens: usage.input_tokens_details.cached_tokens,
          },
        }
      : {}),
    ...(agentServe ? { agentServe } : {}),
  };
}

export function openaiLibrary(name: string, OpenAIClass: typeof OpenAI): ClientLibrary {
  return {
    name,
    canStreamWithoutUsage: true,
    async chat(target, call) {
      const openai = client(OpenAIClass, target);
      if (!call.stream) {
        const completion = await openai.chat.completions.create(baseParams(target, call));
        return completionOutcome(completion, seen((completion as WithAgentServe).x_agent_serve, "body"));
      }
      const stream = await openai.chat.completions.create(streamParams(target, call));
      const fold = new ChunkFold();
      for await (const chunk of stream) fold.add(chunk);
      return fold.outcome();
    },
    async bareLoop(target, call) {
      const openai = client(OpenAIClass, target);
      // withResponse() exposes the raw HTTP response: the metadata headers are read from there.
      const { data: stream, response } = await openai.chat.completions
        .create(streamParams(target, call))
        .withResponse();
      let text = "";
      let id = "";
      for await (const c of stream) {
        // The loop most examples show: it assumes every chunk has a choice.
        text += c.choices[0]!.delta.content ?? "";
        id ||= c.id;
      }
      const hit = response.headers.get("x-agent-serve-affinity-hit");
      return {
        id,
        text,
        toolCalls: [],
        ...(hit === null
          ? {}
          : {
              agentServe: {
                affinityHit: hit === "true",
                sessionId: response.headers.get("x-agent-serve-session-id"),
                from: "header",
              },
            }),
      };
    },
    async streamHelper(target, call) {
      const openai = client(OpenAIClass, target);
      const runner = openai.chat.completions.stream(streamParams(target, call));
      let agentServe: AgentServeSeen | undefined;
      runner.on("chunk", (chunk) => {
        agentServe ??= seen((chunk as WithAgentServe).x_agent_serve, "chunk");
      });
      return completionOutcome(await runner.finalChatCompletion(), agentServe);
    },
    async respond(target: Target, call: RespondCall) {
      const openai = client(OpenAIClass, target);
      const params = {
        model: target.model,
        input: call.input,
        store: true,
        max_output_tokens: call.maxTokens,
        ...(call.previousResponseId === undefined ? {} : { previous_response_id: call.previousResponseId }),
      };
      if (!call.stream) {
        const response = await openai.responses.create(params);
        return responseOutcome(response, seen((response as WithAgentServe).x_agent_serve, "body"));
      }
      const stream = await openai.responses.create({ ...params, stream: true });
      let final: ResponseObject | undefined;
      let agentServe: AgentServeSeen | undefined;
      for await (const event of stream as AsyncIterable<ResponseStreamEvent>) {
        if (event.type === "response.completed") {
          final = event.response;
          agentServe = seen(
            (event as WithAgentServe).x_agent_serve ?? (event.response as WithAgentServe).x_agent_serve,
            "event",
          );
        }
      }
      if (!final) throw new Error("the stream ended without response.completed");
      return responseOutcome(final, agentServe);
    },
  };
}

runClientCases(openaiLibrary(`openai ${installedVersion("openai")}`, OpenAI));
// openai 7 declares Node >= 22; it is run here on Node 20 to show whether it works anyway.
runClientCases(
  openaiLibrary(`openai ${installedVersion("openai-v7")}`, OpenAIv7 as unknown as typeof OpenAI),
);
