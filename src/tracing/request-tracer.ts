// One OpenTelemetry span per request (kind SERVER), with the gateway's decisions as attributes, batched and
// exported over OTLP/HTTP. The server holds `undefined` instead of a tracer when tracing is off, so the
// request path then pays one optional-chaining check; the OTLP encoder and transport (otlp-exporter.ts)
// are only imported once there is a batch to send.
import { randomBytes } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import type { Logger } from "pino";
import type { Timers } from "../core/clock.js";
import type { RequestContext } from "../gateway/request-context.js";
import type { TracingConfig } from "./config.js";

export type AttributeValue = string | number | boolean;

/** A finished span, in the units OTLP wants (ids in hex, times in ns since the epoch). */
export interface FinishedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  traceState: string | undefined;
  name: string;
  startTimeUnixNano: bigint;
  endTimeUnixNano: bigint;
  attributes: Record<string, AttributeValue>;
  /** Server spans are errors for 5xx answers only (OpenTelemetry's HTTP conventions). */
  error: boolean;
  statusMessage: string | undefined;
}

export interface RequestTracer {
  /** Called when a request arrives: decides sampling and remembers the trace context. */
  begin(ctx: RequestContext, headers: IncomingHttpHeaders): void;
  /** Called when its response is closed: finishes the span and queues it for export. */
  end(ctx: RequestContext, status: number): void;
  /** Stops the timer and sends what is still queued. */
  shutdown(): Promise<void>;
}

/**
 * The tracer for `server.tracing`, or undefined when tracing is off (the server's no-op). Its export loop runs on
 * `timers`: a background loop (the system's unref'd timers; a manual clock's in tests).
 */
export function createRequestTracer(
  config: TracingConfig,
  logger: Logger,
  timers: Timers,
): RequestTracer | undefined {
  return config.enabled ? new BatchingRequestTracer(config, logger, timers) : undefined;
}

/**
 * Whether a new trace is kept at `ratio`, decided by its trace id alone (OpenTelemetry's TraceIdRatioBased
 * sampler): the id's last 52 bits, random, read as a fraction of 2^52. Every service that samples by the same
 * rule keeps the same traces, and no random source is drawn from.
 */
export function keptAtRatio(traceId: string, ratio: number): boolean {
  return parseInt(traceId.slice(-13), 16) / 2 ** 52 < ratio;
}

/** Probes and scrapes are not traced. */
const UNTRACED_PATHS = new Set(["/metrics", "/healthz", "/readyz"]);

interface Started {
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  traceState: string | undefined;
  startTimeUnixNano: bigint;
  startHr: bigint;
}

/** W3C trace context: `version-traceid-parentid-flags`, all lowercase hex. */
export function parseTraceparent(
  value: string | string[] | undefined,
): { traceId: string; parentId: string; sampled: boolean } | undefined {
  if (typeof value !== "string") return undefined;
  const header = value.trim();
  const m = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/.exec(header);
  const version = m?.[1];
  const traceId = m?.[2];
  const parentId = m?.[3];
  const flags = m?.[4];
  if (version === undefined || traceId === undefined || parentId === undefined || flags === undefined)
    return undefined;
  // Version ff is invalid; version 00 has nothing after the flags; all-zero ids are invalid.
  if (version === "ff" || (version === "00" && m?.[5] !== undefined)) return undefined;
  if (/^0+$/.test(traceId) || /^0+$/.test(parentId)) return undefined;
  return { traceId, parentId, sampled: (parseInt(flags, 16) & 1) === 1 };
}

class BatchingRequestTracer implements RequestTracer {
  private readonly started = new WeakMap<RequestContext, Started>();
  private queue: FinishedSpan[] = [];
  private cancelFlush: () => void;
  private stopped = false;
  private exporting: Promise<void> | undefined;
  private exporter: Promise<typeof import("./otlp-exporter.js")> | undefined;
  private dropped = 0;
  private lastFailureLogMs: number | undefined;

  constructor(
    private readonly config: TracingConfig,
    private readonly logger: Logger,
    private readonly timers: Timers,
  ) {
    this.cancelFlush = this.armFlush();
  }

  /** Exporting spans is background I/O: nothing of a request waits on this loop. */
  private armFlush(): () => void {
    return this.timers.after(this.config.flush_interval_seconds * 1000, () => {
      void this.flush();
      if (!this.stopped) this.cancelFlush = this.armFlush();
    });
  }

  begin(ctx: RequestContext, headers: IncomingHttpHeaders): void {
    if (UNTRACED_PATHS.has(ctx.path)) return;
    const parent = parseTraceparent(headers["traceparent"]);
    const traceId = parent?.traceId ?? randomBytes(16).toString("hex");
    const sampled = parent !== undefined ? parent.sampled : keptAtRatio(traceId, this.config.sample_ratio);
    if (!sampled) return;
    const traceState = headers["tracestate"];
    this.started.set(ctx, {
      traceId,
      spanId: randomBytes(8).toString("hex"),
      parentSpanId: parent?.parentId,
      traceState:
        parent !== undefined && typeof traceState === "string" && traceState.length <= 512
          ? traceState
          : undefined,
      startTimeUnixNano: BigInt(Date.now()) * 1_000_000n,
      startHr: process.hrtime.bigint(),
    });
  }

  end(ctx: RequestContext, status: number): void {
    const started = this.started.get(ctx);
    if (started === undefined) return;
    this.started.delete(ctx);
    const attributes: Record<string, AttributeValue> = {
      "http.request.method": ctx.method,
      "url.path": ctx.path,
      "http.response.status_code": status,
      "agentserve.request_id": ctx.requestId,
    };
    const optional: [string, AttributeValue | undefined][] = [
      ["agentserve.session_id", ctx.sessionId],
      ["agentserve.agent_id", ctx.agentId],
      ["agentserve.tier", ctx.tier],
      ["agentserve.backend", ctx.backend],
      ["agentserve.affinity_hit", ctx.affinityHit],
      ["agentserve.reason", ctx.reason],
      ["agentserve.attempts", ctx.attempts > 0 ? ctx.attempts : undefined],
      [
        "agentserve.queue_wait_ms",
        ctx.queueWaitMs > 0 ? Math.round(ctx.queueWaitMs * 1000) / 1000 : undefined,
      ],
      ["agentserve.error_code", ctx.errorCode ?? ctx.streamError],
      ["agentserve.client_closed", ctx.clientClosed],
    ];
    for (const [key, value] of optional) if (value !== undefined) attributes[key] = value;
    const error = status >= 500 || ctx.streamError !== undefined;
    this.enqueue({
      traceId: started.traceId,
      spanId: started.spanId,
      parentSpanId: started.parentSpanId,
      traceState: started.traceState,
      // Known routes only, so unknown paths do not make a span name each.
      name: status === 404 && ctx.tier === undefined ? ctx.method : `${ctx.method} ${ctx.path}`,
      startTimeUnixNano: started.startTimeUnixNano,
      endTimeUnixNano: started.startTimeUnixNano + (process.hrtime.bigint() - started.startHr),
      attributes,
      error,
      statusMessage: error ? (ctx.errorCode ?? ctx.streamError ?? `HTTP ${status}`) : undefined,
    });
  }

  async shutdown(): Promise<void> {
    this.stopped = true;
    this.cancelFlush();
    await this.exporting;
    while (this.queue.length > 0) {
      const before = this.queue.length;
      await this.flush();
      if (this.queue.length >= before) break;
    }
  }

  private enqueue(span: FinishedSpan): void {
    if (this.queue.length >= this.config.max_queue_size) {
      this.dropped++;
      return;
    }
    this.queue.push(span);
    if (this.queue.length >= this.config.max_batch_size) void this.flush();
  }

  /** Sends queued spans, one batch at a time (a flush while one is in progress joins it). */
  private flush(): Promise<void> {
    if (this.exporting !== undefined || this.queue.length === 0) return this.exporting ?? Promise.resolve();
    this.exporting = this.exportBatches().finally(() => {
      this.exporting = undefined;
    });
    return this.exporting;
  }

  private async exportBatches(): Promise<void> {
    this.exporter ??= import("./otlp-exporter.js");
    const { exportSpans } = await this.exporter;
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, this.config.max_batch_size);
      try {
        await exportSpans(batch, {
          endpoint: this.config.endpoint,
          serviceName: this.config.service_name,
          timeoutMs: this.config.export_timeout_seconds * 1000,
        });
      } catch (err) {
        this.dropped += batch.length;
        this.reportFailure(err);
        return;
      }
    }
  }

  /** At most one warning a minute, with the spans dropped since the last one. */
  private reportFailure(err: unknown): void {
    const now = this.timers.nowMs();
    if (this.lastFailureLogMs !== undefined && now - this.lastFailureLogMs < 60_000) return;
    this.lastFailureLogMs = now;
    this.logger.warn(
      {
        endpoint: this.config.endpoint,
        err: err instanceof Error ? err.message : String(err),
        dropped: this.dropped,
      },
      "trace export failed; spans dropped",
    );
    this.dropped = 0;
  }
}
