// `server.tracing`: optional OpenTelemetry tracing of requests, exported over OTLP/HTTP. Off by default.
import { z } from "zod";

const positiveNumber = z
  .number({ error: "must be a positive number" })
  .positive({ error: "must be a positive number" });
const positiveInt = z
  .number({ error: "must be a positive integer" })
  .int({ error: "must be a positive integer" })
  .positive({ error: "must be a positive integer" });

const otlpEndpoint = z.string({ error: "must be an http(s) URL" }).refine(
  (value) => {
    try {
      const url = new URL(value);
      return url.protocol === "http:" || url.protocol === "https:";
    } catch {
      return false;
    }
  },
  { error: "must be an http(s) URL, e.g. http://127.0.0.1:4318/v1/traces" },
);

export const tracingSchema = z.strictObject({
  /** Off: no span is made and the exporter is never loaded. */
  enabled: z.boolean({ error: "must be true or false" }).default(false),
  /** OTLP/HTTP traces endpoint (JSON encoding), e.g. an OpenTelemetry Collector's /v1/traces on :4318. */
  endpoint: otlpEndpoint.default("http://127.0.0.1:4318/v1/traces"),
  /** The `service.name` resource attribute. */
  service_name: z.string({ error: "must be a string" }).min(1).default("agent-serve"),
  /** Share of requests traced when the client sent no `traceparent`; a client's sampled flag is followed. */
  sample_ratio: z
    .number({ error: "must be a number from 0 to 1" })
    .min(0, { error: "must be a number from 0 to 1" })
    .max(1, { error: "must be a number from 0 to 1" })
    .default(1),
  /** Finished spans are sent at least this often... */
  flush_interval_seconds: positiveNumber.default(5),
  /** ...or as soon as this many are waiting. */
  max_batch_size: positiveInt.default(512),
  /** Spans waiting for export at most; beyond it new spans are dropped (and counted in the log). */
  max_queue_size: positiveInt.default(2048),
  export_timeout_seconds: positiveNumber.default(10),
});

export type TracingConfig = z.output<typeof tracingSchema>;
