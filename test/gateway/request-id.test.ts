// The request id as Anthropic's SDK reads it (`request-id`, err.requestID) beside `x-request-id`, and an unknown
// model's error naming the served models.
import Anthropic from "@anthropic-ai/sdk";
import { afterEach, describe, expect, it } from "vitest";
import { unknownModelMessage } from "../../src/routing/tier-router.js";
import { SMALL_MODEL, startCluster, type Cluster } from "../helpers/cluster.js";

describe("request-id and an unknown model", () => {
  let cluster: Cluster | undefined;
  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  it("sends request-id beside x-request-id, on answers and errors; the SDK's err.requestID gets it", async () => {
    cluster = await startCluster([{ id: "small-0", tier: "small" }]);
    const anthropic = new Anthropic({ baseURL: cluster.url, apiKey: "unused", maxRetries: 0 });
    const { response } = await anthropic.messages
      .create({ model: SMALL_MODEL, max_tokens: 4, messages: [{ role: "user", content: "hi" }] })
      .withResponse();
    expect(response.headers.get("request-id")).toMatch(/\S/);
    expect(response.headers.get("request-id")).toBe(response.headers.get("x-request-id"));

    const failure = await anthropic.messages
      .create({ model: "no-such-model", max_tokens: 4, messages: [{ role: "user", content: "hi" }] })
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    expect(failure).toBeInstanceOf(Anthropic.NotFoundError);
    const error = failure as InstanceType<typeof Anthropic.NotFoundError>;
    expect(error.requestID).toMatch(/\S/);
    expect(error.requestID).toBe(error.headers?.get("x-request-id"));
    expect(error.message).toContain(`the model 'no-such-model' does not exist; served: '${SMALL_MODEL}'`);
  });

  it("names at most ten served models, and says when none is served", () => {
    const many = Array.from({ length: 12 }, (_, i) => `m${i}`);
    expect(unknownModelMessage("x", many)).toBe(
      "the model 'x' does not exist; served: 'm0', 'm1', 'm2', 'm3', 'm4', 'm5', 'm6', 'm7', 'm8', 'm9' and 2 more (GET /v1/models)",
    );
    expect(unknownModelMessage("x", [])).toBe("the model 'x' does not exist: no engine serves a model now");
  });
});
