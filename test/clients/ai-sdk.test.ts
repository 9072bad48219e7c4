// The Vercel AI SDK (ai 6, and 7 through npm aliases) with @ai-sdk/openai-compatible and @ai-sdk/openai.
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import * as ai6 from "ai";
import type { JSONSchema7, LanguageModel, ModelMessage, ToolSet } from "ai";
// The aliased newer majors (openai-v7, ai-v7, ...) come from test/clients/package.json: `npm ci --prefix test/clients` (as .ci/run does).
import * as ai7 from "ai-v7";
import { createOpenAI as createOpenAIv4 } from "ai-sdk-openai-v4";
import { createOpenAICompatible as createOpenAICompatibleV3 } from "ai-sdk-openai-compatible-v3";
import {
  runClientCases,
  type AgentServeSeen,
  type ChatCall,
  type ClientLibrary,
  type Message,
  type Target,
  type ToolSpec,
  type TurnOutcome,
  type Usage,
} from "./cases.js";
import { installedVersion } from "./versions.js";

type Ai = typeof ai6;

interface WithAgentServe {
  x_agent_serve?: { affinity_hit: boolean; session_id: string | null };
  response?: WithAgentServe;
}

function seenIn(raw: unknown, from: AgentServeSeen["from"]): AgentServeSeen | undefined {
  if (typeof raw !== "object" || raw === null) return undefined;
  const holder = raw as WithAgentServe;
  const meta = holder.x_agent_serve ?? holder.response?.x_agent_serve;
  return meta === undefined
    ? undefined
    : { affinityHit: meta.affinity_hit, sessionId: meta.session_id, from };
}

type Major = 6 | 7;

/** ai 6 takes the system prompt as `system`; ai 7 refuses system messages and takes `instructions`. */
function systemPrompt(messages: Message[], major: Major): Record<string, string> {
  const system = messages.filter((m) => m.role === "system").map((m) => m.content);
  return system.length === 0 ? {} : { [major === 6 ? "system" : "instructions"]: system.join("\n") };
}

function toModelMessages(messages: Message[]): ModelMessage[] {
  return messages.flatMap((m): ModelMessage[] => (m.role === "system" ? [] : [toModelMessage(m)]));
}

function toModelMessage(m: Message): ModelMessage {
  switch (m.role) {
    case "system":
      return { role: "system", content: m.content };
    case "user":
      return { role: "user", content: m.content };
    case "tool":
      return {
        role: "tool",
        content: [
          {
            type: "tool-result",
            toolCallId: m.toolCallId,
            toolName: m.toolName,
            output: { type: "text", value: m.content },
          },
        ],
      };
    case "assistant":
      if (!m.toolCalls || m.toolCalls.length === 0) return { role: "assistant", content: m.content };
      return {
        role: "assistant",
        content: [
          ...(m.content === "" ? [] : [{ type: "text" as const, text: m.content }]),
          ...m.toolCalls.map((c) => ({
            type: "tool-call" as const,
            toolCallId: c.id,
            toolName: c.name,
            input: JSON.parse(c.arguments) as unknown,
          })),
        ],
      };
  }
}

function toToolSet(ai: Ai, tools: ToolSpec[] | undefined): ToolSet | undefined {
  if (!tools) return undefined;
  return Object.fromEntries(
    tools.map((t) => [
      t.name,
      ai.tool({ description: t.description, inputSchema: ai.jsonSchema(t.parameters as JSONSchema7) }),
    ]),
  );
}

function usageOf(usage: ai6.LanguageModelUsage): Usage | undefined {
  // Without a usage chunk the SDK reports undefined counts.
  if (usage.inputTokens === undefined || usage.outputTokens === undefined) return undefined;
  const cached = usage.inputTokenDetails?.cacheReadTokens;
  return {
    promptTokens: usage.inputTokens,
    completionTokens: usage.outputTokens,
    ...(cached === undefined ? {} : { cachedTokens: cached }),
  };
}

interface SdkResult {
  text: string;
  finishReason: string;
  toolCalls: { toolCallId: string; toolName: string; input: unknown }[];
  usage: ai6.LanguageModelUsage;
  id: string;
  agentServe: AgentServeSeen | undefined;
}

function outcome(result: SdkResult): TurnOutcome {
  const usage = usageOf(result.usage);
  return {
    id: result.id,
    text: result.text,
    finishReason: result.finishReason,
    toolCalls: result.toolCalls.map((c) => ({
      id: c.toolCallId,
      name: c.toolName,
      arguments: JSON.stringify(c.input),
    })),
    ...(usage ? { usage } : {}),
    ...(result.agentServe ? { agentServe: result.agentServe } : {}),
  };
}

interface Settings {
  model: LanguageModel;
  system?: string;
  instructions?: string;
  messages?: ModelMessage[];
  prompt?: string;
  tools?: ToolSet;
  maxOutputTokens?: number;
  providerOptions?: Record<string, Record<string, string | boolean>>;
}

async function generate(ai: Ai, settings: Settings, major: Major): Promise<TurnOutcome> {
  // ai 7 keeps the raw response body only when asked to (ai 6 always does).
  const include = major === 7 ? { include: { responseBody: true } } : {};
  const result = await ai.generateText({ ...settings, ...include, maxRetries: 0 } as Parameters<
    Ai["generateText"]
  >[0]);
  return outcome({
    text: result.text,
    finishReason: result.finishReason,
    toolCalls: result.toolCalls,
    usage: result.usage,
    id: result.response.id,
    // The raw response body is exposed as it arrived, metadata included.
    agentServe: seenIn(result.response.body, "body"),
  });
}

async function stream(ai: Ai, settings: Settings): Promise<TurnOutcome> {
  const result = ai.streamText({
    ...settings,
    maxRetries: 0,
    includeRawChunks: true,
  } as Parameters<Ai["streamText"]>[0]);
  let agentServe: AgentServeSeen | undefined;
  for await (const part of result.fullStream) {
    if (part.type === "raw") agentServe ??= seenIn(part.rawValue, "chunk");
    if (part.type === "error") throw part.error;
  }
  const response = await result.response;
  return outcome({
    text: await result.text,
    finishReason: await result.finishReason,
    toolCalls: await result.toolCalls,
    usage: await result.usage,
    id: response.id,
    agentServe,
  });
}

interface Providers {
  /** A chat-completions model; `includeUsage` matters only where the provider lets the caller choose. */
  chatModel(target: Target, includeUsage: boolean): LanguageModel;
  responsesModel?(target: Target): LanguageModel;
}

function aiSdkLibrary(
  name: string,
  ai: Ai,
  major: Major,
  providers: Providers,
  canStreamWithoutUsage: boolean,
): ClientLibrary {
  const library: ClientLibrary = {
    name,
    canStreamWithoutUsage,
    chat(target: Target, call: ChatCall) {
      const tools = toToolSet(ai, call.tools);
      const settings: Settings = {
        model: providers.chatModel(target, call.includeUsage),
        messages: toModelMessages(call.messages),
        ...systemPrompt(call.messages, major),
        ...(tools ? { tools } : {}),
        ...(call.maxTokens === undefined ? {} : { maxOutputTokens: call.maxTokens }),
      };
      return call.stream ? stream(ai, settings) : generate(ai, settings, major);
    },
  };
  const responsesModel = providers.responsesModel;
  if (responsesModel) {
    library.respond = (target, call) => {
      const settings: Settings = {
        model: responsesModel(target),
        prompt: call.input,
        maxOutputTokens: call.maxTokens,
        providerOptions: {
          openai: {
            store: true,
            ...(call.previousResponseId === undefined ? {} : { previousResponseId: call.previousResponseId }),
          },
        },
      };
      return call.stream ? stream(ai, settings) : generate(ai, settings, major);
    };
  }
  return library;
}

/** The provider's own `headers` option carries the session id. */
const sessionHeaders = (target: Target): Record<string, string> => ({ "X-Session-Id": target.sessionId });

const aiVersion = installedVersion("ai");
const ai7Version = installedVersion("ai-v7");

runClientCases(
  aiSdkLibrary(
    `ai ${aiVersion} + @ai-sdk/openai-compatible ${installedVersion("@ai-sdk/openai-compatible")}`,
    ai6,
    6,
    {
      chatModel: (target, includeUsage) =>
        createOpenAICompatible({
          name: "agent-serve",
          baseURL: target.baseURL,
          headers: sessionHeaders(target),
          includeUsage,
        })(target.model),
    },
    true,
  ),
);

runClientCases(
  aiSdkLibrary(
    `ai ${aiVersion} + @ai-sdk/openai ${installedVersion("@ai-sdk/openai")}`,
    ai6,
    6,
    {
      chatModel: (target) =>
        createOpenAI({ baseURL: target.baseURL, apiKey: "sk-local", headers: sessionHeaders(target) }).chat(
          target.model,
        ),
      responsesModel: (target) =>
        createOpenAI({
          baseURL: target.baseURL,
          apiKey: "sk-local",
          headers: sessionHeaders(target),
        }).responses(target.model),
    },
    // @ai-sdk/openai always asks for stream usage.
    false,
  ),
);

// ai 7 and its providers declare Node >= 22; they are run here on Node 20 to show whether they work anyway.
const ai7AsAi = ai7 as unknown as Ai;
runClientCases(
  aiSdkLibrary(
    `ai ${ai7Version} + @ai-sdk/openai-compatible ${installedVersion("ai-sdk-openai-compatible-v3")}`,
    ai7AsAi,
    7,
    {
      chatModel: (target, includeUsage) =>
        createOpenAICompatibleV3({
          name: "agent-serve",
          baseURL: target.baseURL,
          headers: sessionHeaders(target),
          includeUsage,
        })(target.model) as unknown as LanguageModel,
    },
    true,
  ),
);

runClientCases(
  aiSdkLibrary(
    `ai ${ai7Version} + @ai-sdk/openai ${installedVersion("ai-sdk-openai-v4")}`,
    ai7AsAi,
    7,
    {
      chatModel: (target) =>
        createOpenAIv4({ baseURL: target.baseURL, apiKey: "sk-local", headers: sessionHeaders(target) }).chat(
          target.model,
        ) as unknown as LanguageModel,
      responsesModel: (target) =>
        createOpenAIv4({
          baseURL: target.baseURL,
          apiKey: "sk-local",
          headers: sessionHeaders(target),
        }).responses(target.model) as unknown as LanguageModel,
    },
    false,
  ),
);
