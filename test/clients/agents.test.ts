// The OpenAI Agents SDK (0.14, the 0.13 release still in use, and the newest) on the shared client cases.
import * as agents014 from "@openai/agents";
import type { AgentInputItem, ModelResponse } from "@openai/agents";
import OpenAI from "openai";
import * as agents013 from "openai-agents-v013";
// The aliased newer majors (openai-v7, ai-v7, ...) come from test/clients/package.json: `npm ci --prefix test/clients` (as .ci/run does).
import * as agents020 from "openai-agents-v020";
import OpenAIv7 from "openai-v7";
import {
  TOOLS,
  runClientCases,
  toolResult,
  type AgentCall,
  type AgentServeSeen,
  type ClientLibrary,
  type Target,
  type ToolCall,
  type TurnOutcome,
} from "./cases.js";
import { installedVersion } from "./versions.js";

type AgentsSdk = typeof agents014;

/**
 * The SDK turns engine answers into its own items and keeps no raw body or chunk, but it calls the openai client
 * it is given: that client's `fetch` sees each response's headers, X-Agent-Serve-* included, in call order.
 */
function recordingClient(
  OpenAIClass: typeof OpenAI,
  target: Target,
  seen: (AgentServeSeen | undefined)[],
): OpenAI {
  return new OpenAIClass({
    baseURL: target.baseURL,
    apiKey: "sk-local",
    maxRetries: 0,
    defaultHeaders: { "X-Session-Id": target.sessionId },
    fetch: async (input: string | URL | Request, init?: RequestInit) => {
      const response = await fetch(input, init);
      const hit = response.headers.get("x-agent-serve-affinity-hit");
      seen.push(
        hit === null
          ? undefined
          : {
              affinityHit: hit === "true",
              sessionId: response.headers.get("x-agent-serve-session-id"),
              from: "header",
            },
      );
      return response;
    },
  });
}

function turnOf(response: ModelResponse, agentServe: AgentServeSeen | undefined): TurnOutcome {
  let text = "";
  const toolCalls: ToolCall[] = [];
  for (const item of response.output) {
    if (item.type === "message" && item.role === "assistant") {
      for (const part of item.content) if (part.type === "output_text") text += part.text;
    } else if (item.type === "function_call") {
      toolCalls.push({ id: item.callId, name: item.name, arguments: item.arguments });
    }
  }
  const cached = response.usage.inputTokensDetails[0]?.["cached_tokens"];
  return {
    id: response.responseId ?? "",
    text,
    toolCalls,
    usage: {
      promptTokens: response.usage.inputTokens,
      completionTokens: response.usage.outputTokens,
      ...(cached === undefined ? {} : { cachedTokens: cached }),
    },
    ...(agentServe ? { agentServe } : {}),
  };
}

function agentsLibrary(name: string, sdk: AgentsSdk, OpenAIClass: typeof OpenAI): ClientLibrary {
  // Tracing would export spans to a remote service: off, as for any local engine.
  sdk.setTracingDisabled(true);
  return {
    name,
    agentModels: ["chat", "responses"],
    async agent(target: Target, call: AgentCall): Promise<TurnOutcome[]> {
      const seen: (AgentServeSeen | undefined)[] = [];
      const client = recordingClient(OpenAIClass, target, seen);
      const model =
        call.model === "chat"
          ? new sdk.OpenAIChatCompletionsModel(client, target.model)
          : new sdk.OpenAIResponsesModel(client, target.model);
      const agent = new sdk.Agent({
        name: "planner",
        instructions: "You are a careful planning agent. Use the tools.",
        model,
        tools: TOOLS.map((t) =>
          sdk.tool({
            name: t.name,
            description: t.description,
            // Strict schema: every property required, nothing else allowed (the tools are written that way).
            parameters: {
              type: "object" as const,
              properties: t.parameters.properties as Record<string, Record<string, unknown>>,
              required: t.parameters.required,
              additionalProperties: false as const,
            },
            strict: true,
            execute: (args) => toolResult(t.name, JSON.stringify(args)),
          }),
        ),
      });
      let history: AgentInputItem[] = [];
      const responses: ModelResponse[] = [];
      for (const input of call.turns) {
        const turnInput: AgentInputItem[] = [...history, sdk.user(input)];
        if (call.stream) {
          const result = await sdk.run(agent, turnInput, { stream: true, maxTurns: 4 });
          for await (const _event of result) {
            // Drains the event stream; the result is read once it has completed.
          }
          await result.completed;
          history = result.history;
          responses.push(...result.rawResponses);
        } else {
          const result = await sdk.run(agent, turnInput, { maxTurns: 4 });
          history = result.history;
          responses.push(...result.rawResponses);
        }
      }
      return responses.map((r, i) => turnOf(r, seen[i]));
    },
  };
}

runClientCases(agentsLibrary(`@openai/agents ${installedVersion("@openai/agents")}`, agents014, OpenAI));
// 0.13.3, the last release that takes stream usage from the last chunk only: it read 0/0 through a gateway that added a chunk after the engine's usage chunk.
runClientCases(
  agentsLibrary(
    `@openai/agents ${installedVersion("openai-agents-v013")}`,
    agents013 as unknown as AgentsSdk,
    OpenAI,
  ),
);
// The newest release depends on openai 7, which declares Node >= 22; run here on Node 20 to show whether it works.
runClientCases(
  agentsLibrary(
    `@openai/agents ${installedVersion("openai-agents-v020")}`,
    agents020 as unknown as AgentsSdk,
    OpenAIv7 as unknown as typeof OpenAI,
  ),
);
