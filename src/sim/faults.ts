// Injected failures for failover tests: what each fault means, its JSON and CLI spellings, and per-request dice.
import { z } from "zod";
import type { Random } from "../core/random.js";

/**
 * - none: healthy.
 * - die: stop listening and drop every connection at once (the CLI process exits).
 * - hang: accept requests (health and metrics included) and never answer them; streams in flight stall.
 * - slow: hold each inference request `extraLatencyMs` wall-clock milliseconds before it reaches the engine.
 * - error_rate: answer that fraction of inference requests with `status` (default 500) in vLLM's error envelope.
 * - cut_stream: drop the connection after `afterChunks` SSE data chunks (non-streaming: mid-body).
 * Control routes under /sim/ are never affected, so a test can always lift a fault.
 */
export type SimFault =
  | { kind: "none" }
  | { kind: "die" }
  | { kind: "hang" }
  | { kind: "slow"; extraLatencyMs: number }
  | { kind: "error_rate"; rate: number; status?: number }
  | { kind: "cut_stream"; afterChunks: number };

export const simFaultSchema = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("none") }).strict(),
  z.object({ kind: z.literal("die") }).strict(),
  z.object({ kind: z.literal("hang") }).strict(),
  z.object({ kind: z.literal("slow"), extraLatencyMs: z.number().nonnegative() }).strict(),
  z
    .object({
      kind: z.literal("error_rate"),
      rate: z.number().min(0).max(1),
      status: z.number().int().min(400).max(599).optional(),
    })
    .strict(),
  z.object({ kind: z.literal("cut_stream"), afterChunks: z.number().int().nonnegative() }).strict(),
]);

export const HEALTHY: SimFault = { kind: "none" };

/** Validates a fault from JSON; throws a RangeError naming what is wrong. */
export function parseFault(value: unknown): SimFault {
  const result = simFaultSchema.safeParse(value);
  if (!result.success) {
    const issue = result.error.issues[0];
    const where = issue && issue.path.length > 0 ? `${issue.path.join(".")}: ` : "";
    throw new RangeError(`invalid fault: ${where}${issue?.message ?? "unrecognised"}`);
  }
  return result.data;
}

function specNumber(text: string | undefined, what: string, spec: string): number {
  const value = text === undefined || text === "" ? Number.NaN : Number(text);
  if (!Number.isFinite(value)) throw new RangeError(`fault '${spec}' needs a number for ${what}`);
  return value;
}

/** The CLI spelling: none | die | hang | slow:MS | error_rate:RATE[:STATUS] | cut_stream:CHUNKS. */
export function parseFaultSpec(spec: string): SimFault {
  const [kind, first, second, ...rest] = spec.split(":");
  if (rest.length > 0) throw new RangeError(`fault '${spec}' has too many ':' parts`);
  switch (kind) {
    case "none":
    case "die":
    case "hang":
      if (first !== undefined) throw new RangeError(`fault '${kind}' takes no argument`);
      return parseFault({ kind });
    case "slow":
      return parseFault({ kind, extraLatencyMs: specNumber(first, "the extra latency in ms", spec) });
    case "error_rate": {
      const status = second === undefined ? undefined : specNumber(second, "the status", spec);
      return parseFault({ kind, rate: specNumber(first, "the rate", spec), status });
    }
    case "cut_stream":
      return parseFault({ kind, afterChunks: specNumber(first, "the chunk count", spec) });
    default:
      throw new RangeError(
        `unknown fault '${kind ?? ""}' (none, die, hang, slow:MS, error_rate:RATE[:STATUS], cut_stream:N)`,
      );
  }
}

/** Rolls the dice for error_rate with the engine's seeded randomness, so failing runs replay. */
export function shouldInjectError(fault: SimFault, random: Random): boolean {
  return fault.kind === "error_rate" && fault.rate > 0 && random.next() < fault.rate;
}
