// The gateway's configuration schema: the only source of config types, defaults and validation messages.
import { z } from "zod";
import { BALANCER_NAMES } from "../affinity/balancers.js";
import {
  LLMD_CONFIG_DEFAULTS,
  POLICY_NAMES,
  SGLANG_CONFIG_DEFAULTS,
} from "../affinity/policies/create-policy.js";
import { SESSIONLESS_MODES } from "../affinity/decide.js";
import { FLOW_POLICY_NAMES } from "../admission/flow-queue/types.js";
import { tracingSchema } from "../tracing/config.js";
import { bindingStoreSchema, budgetStoreSchema, discoverySchema } from "./shared-state.js";

const positiveInt = (what: string) =>
  z
    .number({ error: `must be ${what}` })
    .int({ error: `must be ${what}` })
    .positive({ error: `must be ${what}` });
const nonNegativeNumber = (what: string) =>
  z.number({ error: `must be ${what}` }).nonnegative({ error: `must be ${what}` });
const nonNegativeInt = (what: string) =>
  z
    .number({ error: `must be ${what}` })
    .int({ error: `must be ${what}` })
    .nonnegative({ error: `must be ${what}` });
const positiveNumber = (what: string) =>
  z.number({ error: `must be ${what}` }).positive({ error: `must be ${what}` });

const idPattern = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const identifier = (what: string) =>
  z.string({ error: `must be ${what}` }).regex(idPattern, {
    error: `must be ${what}: 1-64 of letters, digits, '.', '_' or '-', starting with a letter or digit`,
  });

const httpUrl = z.string({ error: "must be an http(s) URL" }).refine(
  (value) => {
    try {
      const url = new URL(value);
      return (url.protocol === "http:" || url.protocol === "https:") && url.search === "" && url.hash === "";
    } catch {
      return false;
    }
  },
  { error: "must be an http(s) URL without query or fragment" },
);

/** How `agent-serve start` runs a simulated engine in place of this backend (demo and studies only). */
const simulateSchema = z.strictObject({
  profile: z.string({ error: "must be a simulator profile name" }).default("qwen2.5-7b"),
  time_scale: positiveNumber("a positive number").default(1),
  seed: z.number({ error: "must be an integer" }).int({ error: "must be an integer" }).optional(),
  /** Context window in tokens (default: the profile's; coding agents need 128k: max_tokens 32000 over ~26k). */
  max_model_len: positiveInt("a positive integer").optional(),
  /** Scripted mode: a script file (docs/simulator.md#scripted-mode), relative to the working directory. */
  script: z.string({ error: "must be a file path" }).min(1, { error: "must not be empty" }).optional(),
  /**
   * Chance of a made-up tool call when a request offers tools. 0 by default here, unlike `agent-serve sim`: a
   * coding agent runs the calls it gets on the user's machine, so a demo engine makes none unless asked.
   */
  tool_call_rate: z.number({ error: "must be a number from 0 to 1" }).min(0).max(1).default(0),
  tool_call_rate_after_result: z.number({ error: "must be a number from 0 to 1" }).min(0).max(1).optional(),
  parallel_tool_call_rate: z.number({ error: "must be a number from 0 to 1" }).min(0).max(1).optional(),
});

/**
 * Where an engine publishes vLLM's KV events (its `--kv-events-config`), so placement knows what it holds
 * (src/kv-events; docs/kv-events.md).
 */
export const backendKvEventsSchema = z.strictObject({
  /** The engine's ZMQ PUB address as the gateway reaches it, e.g. `tcp://10.0.0.5:5557`. */
  endpoint: z
    .string({ error: "must be a ZMQ address (tcp://HOST:PORT or ipc://PATH)" })
    .regex(/^(tcp:\/\/.+:\d+|ipc:\/\/.+)$/, {
      error: "must be a ZMQ address (tcp://HOST:PORT or ipc://PATH)",
    }),
  /** Its replay ROUTER (vLLM's `replay_endpoint`): missed batches are fetched from it. */
  replay_endpoint: z
    .string({ error: "must be a ZMQ address (tcp://HOST:PORT or ipc://PATH)" })
    .regex(/^(tcp:\/\/.+:\d+|ipc:\/\/.+)$/, {
      error: "must be a ZMQ address (tcp://HOST:PORT or ipc://PATH)",
    })
    .optional(),
  /** vLLM's `topic` (default ""). */
  topic: z.string({ error: "must be a string" }).default(""),
  /** Most blocks the gateway's index of this engine keeps (about the engine's KV capacity in blocks). */
  max_blocks: positiveInt("a positive integer")
    .max(50_000_000, { error: "must be at most 50000000" })
    .default(1_000_000),
});

const backendSchema = z.strictObject({
  id: identifier("a backend id"),
  tier: identifier("a tier name"),
  base_url: httpUrl,
  model: z.string({ error: "must be the model id the engine serves" }).min(1, { error: "must not be empty" }),
  max_inflight: positiveInt("a positive integer").default(64),
  /** Weighted rendezvous share: a backend of weight 2 takes about twice the new sessions of weight 1. */
  weight: positiveNumber("a positive number").default(1),
  /** Informational only, as in the original (shown by the admin API). */
  gpu: z.string({ error: "must be a string" }).optional(),
  /**
   * Name of an environment variable holding the engine's API key (sent as a bearer token). The key itself
   * never sits in the file, and the clients' own credentials are never forwarded.
   */
  api_key_env: z
    .string({ error: "must be an environment variable name" })
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: "must be an environment variable name" })
    .optional(),
  simulate: simulateSchema.optional(),
  kv_events: backendKvEventsSchema.optional(),
});

/** A client API key, stored as the SHA-256 of the key (hex), optionally tied to the agent it charges. */
const apiKeySchema = z.strictObject({
  sha256: z
    .string({ error: "must be the hex SHA-256 of the key (agent-serve hash-key KEY prints it)" })
    .regex(/^[0-9a-f]{64}$/, {
      error: "must be the hex SHA-256 of the key (agent-serve hash-key KEY prints it)",
    }),
  /** Requests with this key are charged to this agent, whatever X-Agent-Id says. */
  agent_id: z.string({ error: "must be a string" }).min(1).max(128).optional(),
  /** The highest X-Priority band this key's requests may ask for; unset: admission.scheduling.max_header_priority. */
  max_priority: nonNegativeInt("a non-negative integer").optional(),
});

const serverSchema = z.strictObject({
  host: z.string({ error: "must be a host name or address" }).min(1).default("0.0.0.0"),
  port: z
    .number({ error: "must be a TCP port (0-65535)" })
    .int({ error: "must be a TCP port (0-65535)" })
    .min(0, { error: "must be a TCP port (0-65535)" })
    .max(65535, { error: "must be a TCP port (0-65535)" })
    .default(8000),
  /** Bearer token for /admin; AGENT_SERVE_ADMIN_TOKEN overrides it. Admin is disabled when neither is set. */
  admin_token: z
    .string({ error: "must be a string" })
    .min(16, { error: "must be at least 16 characters" })
    .optional(),
  max_body_bytes: positiveInt("a positive integer").default(8 * 1024 * 1024),
  /**
   * A client must have sent its request headers within this long (a client that trickles them, slowloris,
   * holds a connection for nothing): 408 after it, and the connection is closed.
   */
  headers_timeout_seconds: positiveNumber("a positive number").default(20),
  /** ... and its whole request, body included, within this long: 408 after it (at least headers_timeout_seconds). */
  receive_timeout_seconds: positiveNumber("a positive number").default(60),
  /** How long Ctrl-C / SIGTERM waits for in-flight requests before closing them. */
  shutdown_grace_seconds: nonNegativeNumber("a non-negative number").default(10),
  /**
   * Open client connections at most; idle ones are closed first as it nears. Unset: derived at start from
   * the process's open-file limit (what the engine connections leave of it), at most 10,000.
   */
  max_connections: positiveInt("a positive integer").optional(),
  /** Client API keys; when any is set, every /v1 request needs `Authorization: Bearer <key>`. */
  api_keys: z.array(apiKeySchema, { error: "must be a list of {sha256, agent_id}" }).default([]),
  /** Start on a non-loopback host without api_keys (src/config/exposure.ts): only behind something that authenticates. */
  allow_open: z.boolean({ error: "must be true or false" }).default(false),
  /** Add the last message of each request to its log line (off: prompts are never logged). */
  log_prompts: z.boolean({ error: "must be true or false" }).default(false),
  /** The log on stdout: `json` lines, or `pretty` lines for a person; unset: pretty on a terminal, json otherwise. */
  log_format: z.enum(["pretty", "json"], { error: "must be pretty or json" }).optional(),
  /** Optional OpenTelemetry tracing over OTLP/HTTP, off by default (src/tracing/config.ts). */
  tracing: tracingSchema.prefault({}),
  /**
   * Serve /admin on this port of its own (and no longer on `port`), so that a Service, a NetworkPolicy or a
   * firewall can keep it apart from the API; unset: /admin shares the API's port. 0: OS-assigned.
   */
  admin_port: z
    .number({ error: "must be a TCP port (0-65535)" })
    .int({ error: "must be a TCP port (0-65535)" })
    .min(0, { error: "must be a TCP port (0-65535)" })
    .max(65535, { error: "must be a TCP port (0-65535)" })
    .optional(),
  /** The interface of admin_port; unset: `host`. */
  admin_host: z.string({ error: "must be a host name or address" }).min(1).optional(),
});

/** Who goes next when engines are full: flows (agents), priority bands, a policy per band (src/admission/flow-queue). */
const schedulingSchema = z.strictObject({
  /** Order within a band: `fifo`, `fair` (round-robin between flows) or `least-attained` (least service first). */
  policy: z
    .enum(FLOW_POLICY_NAMES, { error: `must be one of ${FLOW_POLICY_NAMES.join(", ")}` })
    .default("least-attained"),
  /** least-attained: service this long ago counts half. */
  half_life_seconds: positiveNumber("a positive number").default(120),
  /** Priority bands 0 (lowest) .. bands-1 (highest), served in strict priority. */
  bands: positiveInt("a positive integer").max(16, { error: "must be at most 16" }).default(3),
  /** The band of requests whose agent has none configured and that send no X-Priority. */
  default_band: nonNegativeInt("a non-negative integer").default(1),
  /** The highest band X-Priority may ask for without an API key that allows more; unset: default_band. */
  max_header_priority: nonNegativeInt("a non-negative integer").optional(),
  /** Flows whose attained service is remembered at most (least recently served forgotten first). */
  max_flows: positiveInt("a positive integer").default(10_000),
  /** Flows named in agentserve_flow_served_tokens_total at most (the top ones by tokens served). */
  metrics_top_flows: positiveInt("a positive integer")
    .max(1000, { error: "must be at most 1000" })
    .default(20),
  /** With admission.store kind redis: how often each replica adds its service to the shared counters. */
  sync_interval_ms: positiveInt("a positive integer").default(1000),
  /** Per-agent band and weight (an agent of weight 2 is charged half the service per token: twice the share). */
  agents: z
    .record(
      z.string(),
      z.strictObject({
        band: nonNegativeInt("a non-negative integer").optional(),
        weight: positiveNumber("a positive number").default(1),
      }),
      { error: "must map agent ids to {band, weight}" },
    )
    .default({}),
});

const admissionSchema = z.strictObject({
  default_token_budget: positiveInt("a positive integer").default(100_000),
  budget_window_seconds: positiveNumber("a positive number").default(3600),
  max_queue_size: z
    .number({ error: "must be a non-negative integer" })
    .int({ error: "must be a non-negative integer" })
    .nonnegative({ error: "must be a non-negative integer" })
    .default(256),
  queue_timeout_seconds: positiveNumber("a positive number").default(30),
  /** Per-agent budgets that differ from default_token_budget. */
  agents: z
    .record(z.string(), z.strictObject({ token_budget: positiveInt("a positive integer") }), {
      error: "must map agent ids to {token_budget}",
    })
    .default({}),
  /** Agents whose usage is remembered at most (least recently seen forgotten first): bounds memory. */
  max_agents: positiveInt("a positive integer").default(100_000),
  /** Charge requests without an agent id (X-Agent-Id or an API key's agent) to one shared budget. */
  budget_anonymous: z.boolean({ error: "must be true or false" }).default(false),
  /** Where budgets are counted: `{kind: memory}` (per process) or `{kind: redis, ...}` (shared by replicas). */
  store: budgetStoreSchema,
  /** Engine slots one agent may hold at once across the gateway (its other requests wait); 0: no cap. */
  max_inflight_per_agent: nonNegativeInt("a non-negative integer").default(0),
  /** Flows, priority bands and the policy that orders waiting requests. */
  scheduling: schedulingSchema.prefault({}),
});

/** The LLM tier classifier: asked when the rules do not decide an `auto` request (off by default). */
const classifierSchema = z.strictObject({
  enabled: z.boolean({ error: "must be true or false" }).default(false),
  /** The tier whose engines answer it; unset: the default tier (usually small). */
  tier: identifier("a tier name").optional(),
  /** The tiers it chooses between; unset: routing's default and long-prompt tiers (all tiers if no such pair). */
  tiers: z.array(identifier("a tier name"), { error: "must be a list of tier names" }).min(1).optional(),
  /** The model asked; unset: the model of that tier's first backend. */
  model: z.string({ error: "must be a model id" }).min(1, { error: "must be a model id" }).optional(),
  /** The system prompt; unset: a built-in one that lists the tiers. */
  prompt: z.string({ error: "must be a string" }).min(1, { error: "must not be empty" }).optional(),
  /** Longest a request waits for the verdict before the rules' default stands. */
  timeout_ms: positiveInt("a positive integer").default(1500),
  /** How long a verdict is reused for the same question; unset: routing.classifier_cache_ttl_seconds. */
  cache_ttl_seconds: nonNegativeNumber("a non-negative number").optional(),
  /** Cap of the verdict cache (least recently used forgotten first). */
  max_entries: positiveInt("a positive integer").default(10_000),
});

const routingSchema = z.strictObject({
  /** Combined prompt length (characters) at or above which `auto` picks the big tier. */
  prompt_length_threshold: positiveInt("a positive integer").default(2000),
  /** The original's key: the classifier's cache TTL when routing.classifier.cache_ttl_seconds is unset. */
  classifier_cache_ttl_seconds: nonNegativeNumber("a non-negative number").default(300),
  classifier: classifierSchema.prefault({}),
  tool_followup_stays_same_tier: z.boolean({ error: "must be true or false" }).default(true),
  /** Tier `auto` picks for ordinary prompts; unset: "small" if such a tier exists, else the first tier listed. */
  default_tier: identifier("a tier name").optional(),
  /** Tier `auto` picks for long prompts; unset: "big" if such a tier exists, else no long-prompt rule. */
  long_prompt_tier: identifier("a tier name").optional(),
  /**
   * Under `auto`, a session bound to an engine keeps that engine's tier (the rules pick a new session's tier):
   * a growing prompt crossing prompt_length_threshold no longer moves it and loses its cache.
   */
  session_stays_same_tier: z.boolean({ error: "must be true or false" }).default(true),
});

/** SGLang's cache-aware policy (affinity.policy: sglang_cache_aware), at sgl-router's defaults. */
const sglangSchema = z
  .strictObject({
    cache_threshold: z
      .number({ error: "must be a number" })
      .min(0)
      .max(1)
      .default(SGLANG_CONFIG_DEFAULTS.cache_threshold),
    balance_abs_threshold: z
      .number({ error: "must be a number" })
      .min(0)
      .default(SGLANG_CONFIG_DEFAULTS.balance_abs_threshold),
    balance_rel_threshold: z
      .number({ error: "must be a number" })
      .min(1)
      .default(SGLANG_CONFIG_DEFAULTS.balance_rel_threshold),
    eviction_interval_seconds: nonNegativeNumber("a non-negative number").default(
      SGLANG_CONFIG_DEFAULTS.eviction_interval_seconds,
    ),
    max_tree_chars: positiveInt("a positive integer").default(SGLANG_CONFIG_DEFAULTS.max_tree_chars),
  })
  .prefault({});

/** llm-d's default scorer mix (affinity.policy: llmd_scorers), at its default weights. */
const llmdSchema = z
  .strictObject({
    prefix_cache_weight: nonNegativeNumber("a non-negative number").default(
      LLMD_CONFIG_DEFAULTS.prefix_cache_weight,
    ),
    queue_weight: nonNegativeNumber("a non-negative number").default(LLMD_CONFIG_DEFAULTS.queue_weight),
    kv_cache_weight: nonNegativeNumber("a non-negative number").default(LLMD_CONFIG_DEFAULTS.kv_cache_weight),
    block_chars: positiveInt("a positive integer").default(LLMD_CONFIG_DEFAULTS.block_chars),
    max_blocks: positiveInt("a positive integer").default(LLMD_CONFIG_DEFAULTS.max_blocks),
    lru_capacity_per_backend: positiveInt("a positive integer").default(
      LLMD_CONFIG_DEFAULTS.lru_capacity_per_backend,
    ),
  })
  .prefault({});

/** An HTTP header name (RFC 9110 token), compared in lower case as node gives them. */
const headerName = z
  .string({ error: "must be a header name" })
  .regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/, { error: "must be a header name" })
  .transform((name) => name.toLowerCase());
/** A body field: names joined by dots (metadata.user_id). */
const bodyField = z
  .string({ error: "must be a body field such as prompt_cache_key or metadata.user_id" })
  .regex(/^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,7}$/, {
    error: "must be a body field such as prompt_cache_key or metadata.user_id",
  });
/** Key each thread of a session (system prompt and first turn) on its own: a coding agent's sub-agents. */
const splitThreads = z.boolean({ error: "must be true or false" }).default(false);

/**
 * One source of a session id (affinity.session_keys): a header, a body field (a string, or with `json` the named
 * member of the JSON or Claude Code's `..._session_<id>` string it holds), or a Responses chain's root.
 */
const sessionKeySchema = z.union(
  [
    z.strictObject({ header: headerName, split_threads: splitThreads }),
    z.strictObject({
      body: bodyField,
      json: z.string({ error: "must be a member name" }).min(1).max(64).optional(),
      split_threads: splitThreads,
    }),
    z.strictObject({ responses_chain: z.literal(true, { error: "must be true" }) }),
  ],
  { error: "must be {header: NAME}, {body: FIELD[, json: MEMBER]} or {responses_chain: true}" },
);
export type SessionKeyConfig = z.output<typeof sessionKeySchema>;

/** The signals coding agents and SDKs already send, most explicit first (docs/clients.md says who sends what). */
export const DEFAULT_SESSION_KEYS: readonly SessionKeyConfig[] = [
  { header: "x-session-id", split_threads: false },
  // Claude Code (2.1.332 and 2.1.337 checked) marks its sub-agents' calls (only those) with their own agent id
  { header: "x-claude-code-agent-id", split_threads: false },
  { header: "x-claude-code-session-id", split_threads: true },
  { header: "session-id", split_threads: true },
  { header: "session_id", split_threads: true },
  { header: "x-session-affinity", split_threads: false },
  { body: "prompt_cache_key", split_threads: true },
  { body: "metadata.user_id", json: "session_id", split_threads: true },
  { responses_chain: true },
];

/** Route receipts (src/receipts): remembered per session within max_bindings, in affinity.store. */
const receiptsSchema = z
  .strictObject({
    enabled: z.boolean({ error: "must be true or false" }).default(true),
    /** The engines' KV block size: only whole blocks are reusable (vLLM's default block size is 16). */
    block_tokens: positiveInt("a positive integer").max(1024, { error: "must be at most 1024" }).default(16),
    /** How long a session's last turn is remembered (longer than sticky_ttl_seconds, to tell an expired binding). */
    ttl_seconds: positiveNumber("a positive number").default(7200),
  })
  .prefault({});

const affinitySchema = z.strictObject({
  /** How long a binding lives without activity; 0 disables affinity for real (no bindings, no HRW). */
  sticky_ttl_seconds: nonNegativeNumber("a non-negative number").default(1800),
  /** false: sessions that moved during an outage stay where their cache is now warm. */
  rebalance_on_backend_recovery: z.boolean({ error: "must be true or false" }).default(false),
  max_bindings: positiveInt("a positive integer")
    .max(100_000_000, { error: "must be at most 100000000 (about 12 GB of heap)" })
    .default(1_000_000),
  /** Placement when affinity does not decide (TTL 0, no session id). */
  balancer: z
    .enum(BALANCER_NAMES, { error: `must be one of ${BALANCER_NAMES.join(", ")}` })
    .default("least_inflight"),
  /**
   * Bounded-load factor c: a new (or rebinding) session, a spill or a prefix placement goes to the first
   * backend of its rendezvous ranking whose load stays at most ceil(c x its share of the tier's load);
   * 0 turns the bound and spilling off (plain rendezvous). docs/affinity.md.
   */
  load_factor: z
    .number({ error: "must be 0 (off) or a number >= 1" })
    .refine((value) => value === 0 || (value >= 1 && Number.isFinite(value)), {
      error: "must be 0 (off) or a number >= 1",
    })
    .default(1.25),
  /** Requests without a session id: `prefix` ranks by the prompt's shared leading part, `balancer` as before. */
  sessionless: z
    .enum(SESSIONLESS_MODES, { error: `must be one of ${SESSIONLESS_MODES.join(", ")}` })
    .default("prefix"),
  /**
   * hrw: session affinity as above. sglang_cache_aware / llm-d's llmd_scorers: that router's policy places
   * every request instead, session ids ignored (src/affinity/policies; docs/placement-policies.md).
   */
  policy: z.enum(POLICY_NAMES, { error: `must be one of ${POLICY_NAMES.join(", ")}` }).default("hrw"),
  sglang: sglangSchema,
  llmd: llmdSchema,
  /** Where a request's session id comes from, first present wins (src/gateway/session-identity.ts). */
  session_keys: z
    .array(sessionKeySchema, { error: "must be a list" })
    .max(32, { error: "must have at most 32 entries" })
    .default(() => [...DEFAULT_SESSION_KEYS]),
  /** Where bindings live: `{kind: memory}` (per process) or `{kind: redis, ...}` (shared by replicas). */
  store: bindingStoreSchema,
  /** Route receipts: per turn, the cache it could reuse, what it did, and why the rest was lost (src/receipts). */
  receipts: receiptsSchema,
  /** Placement by what engines that publish KV events hold (backends[].kv_events; docs/kv-events.md). */
  kv_events: z
    .strictObject({
      /**
       * A bound session moves off its engine only to another (with a free slot, and cheaper by the KV cost) that
       * holds at least this many more tokens of its prompt: its engine evicted it and another has it.
       */
      move_min_tokens: positiveInt("a positive integer").default(2048),
      /**
       * A prompt token's attention work per token of context before it, as a share of the rest of its prefill
       * work: 2 x hidden size x layers / parameters of the engines' model (Qwen2.5-7B 2.6e-5, Llama-3-8B 3.3e-5,
       * Llama-3-70B 1.9e-5). The KV cost weighs prefill by it (docs/kv-events.md, Placement); 0 counts tokens alike.
       */
      prefill_context_weight: z
        .number({ error: "must be a number from 0 to 0.001" })
        .min(0, { error: "must be a number from 0 to 0.001" })
        .max(0.001, { error: "must be a number from 0 to 0.001" })
        .default(2.7e-5),
      /** How long a replay request to an engine may take before the gap counts as lost. */
      replay_timeout_seconds: positiveNumber("a positive number").default(5),
    })
    .prefault({}),
});

/** The Responses API: which engine stores each response, so that `previous_response_id` finds it again. */
const responsesSchema = z.strictObject({
  /** How long the gateway remembers a response's engine after its last use. */
  ttl_seconds: positiveNumber("a positive number").default(86_400),
  /** Cap of that table (least recently used forgotten first). */
  max_entries: positiveInt("a positive integer").max(100_000_000).default(1_000_000),
});

/**
 * What the gateway changes in a request a stock engine would refuse (each on by default, each can be turned off):
 * see src/gateway/adaptation/.
 */
const adaptationSchema = z.strictObject({
  /** Offer a Responses `namespace` tool's functions as plain functions `<namespace>__<name>`; map calls back. */
  flatten_namespaces: z.boolean({ error: "must be true or false" }).default(true),
  /** Drop tools the provider runs (web_search, file_search, ... and Anthropic server tools such as web search). */
  drop_hosted_tools: z.boolean({ error: "must be true or false" }).default(true),
  /**
   * Fold a Messages request's `role: "system"` messages into the user turn beside them (vLLM before 0.24 refuses
   * them; some templates refuse a system turn that is not first); never moved into the top-level system prompt.
   */
  fold_system_messages: z.boolean({ error: "must be true or false" }).default(true),
  /** Drop Claude Code's `x-anthropic-billing-header: ...` block from `system` (it varies at the prompt's head). */
  drop_billing_header: z.boolean({ error: "must be true or false" }).default(true),
});

const healthSchema = z.strictObject({
  probe_interval_seconds: positiveNumber("a positive number").default(10),
  failures_to_mark_down: positiveInt("a positive integer").default(3),
  successes_to_mark_up: positiveInt("a positive integer").default(2),
  probe_timeout_seconds: positiveNumber("a positive number").default(5),
  /** How often the gateway reads each engine's /metrics (load, KV-cache usage, prefix-cache hits); 0: never. */
  engine_metrics_interval_seconds: nonNegativeNumber("a non-negative number").default(5),
  /** Consecutive failed or timed-out requests that eject an engine even while its probes pass. */
  ejection_consecutive_failures: positiveInt("a positive integer").default(3),
  /** The first ejection's length; each further one doubles, up to ejection_max_seconds. */
  ejection_base_seconds: positiveNumber("a positive number").default(30),
  ejection_max_seconds: positiveNumber("a positive number").default(300),
  /**
   * An engine with requests in flight whose prompt + generated token counters (its /metrics) have not moved
   * for this long is hung and ejected; 0 turns it off (so does engine_metrics_interval_seconds 0).
   */
  stall_seconds: nonNegativeNumber("a non-negative number").default(30),
});

const upstreamSchema = z.strictObject({
  connect_timeout_seconds: positiveNumber("a positive number").default(2),
  /** Time to the engine's response headers; a hanging engine is abandoned (and retried elsewhere) after it. */
  first_byte_timeout_seconds: positiveNumber("a positive number").default(300),
  /**
   * A stream's first chunk comes after the engine's prefill (and its own queue), not after the whole answer,
   * so streams get a shorter first-byte timeout of their own.
   */
  stream_first_byte_timeout_seconds: positiveNumber("a positive number").default(60),
  /** Idle pooled connections are closed after this, before the engine closes them (uvicorn: 5 s). */
  idle_connection_timeout_seconds: positiveNumber("a positive number").default(4),
  /** A non-streaming answer larger than this is refused with 502 instead of being buffered. */
  max_response_bytes: positiveInt("a positive integer").default(64 * 1024 * 1024),
  /** Whole-request deadline, queueing and retries included. */
  request_timeout_seconds: positiveNumber("a positive number").default(600),
  /** Attempts per request, the first included: failover walks the session's rendezvous ranking. */
  max_attempts: positiveInt("a positive integer").default(3),
  keep_alive_connections: positiveInt("a positive integer").default(128),
  /**
   * An engine removed by a reload or gone from DNS discovery takes no new requests; those in flight on it
   * finish for up to this long, then its connections close (0: at once).
   */
  drain_seconds: nonNegativeNumber("a non-negative number").default(60),
  /**
   * A streaming attempt whose engine sent no response headers within this long is abandoned and retried on
   * the next engine (nothing reached the client yet). vLLM sends a stream's headers before prefill, so a few
   * seconds is safe; an engine that hangs before them no longer holds the request to its deadline.
   */
  stream_headers_timeout_seconds: positiveNumber("a positive number").default(5),
  /**
   * A stream whose engine sends nothing for this long after its first byte has stalled: it is broken as a cut
   * connection is (continued elsewhere, or ended with an error event); 0 waits for ever.
   */
  stream_stall_seconds: nonNegativeNumber("a non-negative number").default(30),
  /** Streams broken by their engine mid-answer are continued on the next engine (src/gateway/continuation). */
  stream_continuation: z
    .strictObject({
      enabled: z.boolean({ error: "must be true or false" }).default(true),
      /** Continuations of one answer, at most (each is also an attempt of upstream.max_attempts). */
      max_continuations: positiveInt("a positive integer").default(2),
      /** Tiers whose streams are never continued (their error event ends them, as without continuation). */
      except_tiers: z.array(identifier("a tier name"), { error: "must be a list of tier names" }).default([]),
    })
    .prefault({}),
});

/** A section left empty in YAML (`server:` with every key commented out) parses as null: it means defaults. */
function section<T extends z.ZodType>(schema: T) {
  return z.preprocess((value) => (value === null ? undefined : value), schema);
}

export const gatewayConfigSchema = z
  .strictObject({
    server: section(serverSchema.prefault({})),
    backends: z.array(backendSchema, { error: "must be a list of backends" }).default([]),
    admission: section(admissionSchema.prefault({})),
    routing: section(routingSchema.prefault({})),
    affinity: section(affinitySchema.prefault({})),
    health: section(healthSchema.prefault({})),
    upstream: section(upstreamSchema.prefault({})),
    responses: section(responsesSchema.prefault({})),
    adaptation: section(adaptationSchema.prefault({})),
    discovery: discoverySchema,
  })
  .superRefine((config, ctx) => {
    if (config.backends.length === 0 && config.discovery.length === 0) {
      ctx.addIssue({
        code: "custom",
        path: ["backends"],
        message: "must list at least one backend (or name engines to find under discovery)",
      });
    }
    if (config.server.receive_timeout_seconds < config.server.headers_timeout_seconds) {
      ctx.addIssue({
        code: "custom",
        path: ["server", "receive_timeout_seconds"],
        message: `must be at least server.headers_timeout_seconds (${config.server.headers_timeout_seconds}): the headers are part of the request`,
      });
    }
    if (config.affinity.store.kind === "redis" && config.affinity.rebalance_on_backend_recovery) {
      ctx.addIssue({
        code: "custom",
        path: ["affinity", "rebalance_on_backend_recovery"],
        message: "is not supported with affinity.store kind redis (moves would apply to one replica only)",
      });
    }
    const seen = new Map<string, number>();
    config.backends.forEach((backend, index) => {
      const first = seen.get(backend.id);
      if (first !== undefined) {
        ctx.addIssue({
          code: "custom",
          path: ["backends", index, "id"],
          message: `duplicate backend id '${backend.id}' (also backends[${first}])`,
        });
      } else {
        seen.set(backend.id, index);
      }
    });
    const tiers = new Set([...config.backends.map((b) => b.tier), ...config.discovery.map((d) => d.tier)]);
    const tierKeys: [string[], string | undefined][] = [
      [["routing", "default_tier"], config.routing.default_tier],
      [["routing", "long_prompt_tier"], config.routing.long_prompt_tier],
      [["routing", "classifier", "tier"], config.routing.classifier.tier],
      ...(config.routing.classifier.tiers ?? []).map((tier, i): [string[], string] => [
        ["routing", "classifier", "tiers", String(i)],
        tier,
      ]),
    ];
    for (const [path, tier] of tierKeys) {
      if (tier !== undefined && !tiers.has(tier)) {
        ctx.addIssue({
          code: "custom",
          path,
          message: `names tier '${tier}', which no backend has (tiers: ${[...tiers].join(", ")})`,
        });
      }
    }
    for (const { path, message } of bandsOutOfRange(config)) ctx.addIssue({ code: "custom", path, message });
    for (const { path, message } of outOfBounds(config, [])) ctx.addIssue({ code: "custom", path, message });
  });

/** Every band named in config must exist: admission.scheduling.bands of them, 0 .. bands-1. */
function bandsOutOfRange(config: {
  admission: { scheduling: z.output<typeof schedulingSchema> };
  server: { api_keys: { max_priority?: number | undefined }[] };
}): { path: (string | number)[]; message: string }[] {
  const { scheduling } = config.admission;
  const named: [(string | number)[], number | undefined][] = [
    [["admission", "scheduling", "default_band"], scheduling.default_band],
    [["admission", "scheduling", "max_header_priority"], scheduling.max_header_priority],
    ...Object.entries(scheduling.agents).map(([id, agent]): [string[], number | undefined] => [
      ["admission", "scheduling", "agents", id, "band"],
      agent.band,
    ]),
    ...config.server.api_keys.map((key, i): [(string | number)[], number | undefined] => [
      ["server", "api_keys", i, "max_priority"],
      key.max_priority,
    ]),
  ];
  return named
    .filter(([, band]) => band !== undefined && band >= scheduling.bands)
    .map(([path]) => ({
      path,
      message: `must be a band below admission.scheduling.bands (${scheduling.bands}): 0 .. ${scheduling.bands - 1}`,
    }));
}

/** Node's timers take at most 2^31-1 ms (24.8 days): a longer one fires at once, so no duration may exceed it. */
export const MAX_TIMER_MS = 2 ** 31 - 1;
/** Sizes in bytes: at most 2 GiB - 1, what node's buffers and counters handle everywhere. */
export const MAX_SIZE_BYTES = 2 ** 31 - 1;

/**
 * Every duration (`*_seconds`, `*_ms`) and size (`*_bytes`) anywhere in the config, checked against the limits
 * above by its name's unit, so a key added later is bounded without being listed here.
 */
function outOfBounds(
  value: unknown,
  path: (string | number)[],
): { path: (string | number)[]; message: string }[] {
  if (Array.isArray(value)) return value.flatMap((item, i) => outOfBounds(item, [...path, i]));
  if (typeof value !== "object" || value === null) return [];
  const problems: { path: (string | number)[]; message: string }[] = [];
  for (const [key, item] of Object.entries(value)) {
    if (typeof item !== "number") {
      problems.push(...outOfBounds(item, [...path, key]));
      continue;
    }
    const limit = key.endsWith("_seconds")
      ? { max: MAX_TIMER_MS / 1000, text: `${MAX_TIMER_MS / 1000} (node's timer limit, 24.8 days)` }
      : key.endsWith("_ms")
        ? { max: MAX_TIMER_MS, text: `${MAX_TIMER_MS} (node's timer limit, 24.8 days)` }
        : key.endsWith("_bytes")
          ? { max: MAX_SIZE_BYTES, text: `${MAX_SIZE_BYTES} (2 GiB)` }
          : undefined;
    if (limit !== undefined && item > limit.max) {
      problems.push({ path: [...path, key], message: `must be at most ${limit.text}` });
    }
  }
  return problems;
}

export type GatewayConfig = z.output<typeof gatewayConfigSchema>;
export type BackendConfig = GatewayConfig["backends"][number];
export type { DiscoveryConfig, RedisStoreConfig, StoreConfig } from "./shared-state.js";
export type SimulateConfig = NonNullable<BackendConfig["simulate"]>;
