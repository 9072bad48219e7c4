// Config of where shared state lives (`affinity.store`, `admission.store`) and of engine `discovery` (DNS).
import { z } from "zod";

const positiveInt = (what: string) =>
  z
    .number({ error: `must be ${what}` })
    .int({ error: `must be ${what}` })
    .positive({ error: `must be ${what}` });

/** `redis://[user:pass@]HOST:PORT[/DB]` (or `rediss://` for TLS); the DB a small non-negative integer. */
const redisUrl = z.string({ error: "must be a redis:// URL" }).refine(
  (value) => {
    try {
      const url = new URL(value);
      if (url.protocol !== "redis:" && url.protocol !== "rediss:") return false;
      if (url.hostname === "" || url.search !== "" || url.hash !== "") return false;
      return url.pathname === "" || url.pathname === "/" || /^\/\d{1,2}$/.test(url.pathname);
    } catch {
      return false;
    }
  },
  { error: "must be a redis:// URL: redis://HOST:PORT/DB (rediss:// for TLS)" },
);

const keyPrefix = z
  .string({ error: "must be a string" })
  .regex(/^[A-Za-z0-9:._-]{1,64}$/, { error: "must be 1-64 of letters, digits, ':', '.', '_' or '-'" });

const envName = z
  .string({ error: "must be an environment variable name" })
  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: "must be an environment variable name" });

function storeSchema(defaultPrefix: string) {
  const memory = z.strictObject({ kind: z.literal("memory") });
  const redis = z.strictObject({
    kind: z.literal("redis"),
    /** Unset only when url_env names the variable holding it. */
    url: redisUrl.optional(),
    /** A store call slower than this fails open: the replica decides locally (never fails the request). */
    timeout_ms: positiveInt("a positive integer (milliseconds)")
      .max(10_000, { error: "must be at most 10000" })
      .default(50),
    /** Every key starts with it, so several gateways (or tests) can share one Redis. */
    key_prefix: keyPrefix.default(defaultPrefix),
    /** The environment variable holding the whole URL (a Kubernetes Secret's key): it replaces `url`. */
    url_env: envName.optional(),
    /** The environment variable holding the password (Redis AUTH, Valkey's requirepass): it replaces the URL's. */
    password_env: envName.optional(),
    /** Speak TLS even to a redis:// URL (rediss:// always does). */
    tls: z.boolean({ error: "must be true or false" }).optional(),
    /** A PEM file of the CA that signed the server's certificate (a private CA); unset: the system's CAs. */
    tls_ca_file: z.string({ error: "must be a file path" }).min(1).optional(),
  });
  return z
    .discriminatedUnion("kind", [memory, redis], {
      error: "must be {kind: memory} or {kind: redis, url, timeout_ms, key_prefix}",
    })
    .superRefine((store, ctx) => {
      if (store.kind === "redis" && store.url === undefined && store.url_env === undefined)
        ctx.addIssue({
          code: "custom",
          path: ["url"],
          message: "must be a redis:// URL",
        });
    })
    .default({ kind: "memory" });
}

/** `affinity.store`: where session bindings live. */
export const bindingStoreSchema = storeSchema("agentserve:aff:");

/** `admission.store`: where token budgets are counted. */
export const budgetStoreSchema = storeSchema("agentserve:budget:");

/** A DNS name whose records are the engines of one tier (a Kubernetes headless Service). */
const discoveryEntrySchema = z.strictObject({
  /** The DNS name to resolve (e.g. `vllm.inference.svc.cluster.local`, or `_http._tcp.vllm...` for SRV). */
  name: z
    .string({ error: "must be a DNS name" })
    .regex(/^(?=.{1,253}$)[A-Za-z0-9_]([A-Za-z0-9_-]{0,62})(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,62}))*\.?$/, {
      error: "must be a DNS name",
    }),
  tier: z.string({ error: "must be a tier name" }).regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, {
    error: "must be a tier name: 1-64 of letters, digits, '.', '_' or '-'",
  }),
  type: z.enum(["A", "AAAA", "SRV"], { error: "must be A, AAAA or SRV" }).default("A"),
  /** The engines' port for A/AAAA records (SRV records carry their own). */
  port: z
    .number({ error: "must be a TCP port (1-65535)" })
    .int({ error: "must be a TCP port (1-65535)" })
    .min(1, { error: "must be a TCP port (1-65535)" })
    .max(65535, { error: "must be a TCP port (1-65535)" })
    .optional(),
  scheme: z.enum(["http", "https"], { error: "must be http or https" }).default("http"),
  model: z.string({ error: "must be the model id the engines serve" }).min(1, { error: "must not be empty" }),
  max_inflight: positiveInt("a positive integer").default(64),
  weight: z
    .number({ error: "must be a positive number" })
    .positive({ error: "must be a positive number" })
    .default(1),
  refresh_seconds: z
    .number({ error: "must be a positive number" })
    .positive({ error: "must be a positive number" })
    .default(10),
  /** DNS servers (`HOST:PORT`) to ask instead of the system's resolvers. */
  servers: z.array(z.string({ error: "must be HOST or HOST:PORT" }).min(1)).optional(),
  /** Each engine found publishes vLLM's KV events on this port of its address (and replays on replay_port). */
  kv_events: z
    .strictObject({
      port: z.number({ error: "must be a TCP port (1-65535)" }).int().min(1).max(65535),
      replay_port: z.number({ error: "must be a TCP port (1-65535)" }).int().min(1).max(65535).optional(),
      topic: z.string({ error: "must be a string" }).default(""),
      max_blocks: positiveInt("a positive integer").max(50_000_000).default(1_000_000),
    })
    .optional(),
});

/** `discovery`: DNS names resolved into backends of a tier, besides the static `backends`. */
export const discoverySchema = z
  .array(discoveryEntrySchema, { error: "must be a list of {name, tier, type, port, model, ...}" })
  .default([])
  .superRefine((entries, ctx) => {
    entries.forEach((entry, index) => {
      if (entry.type !== "SRV" && entry.port === undefined) {
        ctx.addIssue({
          code: "custom",
          path: [index, "port"],
          message: "is required for A and AAAA records",
        });
      }
    });
  });

export type StoreConfig = z.output<ReturnType<typeof storeSchema>>;
export type RedisStoreConfig = Extract<StoreConfig, { kind: "redis" }>;
export type DiscoveryConfig = z.output<typeof discoveryEntrySchema>;
