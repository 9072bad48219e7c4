// OTLP/HTTP trace export with the JSON encoding (ExportTraceServiceRequest), as OpenTelemetry Collectors,
// Jaeger and Tempo accept on :4318/v1/traces. Loaded by request-tracer.ts only when tracing is on.
import { GatewayError } from "../core/errors.js";
import type { AttributeValue, FinishedSpan } from "./request-tracer.js";

export interface ExportTarget {
  endpoint: string;
  serviceName: string;
  timeoutMs: number;
}

/** OTLP's Span.SpanKind and Status.StatusCode values. */
const SPAN_KIND_SERVER = 2;
const STATUS_CODE_ERROR = 2;

type OtlpAnyValue =
  { stringValue: string } | { intValue: string } | { doubleValue: number } | { boolValue: boolean };

function anyValue(value: AttributeValue): OtlpAnyValue {
  if (typeof value === "string") return { stringValue: value };
  if (typeof value === "boolean") return { boolValue: value };
  return Number.isInteger(value) ? { intValue: String(value) } : { doubleValue: value };
}

function attributes(record: Record<string, AttributeValue>): { key: string; value: OtlpAnyValue }[] {
  return Object.entries(record).map(([key, value]) => ({ key, value: anyValue(value) }));
}

/** The OTLP/JSON document for a batch of spans (ids as hex strings, times as decimal strings of ns). */
export function encodeSpans(spans: readonly FinishedSpan[], serviceName: string): unknown {
  return {
    resourceSpans: [
      {
        resource: { attributes: attributes({ "service.name": serviceName }) },
        scopeSpans: [
          {
            scope: { name: "agent-serve" },
            spans: spans.map((span) => ({
              traceId: span.traceId,
              spanId: span.spanId,
              ...(span.parentSpanId === undefined ? {} : { parentSpanId: span.parentSpanId }),
              ...(span.traceState === undefined ? {} : { traceState: span.traceState }),
              name: span.name,
              kind: SPAN_KIND_SERVER,
              startTimeUnixNano: span.startTimeUnixNano.toString(),
              endTimeUnixNano: span.endTimeUnixNano.toString(),
              attributes: attributes(span.attributes),
              status: span.error ? { code: STATUS_CODE_ERROR, message: span.statusMessage ?? "" } : {},
            })),
          },
        ],
      },
    ],
  };
}

/** POSTs one batch; throws when the receiver does not answer 2xx in time. */
export async function exportSpans(spans: readonly FinishedSpan[], target: ExportTarget): Promise<void> {
  const response = await fetch(target.endpoint, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(encodeSpans(spans, target.serviceName)),
    signal: AbortSignal.timeout(target.timeoutMs),
  });
  await response.arrayBuffer();
  if (response.status < 200 || response.status >= 300)
    throw new GatewayError("upstream_error", `OTLP receiver answered HTTP ${response.status}`);
}
