// The tier classifier's engine calls: one short, schema-constrained chat request to an engine of its tier.
import { GatewayError } from "../core/errors.js";
import type { Logger } from "pino";
import type { BackendSlots } from "../admission/backend-slots.js";
import type { BackendRegistry } from "../backends/registry.js";
import type { Clock } from "../core/clock.js";
import type { ClassifierAsk } from "../routing/tier-classifier.js";
import { AttemptAbort } from "./attempt-abort.js";
import type { UpstreamPools } from "./upstream-pools.js";

export interface ClassifierClientSettings {
  tier: string;
  /** undefined: the chosen backend's own model. */
  model: string | undefined;
  /** undefined: the built-in prompt. */
  prompt: string | undefined;
}

interface ClientDeps {
  readonly clock: Clock;
  readonly logger: Logger;
  readonly registry: BackendRegistry;
  readonly slots: BackendSlots;
  readonly pools: UpstreamPools;
}

/** Replies that are not one short JSON object are not verdicts: a few tokens suffice for `{"tier":"big"}`. */
const MAX_VERDICT_TOKENS = 24;

export function defaultClassifierPrompt(tiers: readonly string[]): string {
  return (
    "You route requests to model tiers. Decide which tier the user's request needs. " +
    `Tiers: ${tiers.join(", ")}. Pick "big" only for hard reasoning, long or tricky code, math or analysis; ` +
    "pick the smallest tier that will do the job well otherwise. " +
    'Answer with JSON only: {"tier": "<name>"}.'
  );
}

/** The chat request a classifier call sends: the verdict is held to `{"tier": <one of tiers>}` by its schema. */
export function classifierRequestBody(
  question: string,
  tiers: readonly string[],
  settings: ClassifierClientSettings,
  backendModel: string,
): Record<string, unknown> {
  return {
    model: settings.model ?? backendModel,
    messages: [
      { role: "system", content: settings.prompt ?? defaultClassifierPrompt(tiers) },
      { role: "user", content: question },
    ],
    max_tokens: MAX_VERDICT_TOKENS,
    temperature: 0,
    response_format: {
      type: "json_schema",
      json_schema: {
        name: "tier_choice",
        strict: true,
        schema: {
          type: "object",
          properties: { tier: { type: "string", enum: [...tiers] } },
          required: ["tier"],
          additionalProperties: false,
        },
      },
    },
  };
}

/**
 * Asks the least-loaded up engine of the classifier's tier. It takes a slot like any request (max_inflight
 * holds), is charged to no budget, and leaves one log line of its own.
 */
export function createClassifierAsk(deps: ClientDeps, settings: ClassifierClientSettings): ClassifierAsk {
  let calls = 0;
  return async (question, tiers, signal) => {
    const backend = deps.registry
      .tier(settings.tier)
      .filter((b) => b.state === "up")
      .sort((a, b) => a.inflight - b.inflight)[0];
    if (backend === undefined)
      throw new GatewayError("no_healthy_backend", `no healthy backend in tier '${settings.tier}'`);
    const id = `classifier-${++calls}`;
    const startedMs = deps.clock.nowMs();
    const abort = new AttemptAbort();
    const onAbort = (): void => abort.abort(new Error("classifier timed out"));
    signal.addEventListener("abort", onAbort, { once: true });
    let status: number | string = "error";
    try {
      const pending = deps.slots.acquire(backend, abort);
      if (pending !== undefined) await pending;
      try {
        const { pool, basePath } = deps.pools.get(backend);
        const answer = await pool.request({
          method: "POST",
          path: `${basePath}/v1/chat/completions`,
          headers: { ...backend.upstreamHeaders, "content-type": "application/json", "x-request-id": id },
          body: JSON.stringify(classifierRequestBody(question, tiers, settings, backend.model)),
          signal,
        });
        status = answer.statusCode;
        const body = (await answer.body.json()) as { choices?: { message?: { content?: unknown } }[] };
        if (answer.statusCode !== 200)
          throw new GatewayError("upstream_error", `engine answered ${answer.statusCode}`);
        const content = body.choices?.[0]?.message?.content;
        if (typeof content !== "string")
          throw new GatewayError("upstream_error", "the engine's answer has no message content");
        return content;
      } finally {
        deps.slots.release(backend);
      }
    } finally {
      signal.removeEventListener("abort", onAbort);
      deps.logger.info(
        {
          reqId: id,
          classifier: true,
          backend: backend.id,
          status,
          ms: Math.round(deps.clock.nowMs() - startedMs),
        },
        "classifier request",
      );
    }
  };
}
