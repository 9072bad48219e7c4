// The routing stage: one decision from the rules, a stored response's owner and the classifier, in that order.
import { describe, expect, it } from "vitest";
import { BackendRegistry } from "../../src/backends/registry.js";
import { ManualClock, ManualTimers } from "../../src/core/clock.js";
import { parseConfig } from "../../src/config/load.js";
import { parseClientHeaders } from "../../src/gateway/client-headers.js";
import { parseCompletionRequest } from "../../src/gateway/completion-request.js";
import { routeRequest, type RouteDecision } from "../../src/gateway/route-tier.js";
import { settingsFrom } from "../../src/gateway/settings.js";
import { TierClassifier } from "../../src/routing/tier-classifier.js";

const config = parseConfig(
  {
    backends: [
      { id: "small-0", tier: "small", base_url: "http://127.0.0.1:9", model: "m-small" },
      { id: "big-0", tier: "big", base_url: "http://127.0.0.1:9", model: "m-big" },
    ],
  },
  "test",
);
const settings = settingsFrom(config);
const registry = new BackendRegistry(settings.backends, settings.thresholds);
const deps = { registry };

/** A classifier whose engine always says `tier`, counting the questions it was asked. */
function classifierSaying(tier: string): { classifier: TierClassifier; asked: () => number } {
  let asked = 0;
  const classifier = new TierClassifier({
    tiers: ["small", "big"],
    ask: () => {
      asked++;
      return Promise.resolve(JSON.stringify({ tier }));
    },
    clock: new ManualClock(),
    timers: new ManualTimers(new ManualClock()),
    timeoutMs: 1000,
    cacheTtlMs: 0,
    maxEntries: 10,
    record: () => undefined,
  });
  return { classifier, asked: () => asked };
}

function chatBody(body: Record<string, unknown>): ReturnType<typeof parseCompletionRequest> {
  return parseCompletionRequest(Buffer.from(JSON.stringify(body)), "chat");
}

const NO_OWNER = { sessionKey: undefined, owner: undefined };
const client = parseClientHeaders({});

describe("routeRequest", () => {
  it("answers at once (no promise) when nothing must be awaited", () => {
    const decision = routeRequest(
      deps,
      { settings, classifier: undefined },
      client,
      undefined,
      chatBody({ messages: [{ role: "user", content: "hi" }] }),
      NO_OWNER,
      undefined,
    );
    expect(decision).toEqual({ tier: "small", source: "auto_default", onlyBackend: undefined });
  });

  it("asks the classifier only when the rules left the tier open", async () => {
    const { classifier, asked } = classifierSaying("big");
    const live = { settings, classifier };
    const open = await routeRequest(
      deps,
      live,
      client,
      undefined,
      chatBody({ messages: [{ role: "user", content: "hard" }] }),
      NO_OWNER,
      undefined,
    );
    expect(open).toEqual({ tier: "big", source: "classifier", onlyBackend: undefined });
    const byModel = routeRequest(
      deps,
      live,
      client,
      undefined,
      chatBody({ model: "m-small", messages: [{ role: "user", content: "hi" }] }),
      NO_OWNER,
      undefined,
    );
    expect(byModel).toEqual({ tier: "small", source: "model", onlyBackend: undefined });
    expect(asked()).toBe(1);
  });

  it("sends a continued conversation to its owner, without asking the classifier", () => {
    const { classifier, asked } = classifierSaying("small");
    const owner = registry.get("big-0")!;
    const decision = routeRequest(
      deps,
      { settings, classifier },
      client,
      "s-1",
      chatBody({ messages: [{ role: "user", content: "more" }] }),
      { sessionKey: "s-1", owner },
      undefined,
    ) as RouteDecision;
    expect(decision).toEqual({ tier: "big", source: "auto_default", onlyBackend: "big-0" });
    expect(asked()).toBe(0);
  });

  it("still refuses an unknown model when continuing a conversation", () => {
    const owner = registry.get("big-0")!;
    expect(() =>
      routeRequest(
        deps,
        { settings, classifier: undefined },
        client,
        "s-1",
        chatBody({ model: "nope", messages: [{ role: "user", content: "hi" }] }),
        { sessionKey: "s-1", owner },
        undefined,
      ),
    ).toThrow(/nope/);
  });

  it("keeps a bound session in its backend's tier when the rules decide", () => {
    const long = "x".repeat(settings.tiers.promptLengthThreshold + 1);
    const request = chatBody({ messages: [{ role: "user", content: long }] });
    const live = { settings, classifier: undefined };
    // Unbound, a long prompt goes to the long-prompt tier; bound to a small engine, it stays small.
    expect(routeRequest(deps, live, client, "s-2", request, NO_OWNER, undefined)).toMatchObject({
      tier: "big",
    });
    expect(routeRequest(deps, live, client, "s-2", request, NO_OWNER, "small-0")).toMatchObject({
      tier: "small",
      source: "auto_session",
    });
  });
});
