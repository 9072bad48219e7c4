// The tier classifier's engine calls: one short, schema-constrained chat request to an engine of its tier.
import type { Logger } from "pino";
import { GatewayError } from "../core/errors.js";
import type { ClassifierAsk } from "../routing/tier-classifier.js";
import { BufferedAnswer } from "./buffered-answer.js";
import {
  runAttemptLoop,
  type AttemptBodies,
  type AttemptLimits,
  type AttemptLoopDeps,
  type AttemptsMade,
} from "./attempt-loop.js";
import { cancelRequest, type RequestContext } from "./request-context.js";

const CLASSIFIER_PATH = "/v1/chat/completions";

export interface ClassifierClientSettings {
  tier: string;
  /** undefined: the chosen backend's own model. */
  model: string | undefined;
  /** undefined: the built-in prompt. */
  prompt: string | undefined;
}

/** The classifier calls engines as requests do (through the attempt loop), and logs each call. */
export type ClassifierDeps = AttemptLoopDeps & { readonly logger: Logger };

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

/** The classifier's request body for each backend model (its own model id, unless settings name one). */
class ClassifierBodies implements AttemptBodies {
  readonly stripUsage = false;

  constructor(
    private readonly question: string,
    private readonly tiers: readonly string[],
    private readonly settings: ClassifierClientSettings,
  ) {}

  forModel(model: string): Buffer {
    return Buffer.from(
      JSON.stringify(classifierRequestBody(this.question, this.tiers, this.settings, model)),
    );
  }
}

const NO_PLACEMENT_HINTS = { prefixKey: undefined };

/**
 * Asks an engine of the classifier's tier through the attempt loop, as every request is sent: placed by the
 * scheduler (no session), a slot taken (max_inflight holds), failed over, its outcome fed to the engine's
 * health, its answer bounded by upstream.max_response_bytes, abandoned if the engine goes down. It is charged
 * to no budget and leaves one log line of its own.
 */
export function createClassifierAsk(
  deps: ClassifierDeps,
  limits: AttemptLimits,
  settings: ClassifierClientSettings,
): ClassifierAsk {
  let calls = 0;
  return async (question, tiers, signal) => {
    const ctx: RequestContext = {
      requestId: `classifier-${++calls}`,
      startedAtMs: deps.clock.nowMs(),
      method: "POST",
      path: CLASSIFIER_PATH,
      attempts: 0,
      queueWaitMs: 0,
    };
    const onAbort = (): void =>
      cancelRequest(ctx, new GatewayError("upstream_timeout", "classifier timed out"));
    signal.addEventListener("abort", onAbort, { once: true });
    const answer = new BufferedAnswer();
    let status: number | string = "error";
    let made: AttemptsMade | undefined;
    try {
      made = await runAttemptLoop(
        deps,
        limits,
        {
          tier: settings.tier,
          tierSource: "classifier",
          sessionId: undefined,
          sessionSource: undefined,
          path: CLASSIFIER_PATH,
          bodies: new ClassifierBodies(question, tiers, settings),
          stream: false,
          responses: false,
          messages: false,
          onlyBackend: undefined,
          placement: NO_PLACEMENT_HINTS,
        },
        answer,
        ctx,
      );
      const { result } = made;
      if (result === undefined) throw made.error;
      status = result.status;
      if (result.status !== 200) throw new GatewayError("upstream_error", `engine answered ${result.status}`);
      const body = JSON.parse(answer.text()) as { choices?: { message?: { content?: unknown } }[] };
      const content = body.choices?.[0]?.message?.content;
      if (typeof content !== "string")
        throw new GatewayError("upstream_error", "the engine's answer has no message content");
      return content;
    } finally {
      signal.removeEventListener("abort", onAbort);
      deps.logger.info(
        {
          reqId: ctx.requestId,
          classifier: true,
          backend: made?.selection?.backend.id,
          status,
          attempts: made?.attempts ?? 0,
          ms: Math.round(deps.clock.nowMs() - ctx.startedAtMs),
        },
        "classifier request",
      );
    }
  };
}
