// The Responses API stream relay: events pass as sent, the final event carries x_agent_serve, usage and id read.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { split } from "../helpers/split.js";
import { ResponsesRelay } from "../../src/gateway/responses-relay.js";

const MEMBER = ',"x_agent_serve":{"backend_id":"small-0"}';

function event(type: string, payload: Record<string, unknown>, sequence: number): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, ...payload, sequence_number: sequence })}\n\n`;
}

function stream(deltas: string[], finalType = "response.completed"): string[] {
  const response = { id: "resp_abc", object: "response", status: "in_progress" };
  const events = [
    event("response.created", { response }, 0),
    event("response.in_progress", { response }, 1),
    ...deltas.map((delta, i) => event("response.output_text.delta", { delta, item_id: "msg_1" }, 2 + i)),
  ];
  const usage = {
    input_tokens: 40,
    output_tokens: deltas.length,
    input_tokens_details: { cached_tokens: 32 },
  };
  events.push(event(finalType, { response: { ...response, status: "completed", usage } }, events.length));
  return events;
}

describe("ResponsesRelay", () => {
  it("passes every event, splices the metadata into the final one and reads id and usage, however split", () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.string(), fc.constant('"type":"response.completed"')), { maxLength: 10 }),
        fc.array(fc.nat(), { maxLength: 8 }),
        fc.constantFrom("response.completed", "response.incomplete", "response.failed"),
        (deltas, cuts, finalType) => {
          const events = stream(deltas, finalType);
          const relay = new ResponsesRelay(Buffer.from(MEMBER));
          const parts = split(Buffer.from(events.join("")), cuts);
          const out = Buffer.concat([...parts.flatMap((p) => relay.push(p)), ...relay.flush()]).toString();
          const last = events.at(-1)!.replace(/}\n\n$/, `${MEMBER}}\n\n`);
          expect(out).toBe(events.slice(0, -1).join("") + last);
          expect(relay.complete).toBe(true);
          expect(relay.responseId).toBe("resp_abc");
          expect(relay.usage).toEqual({
            promptTokens: 40,
            completionTokens: deltas.length,
            cachedTokens: 32,
          });
        },
      ),
      { numRuns: 300 },
    );
  });

  it("is not complete without a final event, and ends a cut stream with an error event", () => {
    const events = stream(["a", "b"]).slice(0, -1);
    const relay = new ResponsesRelay(Buffer.from(MEMBER));
    const out = Buffer.concat(relay.push(Buffer.from(events.join("")))).toString();
    expect(out).toBe(events.join(""));
    expect(relay.complete).toBe(false);
    const ending = Buffer.concat(relay.errorEnding("engine went away", "upstream_error")).toString();
    expect(ending).toBe(
      `event: error\ndata: ${JSON.stringify({
        type: "error",
        code: "upstream_error",
        message: "engine went away",
        param: null,
        sequence_number: 4,
      })}\n\n`,
    );
  });
});
