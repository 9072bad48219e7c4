// Test fixture: simulated engines (in-process) plus a gateway in front of them, all on OS-assigned ports.
import { pino } from "pino";
import { parseConfig } from "../../src/config/load.js";
import type { GatewayConfig } from "../../src/config/schema.js";
import { Gateway, type GatewayOptions } from "../../src/gateway/gateway.js";
import { startSimEngine, type SimEngineHandle, type SimEngineOptions } from "../../src/sim/index.js";
import { metricValue, scrapeMetrics as scrape } from "../../src/metrics/prometheus-text.js";

export { metricValue, scrape };

export interface EngineSpec {
  id: string;
  tier: string;
  model?: string;
  maxInflight?: number;
  sim?: Partial<SimEngineOptions>;
}

export interface Cluster {
  gateway: Gateway;
  url: string;
  engines: Map<string, SimEngineHandle>;
  config: GatewayConfig;
  close(): Promise<void>;
}

export const SMALL_MODEL = "sim-small";
export const BIG_MODEL = "sim-big";

/** Document-level overrides merged into the generated config (affinity, health, upstream, ...). */
export type ConfigOverrides = Record<string, unknown>;

export async function startCluster(
  specs: EngineSpec[],
  overrides: ConfigOverrides = {},
  options: GatewayOptions = {},
): Promise<Cluster> {
  const engines = new Map<string, SimEngineHandle>();
  try {
    for (const spec of specs) {
      const model = spec.model ?? (spec.tier === "big" ? BIG_MODEL : SMALL_MODEL);
      engines.set(spec.id, await startSimEngine({ profile: "instant", model, ...spec.sim }));
    }
    const document = {
      ...overrides,
      server: { host: "127.0.0.1", port: 0, ...(overrides["server"] as object | undefined) },
      backends: specs.map((spec) => ({
        id: spec.id,
        tier: spec.tier,
        base_url: engines.get(spec.id)!.url,
        model: spec.model ?? (spec.tier === "big" ? BIG_MODEL : SMALL_MODEL),
        ...(spec.maxInflight === undefined ? {} : { max_inflight: spec.maxInflight }),
      })),
    };
    const config = parseConfig(document, "test");
    const gateway = await Gateway.start(config, {
      logger: pino({ level: process.env["TEST_LOG_LEVEL"] ?? "silent" }),
      listen: { host: "127.0.0.1", port: 0 },
      ...options,
    });
    return {
      gateway,
      url: gateway.url,
      engines,
      config,
      async close() {
        await gateway.close(0);
        await Promise.all([...engines.values()].map((e) => e.close()));
      },
    };
  } catch (err) {
    await Promise.all([...engines.values()].map((e) => e.close()));
    throw err;
  }
}

export interface ChatOptions {
  session?: string;
  model?: string;
  stream?: boolean;
  maxTokens?: number;
  headers?: Record<string, string>;
  messages?: { role: string; content: string }[];
}

/** One chat completion over fetch; returns status, headers and the parsed JSON (or SSE text). */
export async function chat(
  url: string,
  options: ChatOptions = {},
): Promise<{
  status: number;
  headers: Headers;
  json: Record<string, unknown>;
  text: string;
}> {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(options.session === undefined ? {} : { "x-session-id": options.session }),
      ...options.headers,
    },
    body: JSON.stringify({
      model: options.model ?? SMALL_MODEL,
      messages: options.messages ?? [{ role: "user", content: "hello there" }],
      max_tokens: options.maxTokens ?? 8,
      // Replies of exactly max_tokens (vLLM's ignore_eos), so tests can count the tokens they asked for.
      ignore_eos: true,
      stream: options.stream ?? false,
    }),
  });
  const text = await response.text();
  let json: Record<string, unknown> = {};
  if (!options.stream) {
    try {
      json = JSON.parse(text) as Record<string, unknown>;
    } catch {
      json = {};
    }
  }
  return { status: response.status, headers: response.headers, json, text };
}

export interface AgentServeMeta {
  session_id: string | null;
  session_source: string | null;
  tier: string;
  backend_id: string;
  affinity_hit: boolean;
  reason: string;
  queue_wait_ms: number;
  attempts: number;
}

export function metaOf(json: Record<string, unknown>): AgentServeMeta {
  return json["x_agent_serve"] as AgentServeMeta;
}
