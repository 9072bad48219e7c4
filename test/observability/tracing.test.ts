// Optional OpenTelemetry tracing: off by default; when on, one SERVER span per request with the gateway's
// decisions as attributes, exported over OTLP/HTTP (JSON) to a receiver on loopback.
import { EventEmitter } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load.js";
import type { RequestContext } from "../../src/gateway/request-context.js";
import { tracingSchema } from "../../src/tracing/config.js";
import { ManualClock, ManualTimers, systemTimers } from "../../src/core/clock.js";
import { createRequestTracer, keptAtRatio, parseTraceparent } from "../../src/tracing/request-tracer.js";
import { chat, startCluster, type Cluster } from "../helpers/cluster.js";
import { eventsOf, waitUntil } from "../helpers/wait.js";

interface OtlpValue {
  stringValue?: string;
  intValue?: string;
  boolValue?: boolean;
  doubleValue?: number;
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  traceState?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: { key: string; value: OtlpValue }[];
  status: { code?: number; message?: string };
}
interface OtlpRequest {
  resourceSpans: {
    resource: { attributes: { key: string; value: OtlpValue }[] };
    scopeSpans: { scope: { name: string }; spans: OtlpSpan[] }[];
  }[];
}

/** A loopback OTLP/HTTP receiver that keeps every POSTed document (or answers `status` to each). */
class Receiver {
  readonly requests: { path: string; contentType: string | undefined; body: OtlpRequest }[] = [];
  /** Emits "request" after each POST is answered: waits re-check on it. */
  readonly events = new EventEmitter();
  status = 200;
  private readonly server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      if (this.status === 200) {
        this.requests.push({
          path: req.url ?? "",
          contentType: req.headers["content-type"],
          body: JSON.parse(Buffer.concat(chunks).toString("utf8")) as OtlpRequest,
        });
      }
      res.writeHead(this.status, { "content-type": "application/json" });
      res.end("{}");
      this.events.emit("request");
    });
  });

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  spans(): (OtlpSpan & { attrs: Record<string, string | number | boolean | undefined> })[] {
    return this.requests.flatMap((r) =>
      r.body.resourceSpans.flatMap((rs) =>
        rs.scopeSpans.flatMap((ss) =>
          ss.spans.map((span) => ({
            ...span,
            attrs: Object.fromEntries(
              span.attributes.map(({ key, value }) => [
                key,
                value.stringValue ??
                  (value.intValue !== undefined ? Number(value.intValue) : undefined) ??
                  value.boolValue ??
                  value.doubleValue,
              ]),
            ),
          })),
        ),
      ),
    );
  }
}

describe("tracing configuration", () => {
  it("is off by default, and off means no tracer at all", () => {
    const config = parseConfig(
      { backends: [{ id: "a", tier: "small", base_url: "http://127.0.0.1:1", model: "m" }] },
      "t",
    );
    expect(config.server.tracing.enabled).toBe(false);
    expect(
      createRequestTracer(config.server.tracing, pino({ level: "silent" }), systemTimers),
    ).toBeUndefined();
  });

  it("refuses a bad endpoint or sample ratio", () => {
    expect(tracingSchema.safeParse({ endpoint: "ftp://x" }).success).toBe(false);
    expect(tracingSchema.safeParse({ sample_ratio: 1.5 }).success).toBe(false);
  });

  it("reads W3C traceparent headers", () => {
    const id = "4bf92f3577b34da6a3ce929d0e0e4736";
    expect(parseTraceparent(`00-${id}-00f067aa0ba902b7-01`)).toEqual({
      traceId: id,
      parentId: "00f067aa0ba902b7",
      sampled: true,
    });
    expect(parseTraceparent(`00-${id}-00f067aa0ba902b7-00`)?.sampled).toBe(false);
    expect(parseTraceparent(`00-${"0".repeat(32)}-00f067aa0ba902b7-01`)).toBeUndefined();
    expect(parseTraceparent(`ff-${id}-00f067aa0ba902b7-01`)).toBeUndefined();
    expect(parseTraceparent("garbage")).toBeUndefined();
  });
});

describe("tracing on, against a loopback OTLP/HTTP receiver", () => {
  const receiver = new Receiver();
  let cluster: Cluster;

  beforeAll(async () => {
    const url = await receiver.start();
    cluster = await startCluster(
      [
        { id: "small-0", tier: "small" },
        { id: "small-1", tier: "small" },
      ],
      {
        server: {
          tracing: {
            enabled: true,
            endpoint: `${url}/v1/traces`,
            service_name: "gw-test",
            flush_interval_seconds: 0.05,
          },
        },
      },
    );
  });
  afterAll(async () => {
    await cluster?.close();
    await receiver.close();
  });

  it("exports one SERVER span per request with tier, backend, affinity hit and reason", async () => {
    const clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736";
    const clientParent = "00f067aa0ba902b7";
    const first = await chat(cluster.url, { session: "traced" });
    const second = await chat(cluster.url, {
      session: "traced",
      stream: true,
      headers: { traceparent: `00-${clientTrace}-${clientParent}-01`, tracestate: "vendor=1" },
    });
    const bad = await fetch(`${cluster.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{not json",
    });
    await bad.arrayBuffer();
    await (await fetch(`${cluster.url}/metrics`)).arrayBuffer();
    expect([first.status, second.status, bad.status]).toEqual([200, 200, 400]);

    await waitUntil(
      "three spans at the receiver",
      () => receiver.spans().length >= 3,
      eventsOf(receiver.events, "request"),
    );
    const spans = receiver.spans();
    expect(spans).toHaveLength(3);
    expect(
      receiver.requests.every((r) => r.path === "/v1/traces" && r.contentType === "application/json"),
    ).toBe(true);
    const resource = receiver.requests[0]!.body.resourceSpans[0]!.resource.attributes;
    expect(resource).toContainEqual({ key: "service.name", value: { stringValue: "gw-test" } });

    const byRequest = new Map(spans.map((s) => [s.attrs["agentserve.request_id"], s]));
    const one = byRequest.get(first.headers.get("x-request-id") ?? "")!;
    const two = byRequest.get(second.headers.get("x-request-id") ?? "")!;
    const three = byRequest.get(bad.headers.get("x-request-id") ?? "")!;
    for (const span of [one, two, three]) {
      expect(span.kind).toBe(2);
      expect(span.name).toBe("POST /v1/chat/completions");
      expect(span.traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(span.spanId).toMatch(/^[0-9a-f]{16}$/);
      expect(BigInt(span.endTimeUnixNano)).toBeGreaterThanOrEqual(BigInt(span.startTimeUnixNano));
      expect(span.status.code ?? 0).toBe(0);
    }
    expect(one.attrs).toMatchObject({
      "http.request.method": "POST",
      "url.path": "/v1/chat/completions",
      "http.response.status_code": 200,
      "agentserve.session_id": "traced",
      "agentserve.tier": "small",
      "agentserve.backend": first.headers.get("x-agent-serve-backend"),
      "agentserve.affinity_hit": false,
      "agentserve.reason": "new_session",
      "agentserve.attempts": 1,
    });
    expect(two.attrs).toMatchObject({
      "agentserve.tier": "small",
      "agentserve.backend": first.headers.get("x-agent-serve-backend"),
      "agentserve.affinity_hit": true,
      "agentserve.reason": "affinity_hit",
    });
    // The client's trace context is continued; without one, each request starts a trace of its own.
    expect(two.traceId).toBe(clientTrace);
    expect(two.parentSpanId).toBe(clientParent);
    expect(two.traceState).toBe("vendor=1");
    expect(one.parentSpanId).toBeUndefined();
    expect(one.traceId).not.toBe(three.traceId);
    // A refused request is traced with its error code; a 4xx is the client's error, not the span's.
    expect(three.attrs).toMatchObject({
      "http.response.status_code": 400,
      "agentserve.error_code": "invalid_json",
    });
  });

  it("keeps serving when the receiver fails", async () => {
    receiver.status = 500;
    try {
      const before = receiver.requests.length;
      for (let i = 0; i < 3; i++)
        expect((await chat(cluster.url, { session: `failing-${i}` })).status).toBe(200);
      expect(receiver.requests.length).toBe(before);
    } finally {
      receiver.status = 200;
    }
  });
});

describe("sampling", () => {
  function context(path: string, requestId: string): RequestContext {
    return { requestId, startedAtMs: 0, method: "POST", path, attempts: 1, queueWaitMs: 0, tier: "small" };
  }

  it("follows sample_ratio without a traceparent, the client's sampled flag with one; skips probes", async () => {
    const receiver = new Receiver();
    const url = await receiver.start();
    try {
      const tracer = createRequestTracer(
        tracingSchema.parse({ enabled: true, endpoint: `${url}/v1/traces`, sample_ratio: 0 }),
        pino({ level: "silent" }),
        new ManualTimers(new ManualClock()),
      )!;
      const unsampled = context("/v1/completions", "unsampled");
      tracer.begin(unsampled, {});
      tracer.end(unsampled, 200);
      const parentSampled = context("/v1/completions", "parent-sampled");
      tracer.begin(parentSampled, { traceparent: `00-${"a".repeat(32)}-${"b".repeat(16)}-01` });
      tracer.end(parentSampled, 502);
      const parentNotSampled = context("/v1/completions", "parent-not-sampled");
      tracer.begin(parentNotSampled, { traceparent: `00-${"a".repeat(32)}-${"b".repeat(16)}-00` });
      tracer.end(parentNotSampled, 200);
      const probe = context("/healthz", "probe");
      tracer.begin(probe, { traceparent: `00-${"a".repeat(32)}-${"b".repeat(16)}-01` });
      tracer.end(probe, 200);
      await tracer.shutdown();
      const spans = receiver.spans();
      expect(spans.map((s) => s.attrs["agentserve.request_id"])).toEqual(["parent-sampled"]);
      expect(spans[0]!.status).toEqual({ code: 2, message: "HTTP 502" });
    } finally {
      await receiver.close();
    }
  });
});

describe("sampling by trace id (TraceIdRatioBased)", () => {
  const id = (low13: string) => `${"5".repeat(19)}${low13}`;

  it("keeps a trace when its id's last 52 bits, as a fraction, fall under the ratio", () => {
    expect(keptAtRatio(id("0000000000000"), 0.000001)).toBe(true);
    expect(keptAtRatio(id("0000000000000"), 0)).toBe(false);
    expect(keptAtRatio(id("7ffffffffffff"), 0.5)).toBe(true);
    expect(keptAtRatio(id("8000000000000"), 0.5)).toBe(false);
    expect(keptAtRatio(id("8000000000000"), 0.51)).toBe(true);
    expect(keptAtRatio(id("fffffffffffff"), 0.999)).toBe(false);
    expect(keptAtRatio(id("fffffffffffff"), 1)).toBe(true);
  });

  it("decides from the id alone: the bits above the last 52 do not matter", () => {
    expect(keptAtRatio(`${"0".repeat(19)}4000000000000`, 0.3)).toBe(true);
    expect(keptAtRatio(`${"f".repeat(19)}4000000000000`, 0.3)).toBe(true);
    expect(keptAtRatio(`${"f".repeat(19)}4000000000000`, 0.2)).toBe(false);
  });
});

describe("the export loop on injected timers", () => {
  it("sends queued spans when flush_interval_seconds has passed on its timers, not before; none after shutdown", async () => {
    const receiver = new Receiver();
    const url = await receiver.start();
    const timers = new ManualTimers(new ManualClock());
    try {
      const tracer = createRequestTracer(
        tracingSchema.parse({ enabled: true, endpoint: `${url}/v1/traces`, flush_interval_seconds: 5 }),
        pino({ level: "silent" }),
        timers,
      )!;
      const ctx: RequestContext = {
        requestId: "flushed",
        startedAtMs: 0,
        method: "POST",
        path: "/v1/completions",
        attempts: 1,
        queueWaitMs: 0,
      };
      tracer.begin(ctx, {});
      tracer.end(ctx, 200);
      timers.advance(4_999);
      expect(timers.size).toBe(1);
      const sent = eventsOf(receiver.events, "request");
      timers.advance(1);
      await waitUntil("the span at the receiver", () => receiver.spans().length === 1, sent);
      expect(receiver.spans()[0]!.attrs["agentserve.request_id"]).toBe("flushed");
      expect(timers.size).toBe(1); // the loop re-armed itself
      await tracer.shutdown();
      expect(timers.size).toBe(0);
    } finally {
      await receiver.close();
    }
  });
});
