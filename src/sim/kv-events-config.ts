// `--kv-events-config`: vLLM's KVEventsConfig (vllm/config/kv_events.py), parsed from the same JSON vLLM takes.
import { z } from "zod";
import { UsageError } from "../cli/command.js";

/** vLLM's defaults (0.26). */
export const KV_EVENTS_DEFAULTS = {
  endpoint: "tcp://*:5557",
  bufferSteps: 10_000,
  hwm: 100_000,
  maxQueueSize: 100_000,
  topic: "",
} as const;

const schema = z.strictObject({
  enable_kv_cache_events: z.boolean().default(false),
  /** "zmq" or "null"; vLLM picks zmq when events are enabled and no publisher is named. */
  publisher: z.enum(["zmq", "null"]).optional(),
  endpoint: z.string().min(1).default(KV_EVENTS_DEFAULTS.endpoint),
  replay_endpoint: z.string().min(1).nullable().default(null),
  buffer_steps: z.number().int().min(1).default(KV_EVENTS_DEFAULTS.bufferSteps),
  hwm: z.number().int().min(0).default(KV_EVENTS_DEFAULTS.hwm),
  max_queue_size: z.number().int().min(1).default(KV_EVENTS_DEFAULTS.maxQueueSize),
  topic: z.string().default(KV_EVENTS_DEFAULTS.topic),
});

export interface KvEventsConfig {
  /** The PUB socket's address; binds when vLLM would (see shouldBind). */
  readonly endpoint: string;
  /** The ROUTER socket for replays, when set. */
  readonly replayEndpoint: string | undefined;
  /** Batches kept for replay. */
  readonly bufferSteps: number;
  readonly hwm: number;
  readonly maxQueueSize: number;
  readonly topic: string;
}

/** The JSON of `--kv-events-config`; undefined when events stay off. Throws a UsageError naming the flag. */
export function parseKvEventsConfig(json: string): KvEventsConfig | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch (err) {
    throw new UsageError(`--kv-events-config: not JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.join(".") ?? "";
    throw new UsageError(
      `--kv-events-config: ${where === "" ? "" : `${where}: `}${issue?.message ?? "invalid"}`,
    );
  }
  const config = parsed.data;
  const publisher = config.publisher ?? (config.enable_kv_cache_events ? "zmq" : "null");
  if (!config.enable_kv_cache_events || publisher === "null") return undefined;
  return {
    endpoint: config.endpoint,
    replayEndpoint: config.replay_endpoint ?? undefined,
    bufferSteps: config.buffer_steps,
    hwm: config.hwm,
    maxQueueSize: config.max_queue_size,
    topic: config.topic,
  };
}

/**
 * vLLM's rule: bind when the address holds `*` or `::` or is ipc:// or inproc://, else connect. One addition: a
 * TCP port 0 binds (an OS-assigned port; nothing can be connected to port 0), so tests and several simulated
 * engines on one host bind loopback without picking ports.
 */
export function shouldBind(endpoint: string): boolean {
  return (
    endpoint.includes("*") ||
    endpoint.includes("::") ||
    endpoint.startsWith("ipc://") ||
    endpoint.startsWith("inproc://") ||
    /^tcp:\/\/.*:0$/.test(endpoint)
  );
}
