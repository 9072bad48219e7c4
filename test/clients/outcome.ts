// What a client library reported for one model call, what the engine actually sent, and how the two compare.
import { expect } from "vitest";
import type { Exchange } from "./tap.js";

export interface ToolCall {
  id: string;
  name: string;
  /** The arguments as a JSON string. */
  arguments: string;
}

export interface Usage {
  promptTokens: number;
  completionTokens: number;
  /** Present when the library reports cached prompt tokens. */
  cachedTokens?: number;
}

/** The gateway's x_agent_serve as a library let the test read it, and where from. */
export interface AgentServeSeen {
  affinityHit: boolean;
  sessionId: string | null;
  from: "header" | "chunk" | "body" | "event";
}

/** One model call as the library reported it. */
export interface TurnOutcome {
  id: string;
  text: string;
  /** In the library's own spelling; compared between paths, not with the engine. */
  finishReason?: string;
  usage?: Usage;
  toolCalls: ToolCall[];
  /** Undefined when nothing carried it (always so straight to the engine). */
  agentServe?: AgentServeSeen;
}

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function asArray(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

/** What the engine sent in one exchange, read from its raw answer. */
export interface EngineFacts {
  id: string;
  text: string;
  usage?: Usage;
  toolCalls: ToolCall[];
  /** Ids of Responses output items (messages, function calls), which clients quote back in later inputs. */
  itemIds: string[];
}

/** The JSON payloads of an SSE body (`data: [DONE]` left out), each with its `event:` name if any. */
export function sseEvents(body: string): { event?: string; data: Json }[] {
  const events: { event?: string; data: Json }[] = [];
  for (const block of body.split(/\r?\n\r?\n/)) {
    let event: string | undefined;
    const data: string[] = [];
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith("event:")) event = line.slice(6).trim();
      else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
    }
    const payload = data.join("\n");
    if (payload === "" || payload === "[DONE]") continue;
    const parsed: unknown = JSON.parse(payload);
    if (isObject(parsed)) events.push(event === undefined ? { data: parsed } : { event, data: parsed });
  }
  return events;
}

function chatUsage(usage: unknown): Usage | undefined {
  if (!isObject(usage)) return undefined;
  const details = usage["prompt_tokens_details"];
  return {
    promptTokens: Number(usage["prompt_tokens"]),
    completionTokens: Number(usage["completion_tokens"]),
    ...(isObject(details) ? { cachedTokens: Number(details["cached_tokens"]) } : {}),
  };
}

function responsesUsage(usage: unknown): Usage | undefined {
  if (!isObject(usage)) return undefined;
  const details = usage["input_tokens_details"];
  return {
    promptTokens: Number(usage["input_tokens"]),
    completionTokens: Number(usage["output_tokens"]),
    ...(isObject(details) ? { cachedTokens: Number(details["cached_tokens"]) } : {}),
  };
}

function responseObjectFacts(response: Json): EngineFacts {
  let text = "";
  const toolCalls: ToolCall[] = [];
  const itemIds: string[] = [];
  for (const item of asArray(response["output"])) {
    if (!isObject(item)) continue;
    if (typeof item["id"] === "string") itemIds.push(item["id"]);
    if (item["type"] === "message") {
      for (const part of asArray(item["content"])) {
        if (isObject(part) && part["type"] === "output_text") text += String(part["text"]);
      }
    } else if (item["type"] === "function_call") {
      toolCalls.push({
        id: String(item["call_id"]),
        name: String(item["name"]),
        arguments: String(item["arguments"]),
      });
    }
  }
  const usage = responsesUsage(response["usage"]);
  return { id: String(response["id"]), text, toolCalls, itemIds, ...(usage ? { usage } : {}) };
}

function chatStreamFacts(events: { data: Json }[]): EngineFacts {
  let id = "";
  let text = "";
  let usage: Usage | undefined;
  const calls = new Map<number, ToolCall>();
  for (const { data } of events) {
    if (id === "") id = String(data["id"]);
    usage = chatUsage(data["usage"]) ?? usage;
    const delta = asArray(data["choices"]).filter(isObject)[0]?.["delta"];
    if (!isObject(delta)) continue;
    if (typeof delta["content"] === "string") text += delta["content"];
    for (const call of asArray(delta["tool_calls"]).filter(isObject)) {
      const index = Number(call["index"]);
      const fn = isObject(call["function"]) ? call["function"] : {};
      const known = calls.get(index) ?? { id: "", name: "", arguments: "" };
      if (typeof call["id"] === "string") known.id = call["id"];
      if (typeof fn["name"] === "string") known.name += fn["name"];
      if (typeof fn["arguments"] === "string") known.arguments += fn["arguments"];
      calls.set(index, known);
    }
  }
  const toolCalls = [...calls.entries()].sort((a, b) => a[0] - b[0]).map(([, call]) => call);
  return { id, text, toolCalls, itemIds: [], ...(usage ? { usage } : {}) };
}

function chatJsonFacts(body: Json): EngineFacts {
  const message = asArray(body["choices"]).filter(isObject)[0]?.["message"];
  const m = isObject(message) ? message : {};
  const toolCalls = asArray(m["tool_calls"])
    .filter(isObject)
    .map((call) => {
      const fn = isObject(call["function"]) ? call["function"] : {};
      return { id: String(call["id"]), name: String(fn["name"]), arguments: String(fn["arguments"]) };
    });
  const usage = chatUsage(body["usage"]);
  return {
    id: String(body["id"]),
    text: typeof m["content"] === "string" ? m["content"] : "",
    toolCalls,
    itemIds: [],
    ...(usage ? { usage } : {}),
  };
}

/** Reads one engine answer: chat or Responses, JSON or SSE. */
export function engineFacts(exchange: Exchange): EngineFacts {
  const body = exchange.responseBody;
  if (/^\s*\{/.test(body)) {
    const json = JSON.parse(body) as Json;
    return json["object"] === "response" ? responseObjectFacts(json) : chatJsonFacts(json);
  }
  const events = sseEvents(body);
  if (events.some((e) => e.event !== undefined || String(e.data["type"] ?? "").startsWith("response."))) {
    const done = events.find((e) => e.data["type"] === "response.completed");
    if (!done || !isObject(done.data["response"]))
      throw new Error("Responses stream without response.completed");
    return responseObjectFacts(done.data["response"]);
  }
  return chatStreamFacts(events);
}

function parsedCall(call: ToolCall): unknown {
  return { id: call.id, name: call.name, arguments: JSON.parse(call.arguments) as unknown };
}

/** The library reported what the engine sent: its ids, text, tool calls, and (when it reports any) usage. */
export function expectTurnMatchesEngine(turn: TurnOutcome, exchange: Exchange, label: string): void {
  const facts = engineFacts(exchange);
  expect(turn.id, `${label}: id`).toBe(facts.id);
  expect(turn.text, `${label}: text`).toBe(facts.text);
  // Some libraries hand back parsed arguments and re-serialise them: compare the values, ids and names exactly.
  expect(turn.toolCalls.map(parsedCall), `${label}: tool calls`).toEqual(facts.toolCalls.map(parsedCall));
  if (turn.usage !== undefined) {
    expect(facts.usage, `${label}: the engine sent usage`).toBeDefined();
    expect(turn.usage.promptTokens, `${label}: prompt tokens`).toBe(facts.usage?.promptTokens);
    expect(turn.usage.completionTokens, `${label}: completion tokens`).toBe(facts.usage?.completionTokens);
    if (turn.usage.cachedTokens !== undefined) {
      expect(turn.usage.cachedTokens, `${label}: cached tokens`).toBe(facts.usage?.cachedTokens);
    }
  }
}

/** The parts of a turn that must not depend on the path (ids are random per engine; metadata is the gateway's). */
export function pathIndependent(turn: TurnOutcome): unknown {
  return {
    text: turn.text,
    finishReason: turn.finishReason,
    usage: turn.usage,
    toolCalls: turn.toolCalls.map((c) => ({ name: c.name, arguments: JSON.parse(c.arguments) as unknown })),
  };
}

/**
 * The request the engine received, normalised for comparison across paths: the gateway may add
 * `stream_options.include_usage` for its own accounting (and strip the usage chunk again) when the client did
 * not ask for it.
 */
export function engineRequest(
  exchange: Exchange,
  clientAskedUsage: boolean,
  ids: Map<string, string>,
): unknown {
  if (exchange.requestBody === "") return {};
  const body = renameIds(JSON.parse(exchange.requestBody), ids) as Json;
  if (!clientAskedUsage && isObject(body["stream_options"])) {
    const { include_usage: _added, ...rest } = body["stream_options"];
    if (Object.keys(rest).length === 0) delete body["stream_options"];
    else body["stream_options"] = rest;
  }
  return body;
}

/**
 * Every id the engines of one path generated (responses, tool calls), in order, each mapped to a placeholder:
 * ids are random per engine, so follow-up requests that quote them compare equal only after renaming.
 */
export function engineIdNames(exchanges: Exchange[]): Map<string, string> {
  const names = new Map<string, string>();
  for (const exchange of exchanges) {
    const facts = engineFacts(exchange);
    for (const id of [facts.id, ...facts.toolCalls.map((c) => c.id), ...facts.itemIds]) {
      if (!names.has(id)) names.set(id, `<engine id ${names.size}>`);
    }
  }
  return names;
}

function renameIds(value: unknown, ids: Map<string, string>): unknown {
  if (typeof value === "string") return ids.get(value) ?? value;
  if (Array.isArray(value)) return value.map((v) => renameIds(v, ids));
  if (isObject(value))
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, renameIds(v, ids)]));
  return value;
}

/** Whether the client itself asked for stream usage in this exchange (read from what the direct engine got). */
export function askedUsage(exchange: Exchange): boolean {
  if (exchange.requestBody === "") return false;
  const body = JSON.parse(exchange.requestBody) as Json;
  const options = body["stream_options"];
  return isObject(options) && options["include_usage"] === true;
}
