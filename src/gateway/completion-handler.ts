// POST /v1/chat/completions and /v1/completions, in stages that read in order: admit -> parse -> route ->
// attempt loop -> settle. Each stage lives in its own file and takes only what it needs.
import type { IncomingMessage, ServerResponse } from "node:http";
import { admit, settle } from "./admit.js";
import { runAttemptLoop } from "./attempt-loop.js";
import { parseCompletionRequest, type CompletionRequest, type Endpoint } from "./completion-request.js";
import { readBody } from "./read-body.js";
import type { RequestContext } from "./request-context.js";
import { routeTier } from "./route-tier.js";
import type { GatewayRuntime } from "./runtime.js";
import { UpstreamBodies } from "./upstream-body.js";

const PATHS: Record<Endpoint, string> = { chat: "/v1/chat/completions", completions: "/v1/completions" };

export async function handleCompletion(
  rt: GatewayRuntime,
  endpoint: Endpoint,
  req: IncomingMessage,
  res: ServerResponse,
  ctx: RequestContext,
): Promise<void> {
  const { settings } = rt;
  const admission = await admit(
    req.headers,
    { apiKeys: settings.apiKeys, budgetAnonymous: settings.config.admission.budget_anonymous },
    rt.budgets,
    rt.clock.nowMs(),
  );
  ctx.sessionId = admission.client.sessionId;
  ctx.agentId = admission.agentId;

  const raw = await readBody(req, settings.maxBodyBytes);
  const request = parseCompletionRequest(raw, endpoint);
  if (settings.config.server.log_prompts) ctx.prompt = lastMessageText(request);

  // With a shared binding store: the session's binding as every replica sees it, before anything reads it.
  if (
    rt.sharedBindings !== undefined &&
    admission.client.sessionId !== undefined &&
    rt.scheduler.affinityEnabled
  ) {
    await rt.sharedBindings.prepare(admission.client.sessionId);
  }
  const { tier } = routeTier(admission.client, request, rt.registry, rt.scheduler, settings.tiers);
  ctx.tier = tier;

  const result = await runAttemptLoop(
    rt,
    {
      tier,
      sessionId: admission.client.sessionId,
      path: PATHS[endpoint],
      bodies: new UpstreamBodies(raw, request),
      stream: request.stream,
    },
    res,
    ctx,
  );
  ctx.status = result.status;
  ctx.streamError = result.streamError;
  if (result.usage !== undefined) {
    rt.metrics.tokens(tier, result.usage);
    settle(admission, rt.budgets, result.usage, rt.clock.nowMs());
  }
}

/** The last message's text, for the log line when server.log_prompts is on. */
function lastMessageText(request: CompletionRequest): string {
  const messages = request.body["messages"];
  const source = Array.isArray(messages)
    ? (messages.at(-1) as Record<string, unknown>)["content"]
    : request.body["prompt"];
  const text = typeof source === "string" ? source : JSON.stringify(source ?? null);
  return text.length > 2000 ? `${text.slice(0, 2000)}...` : text;
}
