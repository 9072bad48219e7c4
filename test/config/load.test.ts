import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { DEFAULT_SESSION_KEYS } from "../../src/config/schema.js";
import {
  ConfigError,
  formatPath,
  loadConfigFile,
  parseConfig,
  parseConfigText,
} from "../../src/config/load.js";

const DEFAULT_CONFIG = fileURLToPath(new URL("../../configs/gateway.yaml", import.meta.url));

const ONE_BACKEND = `backends:
  - { id: a, tier: small, base_url: "http://127.0.0.1:9001", model: m }
`;

/** The problems a config text is refused with (fails the test if it is accepted or fails another way). */
function problemsOf(text: string, env: Record<string, string> = {}): readonly string[] {
  try {
    parseConfigText(text, "test.yaml", env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  throw new Error(`accepted:\n${text}`);
}

describe("the shipped configs/gateway.yaml", () => {
  it("loads, with the original's layout and values", async () => {
    const config = await loadConfigFile(DEFAULT_CONFIG, {});
    // The demo listens on loopback only: it has no API keys.
    expect(config.server).toMatchObject({ host: "127.0.0.1", port: 8000 });
    expect(config.server.admin_token).toBeUndefined();
    expect(config.backends.map((b) => [b.id, b.tier, b.base_url])).toEqual([
      ["big-0", "big", "http://127.0.0.1:8001"],
      ["small-0", "small", "http://127.0.0.1:8002"],
      ["small-1", "small", "http://127.0.0.1:8003"],
    ]);
    for (const b of config.backends) {
      expect(b.max_inflight).toBe(64);
      expect(b.weight).toBe(1);
      expect(b.simulate?.profile).toMatch(/^qwen2\.5-/);
    }
    expect(config.admission).toEqual({
      default_token_budget: 100_000,
      budget_window_seconds: 3600,
      max_queue_size: 256,
      queue_timeout_seconds: 30,
      agents: {},
      max_agents: 100_000,
      budget_anonymous: false,
      store: { kind: "memory" },
      max_inflight_per_agent: 0,
      scheduling: {
        policy: "least-attained",
        half_life_seconds: 120,
        bands: 3,
        default_band: 1,
        max_flows: 10_000,
        metrics_top_flows: 20,
        sync_interval_ms: 1000,
        agents: {},
      },
    });
    expect(config.routing).toMatchObject({
      prompt_length_threshold: 2000,
      classifier_cache_ttl_seconds: 300,
      tool_followup_stays_same_tier: true,
    });
    expect(config.affinity).toEqual({
      sticky_ttl_seconds: 1800,
      rebalance_on_backend_recovery: false,
      max_bindings: 1_000_000,
      balancer: "least_inflight",
      load_factor: 1.25,
      sessionless: "prefix",
      policy: "hrw",
      receipts: { enabled: true, block_tokens: 16, ttl_seconds: 7200 },
      kv_events: { move_min_tokens: 2048, prefill_context_weight: 2.7e-5, replay_timeout_seconds: 5 },
      sglang: {
        cache_threshold: 0.5,
        balance_abs_threshold: 32,
        balance_rel_threshold: 1.0001,
        eviction_interval_seconds: 60,
        max_tree_chars: 100_000,
      },
      llmd: {
        prefix_cache_weight: 3,
        queue_weight: 2,
        kv_cache_weight: 2,
        block_chars: 64,
        max_blocks: 256,
        lru_capacity_per_backend: 31_250,
      },
      session_keys: DEFAULT_SESSION_KEYS,
      store: { kind: "memory" },
    });
    expect(config.health).toEqual({
      probe_interval_seconds: 10,
      failures_to_mark_down: 3,
      successes_to_mark_up: 2,
      probe_timeout_seconds: 5,
      engine_metrics_interval_seconds: 5,
      ejection_consecutive_failures: 3,
      ejection_base_seconds: 30,
      ejection_max_seconds: 300,
      stall_seconds: 30,
    });
  });
});

describe("defaults", () => {
  it("fills every omitted key", () => {
    const config = parseConfigText(ONE_BACKEND, "minimal.yaml", {});
    // The keys of the original system keep the original's defaults.
    expect(config).toMatchObject({
      server: { host: "0.0.0.0", port: 8000, max_body_bytes: 8 * 1024 * 1024, shutdown_grace_seconds: 10 },
      backends: [
        {
          id: "a",
          tier: "small",
          base_url: "http://127.0.0.1:9001",
          model: "m",
          max_inflight: 64,
          weight: 1,
        },
      ],
      admission: {
        default_token_budget: 100_000,
        budget_window_seconds: 3600,
        max_queue_size: 256,
        queue_timeout_seconds: 30,
      },
      routing: {
        prompt_length_threshold: 2000,
        classifier_cache_ttl_seconds: 300,
        tool_followup_stays_same_tier: true,
      },
      affinity: { sticky_ttl_seconds: 1800, rebalance_on_backend_recovery: false, max_bindings: 1_000_000 },
      health: {
        probe_interval_seconds: 10,
        failures_to_mark_down: 3,
        successes_to_mark_up: 2,
        probe_timeout_seconds: 5,
      },
    });
    expect(config.server.admin_token).toBeUndefined();
    expect(config.routing.default_tier).toBeUndefined();
    expect(config.backends[0]!.simulate).toBeUndefined();
    // Newer sections (owned elsewhere, values may be tuned) are filled in too: every key present, positive.
    expect(Object.keys(config)).toEqual(expect.arrayContaining(["upstream"]));
    expect(Object.keys(config.upstream).sort()).toEqual(
      expect.arrayContaining([
        "connect_timeout_seconds",
        "first_byte_timeout_seconds",
        "max_attempts",
        "request_timeout_seconds",
      ]),
    );
    for (const [key, value] of Object.entries(config.upstream))
      if (typeof value === "number") expect(value, `upstream.${key}`).toBeGreaterThan(0);
    expect(config.upstream.stream_continuation).toEqual({
      enabled: true,
      max_continuations: 2,
      except_tiers: [],
    });
  });

  it("fills the omitted keys of a partly written section and of simulate", () => {
    const text = [
      "backends:",
      "  - id: a",
      "    tier: small",
      "    base_url: http://127.0.0.1:9001",
      "    model: m",
      "    simulate: {}",
      "affinity:",
      "  sticky_ttl_seconds: 0",
      "server:",
      "  port: 0",
      "",
    ].join("\n");
    const config = parseConfigText(text, "partial.yaml", {});
    expect(config.affinity).toEqual({
      sticky_ttl_seconds: 0,
      rebalance_on_backend_recovery: false,
      max_bindings: 1_000_000,
      balancer: "least_inflight",
      load_factor: 1.25,
      sessionless: "prefix",
      policy: "hrw",
      receipts: { enabled: true, block_tokens: 16, ttl_seconds: 7200 },
      kv_events: { move_min_tokens: 2048, prefill_context_weight: 2.7e-5, replay_timeout_seconds: 5 },
      sglang: {
        cache_threshold: 0.5,
        balance_abs_threshold: 32,
        balance_rel_threshold: 1.0001,
        eviction_interval_seconds: 60,
        max_tree_chars: 100_000,
      },
      llmd: {
        prefix_cache_weight: 3,
        queue_weight: 2,
        kv_cache_weight: 2,
        block_chars: 64,
        max_blocks: 256,
        lru_capacity_per_backend: 31_250,
      },
      session_keys: DEFAULT_SESSION_KEYS,
      store: { kind: "memory" },
    });
    expect(config.server.port).toBe(0);
    expect(config.server.host).toBe("0.0.0.0");
    expect(config.backends[0]!.simulate).toEqual({ profile: "qwen2.5-7b", time_scale: 1, tool_call_rate: 0 });
  });

  it("accepts an already parsed document (JSON) the same way", () => {
    const config = parseConfig(
      {
        backends: [
          { id: "x", tier: "big", base_url: "https://engine.example:8443/v1", model: "m", weight: 2.5 },
        ],
      },
      "inline",
    );
    expect(config.backends[0]).toMatchObject({ base_url: "https://engine.example:8443/v1", weight: 2.5 });
  });
});

describe("bad configs name the path of every problem", () => {
  const backend = (id: string, url = "http://127.0.0.1:9001") =>
    `  - { id: ${id}, tier: small, base_url: "${url}", model: m }\n`;

  it.each([
    [
      "a non-http base_url",
      `backends:\n${backend("a")}${backend("b")}${backend("c", "ftp://10.0.0.1/")}`,
      ["backends[2].base_url: must be an http(s) URL without query or fragment"],
    ],
    [
      "a base_url with a query",
      `backends:\n${backend("a", "http://h:1/?x=1")}`,
      ["backends[0].base_url: must be an http(s) URL without query or fragment"],
    ],
    [
      "a base_url that is no URL",
      `backends:\n${backend("a", "not a url")}`,
      ["backends[0].base_url: must be an http(s) URL without query or fragment"],
    ],
    ["an unknown top-level key", `${ONE_BACKEND}bogus: 1\n`, ["bogus: unknown key"]],
    [
      "an unknown key in a section",
      `${ONE_BACKEND}affinity: { sticky_ttl: 5 }\n`,
      ["affinity.sticky_ttl: unknown key (did you mean 'sticky_ttl_seconds'?)"],
    ],
    [
      "an unknown key in a backend",
      `backends:\n  - { id: a, tier: small, base_url: "http://h:1", model: m, colour: red }\n`,
      ["backends[0].colour: unknown key"],
    ],
    [
      "an unknown key in simulate",
      `backends:\n  - { id: a, tier: small, base_url: "http://h:1", model: m, simulate: { prof: x } }\n`,
      ["backends[0].simulate.prof: unknown key"],
    ],
    [
      "duplicate backend ids",
      `backends:\n${backend("a")}${backend("b")}${backend("a")}`,
      ["backends[2].id: duplicate backend id 'a' (also backends[0])"],
    ],
    [
      "a port above 65535",
      `${ONE_BACKEND}server: { port: 70000 }\n`,
      ["server.port: must be a TCP port (0-65535)"],
    ],
    [
      "a negative port",
      `${ONE_BACKEND}server: { port: -1 }\n`,
      ["server.port: must be a TCP port (0-65535)"],
    ],
    [
      "a fractional port",
      `${ONE_BACKEND}server: { port: 80.5 }\n`,
      ["server.port: must be a TCP port (0-65535)"],
    ],
    [
      "a quoted port",
      `${ONE_BACKEND}server: { port: "8000" }\n`,
      ["server.port: must be a TCP port (0-65535)"],
    ],
    [
      "values of the wrong type",
      `${ONE_BACKEND}affinity: { sticky_ttl_seconds: "30", rebalance_on_backend_recovery: "yes", max_bindings: 0 }\nhealth: { failures_to_mark_down: 0 }\n`,
      [
        "affinity.sticky_ttl_seconds: must be a non-negative number",
        "affinity.rebalance_on_backend_recovery: must be true or false",
        "affinity.max_bindings: must be a positive integer",
        "health.failures_to_mark_down: must be a positive integer",
      ],
    ],
    [
      "a negative TTL",
      `${ONE_BACKEND}affinity: { sticky_ttl_seconds: -1 }\n`,
      ["affinity.sticky_ttl_seconds: must be a non-negative number"],
    ],
    [
      "an infinite TTL",
      `${ONE_BACKEND}affinity: { sticky_ttl_seconds: .inf }\n`,
      ["affinity.sticky_ttl_seconds: must be a non-negative number"],
    ],
    [
      "a zero weight",
      `backends:\n  - { id: a, tier: small, base_url: "http://h:1", model: m, weight: 0 }\n`,
      ["backends[0].weight: must be a positive number"],
    ],
    [
      "a bad backend id",
      `backends:\n  - { id: "-a", tier: small, base_url: "http://h:1", model: m }\n`,
      [
        "backends[0].id: must be a backend id: 1-64 of letters, digits, '.', '_' or '-', starting with a letter or digit",
      ],
    ],
    [
      "a missing model",
      `backends:\n  - { id: a, tier: small, base_url: "http://h:1" }\n`,
      ["backends[0].model: must be the model id the engine serves"],
    ],
    [
      "no backends key",
      "server: { port: 1 }\n",
      ["backends: must list at least one backend (or name engines to find under discovery)"],
    ],
    [
      "an empty backend list",
      "backends: []\n",
      ["backends: must list at least one backend (or name engines to find under discovery)"],
    ],
    [
      "a short admin token",
      `${ONE_BACKEND}server: { admin_token: short }\n`,
      ["server.admin_token: must be at least 16 characters"],
    ],
    [
      "a routing tier that no backend has",
      `${ONE_BACKEND}routing: { default_tier: big, long_prompt_tier: huge }\n`,
      [
        "routing.default_tier: names tier 'big', which no backend has (tiers: small)",
        "routing.long_prompt_tier: names tier 'huge', which no backend has (tiers: small)",
      ],
    ],
    [
      "a section that is not a mapping",
      `${ONE_BACKEND}affinity: 5\n`,
      [expect.stringMatching(/^affinity: /)],
    ],
  ])("%s", (_name, text, expected) => {
    expect(problemsOf(text)).toEqual(expected);
  });

  it("lists every problem at once, each on its own line of the error message", () => {
    let error: unknown;
    try {
      parseConfigText(
        `backends:\n${backend("a", "ftp://x")}server: { port: 99999 }\nextra: true\n`,
        "many.yaml",
        {},
      );
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const configError = error as ConfigError;
    expect(configError.source).toBe("many.yaml");
    expect([...configError.problems].sort()).toEqual([
      "backends[0].base_url: must be an http(s) URL without query or fragment",
      "extra: unknown key",
      "server.port: must be a TCP port (0-65535)",
    ]);
    expect(configError.message.split("\n")[0]).toBe("invalid config many.yaml:");
    for (const problem of configError.problems) expect(configError.message).toContain(`\n  ${problem}`);
  });

  it("refuses an empty file and a file of only comments", () => {
    expect(problemsOf("")).toEqual(["(top level): the file is empty"]);
    expect(problemsOf("# nothing here\n\n")).toEqual(["(top level): the file is empty"]);
  });

  it("refuses a document that is not a mapping, naming the top level", () => {
    expect(problemsOf("42\n")).toEqual([expect.stringMatching(/^\(top level\): /)]);
    expect(problemsOf("- a\n- b\n")).toEqual([expect.stringMatching(/^\(top level\): /)]);
  });

  it("reports YAML syntax errors naming the key, the line and the column", () => {
    expect(problemsOf("backends: [\n  - a\n")).toEqual([
      expect.stringMatching(/^backends: YAML syntax error at line 2, column \d+: .+ \([A-Z_]+\)$/),
    ]);
    expect(problemsOf("server:\n  port: 1\n   host: x\n")).toEqual([
      expect.stringMatching(/^server\.port: YAML syntax error at line 2, column \d+: /),
    ]);
    expect(problemsOf(`${ONE_BACKEND}server: { port: 1 }\nserver: { port: 2 }\n`)).toEqual([
      "server: YAML syntax error at line 4, column 1: Map keys must be unique (DUPLICATE_KEY)",
    ]);
    expect(problemsOf("server:\n  port: 1\n  port: 2\n")).toEqual([
      "server.port: YAML syntax error at line 3, column 3: Map keys must be unique (DUPLICATE_KEY)",
    ]);
  });

  it("bounds every duration by node's timer limit and every size, naming the key", () => {
    expect(problemsOf(`${ONE_BACKEND}health: { probe_timeout_seconds: 3000000 }\n`)).toEqual([
      "health.probe_timeout_seconds: must be at most 2147483.647 (node's timer limit, 24.8 days)",
    ]);
    expect(problemsOf(`${ONE_BACKEND}server: { max_body_bytes: 4294967296 }\n`)).toEqual([
      "server.max_body_bytes: must be at most 2147483647 (2 GiB)",
    ]);
    // At the limit is fine.
    expect(
      parseConfigText(`${ONE_BACKEND}health: { probe_interval_seconds: 2147483 }\n`, "t").health,
    ).toMatchObject({ probe_interval_seconds: 2147483 });
  });

  it("reports a missing file as a ConfigError naming the path", async () => {
    const missing = join(tmpdir(), "agent-serve-no-such-config.yaml");
    await expect(loadConfigFile(missing, {})).rejects.toThrow(ConfigError);
    await expect(loadConfigFile(missing, {})).rejects.toThrow(
      /no-such-config\.yaml:\n {2}cannot read the file \(ENOENT\)/,
    );
  });
});

describe("shared stores and discovery (issue 14)", () => {
  it("accepts {kind: memory} for both stores, as the default does", () => {
    const config = parseConfigText(
      `${ONE_BACKEND}affinity: { store: { kind: memory } }\nadmission: { store: { kind: memory } }\n`,
      "memory.yaml",
      {},
    );
    expect(config.affinity.store).toEqual({ kind: "memory" });
    expect(config.admission.store).toEqual({ kind: "memory" });
    expect(config.discovery).toEqual([]);
  });

  it("accepts {kind: redis} with its defaults", () => {
    const config = parseConfigText(
      `${ONE_BACKEND}affinity: { store: { kind: redis, url: "redis://redis:6379/0" } }\n` +
        `admission: { store: { kind: redis, url: "redis://redis:6379/1", timeout_ms: 20, key_prefix: "b:" } }\n`,
      "redis.yaml",
      {},
    );
    expect(config.affinity.store).toEqual({
      kind: "redis",
      url: "redis://redis:6379/0",
      timeout_ms: 50,
      key_prefix: "agentserve:aff:",
    });
    expect(config.admission.store).toEqual({
      kind: "redis",
      url: "redis://redis:6379/1",
      timeout_ms: 20,
      key_prefix: "b:",
    });
  });

  it("refuses a bad redis store, naming the path", () => {
    expect(
      problemsOf(`${ONE_BACKEND}affinity: { store: { kind: redis, url: "http://redis:6379" } }\n`),
    ).toEqual(["affinity.store.url: must be a redis:// URL: redis://HOST:PORT/DB (rediss:// for TLS)"]);
    expect(problemsOf(`${ONE_BACKEND}admission: { store: { kind: redis } }\n`)).toEqual([
      "admission.store.url: must be a redis:// URL",
    ]);
    expect(
      problemsOf(
        `${ONE_BACKEND}affinity: { rebalance_on_backend_recovery: true, store: { kind: redis, url: "redis://r:6379/0" } }\n`,
      ),
    ).toEqual([
      "affinity.rebalance_on_backend_recovery: is not supported with affinity.store kind redis (moves would apply to one replica only)",
    ]);
  });

  it("accepts discovery entries, and a config whose engines all come from discovery", () => {
    const config = parseConfigText(
      `discovery: [{ name: vllm.ns.svc.cluster.local, tier: small, type: A, port: 8000, model: m, refresh_seconds: 10 }]\n`,
      "dns.yaml",
      {},
    );
    expect(config.backends).toEqual([]);
    expect(config.discovery).toEqual([
      {
        name: "vllm.ns.svc.cluster.local",
        tier: "small",
        type: "A",
        port: 8000,
        scheme: "http",
        model: "m",
        max_inflight: 64,
        weight: 1,
        refresh_seconds: 10,
      },
    ]);
  });

  it("refuses an A entry without a port and a name that is not a DNS name", () => {
    expect(problemsOf(`${ONE_BACKEND}discovery: [{ name: vllm.svc, tier: small, model: m }]\n`)).toEqual([
      "discovery[0].port: is required for A and AAAA records",
    ]);
    expect(
      problemsOf(`${ONE_BACKEND}discovery: [{ name: "no such name", tier: small, type: SRV, model: m }]\n`),
    ).toEqual(["discovery[0].name: must be a DNS name"]);
  });

  it("names the path of a bad store", () => {
    expect(problemsOf(`${ONE_BACKEND}affinity: { store: { kind: etcd } }\n`)).toEqual([
      "affinity.store.kind: must be {kind: memory} or {kind: redis, url, timeout_ms, key_prefix}",
    ]);
    expect(problemsOf(`${ONE_BACKEND}admission: { store: { kind: memory, url: "redis://x" } }\n`)).toEqual([
      "admission.store.url: unknown key",
    ]);
    expect(problemsOf(`${ONE_BACKEND}affinity: { store: memory }\n`)).toEqual([
      "affinity.store: must be {kind: memory} or {kind: redis, url, timeout_ms, key_prefix}",
    ]);
  });
});

describe("environment overrides", () => {
  let dir: string;
  let file: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "agent-serve-config-"));
    file = join(dir, "gateway.yaml");
    await writeFile(file, `server: { port: 8000, admin_token: "from-the-file-0123456789" }\n${ONE_BACKEND}`);
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  it("AGENT_SERVE_PORT overrides server.port, AGENT_SERVE_ADMIN_TOKEN overrides server.admin_token", async () => {
    const config = await loadConfigFile(file, {
      AGENT_SERVE_PORT: "9123",
      AGENT_SERVE_ADMIN_TOKEN: "from-the-environment-0123",
    });
    expect(config.server.port).toBe(9123);
    expect(config.server.admin_token).toBe("from-the-environment-0123");
    expect(config.server.host).toBe("0.0.0.0");
  });

  it("applies to a config without a server section, and reads process.env by default", async () => {
    vi.stubEnv("AGENT_SERVE_PORT", "0");
    vi.stubEnv("AGENT_SERVE_ADMIN_TOKEN", "stubbed-token-0123456789");
    const minimal = join(dir, "minimal.yaml");
    await writeFile(minimal, ONE_BACKEND);
    const config = await loadConfigFile(minimal);
    expect(config.server.port).toBe(0);
    expect(config.server.admin_token).toBe("stubbed-token-0123456789");
  });

  it("ignores empty variables", async () => {
    const config = await loadConfigFile(file, { AGENT_SERVE_PORT: "", AGENT_SERVE_ADMIN_TOKEN: "" });
    expect(config.server.port).toBe(8000);
    expect(config.server.admin_token).toBe("from-the-file-0123456789");
  });

  it.each(["abc", "70000", "-1", "80.5", " 80", "0x50"])(
    "refuses AGENT_SERVE_PORT=%j, naming the variable",
    (port) => {
      expect(problemsOf(ONE_BACKEND, { AGENT_SERVE_PORT: port })).toEqual([
        `AGENT_SERVE_PORT: must be a TCP port (0-65535), got '${port}'`,
      ]);
    },
  );

  it("validates an admin token from the environment like one from the file", () => {
    expect(problemsOf(ONE_BACKEND, { AGENT_SERVE_ADMIN_TOKEN: "short" })).toEqual([
      "server.admin_token: must be at least 16 characters",
    ]);
  });
});

describe("formatPath", () => {
  it("writes zod paths the way the messages do", () => {
    expect(formatPath(["backends", 2, "base_url"])).toBe("backends[2].base_url");
    expect(formatPath(["backends", 0, "simulate", "seed"])).toBe("backends[0].simulate.seed");
    expect(formatPath(["server"])).toBe("server");
    expect(formatPath([])).toBe("(top level)");
  });
});

describe("sections and limits", () => {
  it("treats a section whose keys are all commented out as its defaults", () => {
    const config = parseConfigText(
      `server:\n  # port: 9000\n${ONE_BACKEND}affinity:\nhealth:\n`,
      "empty.yaml",
      {},
    );
    expect(config.server.port).toBe(8000);
    expect(config.affinity.sticky_ttl_seconds).toBe(1800);
    expect(config.health.failures_to_mark_down).toBe(3);
  });

  it("bounds max_bindings", () => {
    expect(() =>
      parseConfigText(`${ONE_BACKEND}affinity: {max_bindings: 1000000000}\n`, "big.yaml", {}),
    ).toThrow(/affinity\.max_bindings: must be at most 100000000/);
  });

  it("takes load_factor 0 (off) or >= 1, refuses (0, 1) and bad values naming the path", () => {
    const parse = (value: string) =>
      parseConfigText(`${ONE_BACKEND}affinity: {load_factor: ${value}}\n`, "lf.yaml", {});
    expect(parse("0").affinity.load_factor).toBe(0);
    expect(parse("1").affinity.load_factor).toBe(1);
    expect(parse("2.5").affinity.load_factor).toBe(2.5);
    for (const bad of ["0.5", "0.999", "-1", '"high"', ".inf"])
      expect(() => parse(bad)).toThrow(/affinity\.load_factor: must be 0 \(off\) or a number >= 1/);
  });

  it("takes client timeouts in seconds and refuses a receive timeout shorter than the headers timeout", () => {
    const parse = (server: string) => parseConfigText(`${ONE_BACKEND}server: ${server}\n`, "st.yaml", {});
    expect(parse("{}").server).toMatchObject({ headers_timeout_seconds: 20, receive_timeout_seconds: 60 });
    expect(parse("{headers_timeout_seconds: 0.5, receive_timeout_seconds: 0.5}").server).toMatchObject({
      headers_timeout_seconds: 0.5,
      receive_timeout_seconds: 0.5,
    });
    expect(() => parse("{headers_timeout_seconds: 90}")).toThrow(
      /server\.receive_timeout_seconds: must be at least server\.headers_timeout_seconds \(90\)/,
    );
    expect(() => parse("{headers_timeout_seconds: 0}")).toThrow(
      /server\.headers_timeout_seconds: must be a positive number/,
    );
  });

  it("takes sessionless prefix or balancer, and refuses anything else naming the path", () => {
    const parse = (value: string) =>
      parseConfigText(`${ONE_BACKEND}affinity: {sessionless: ${value}}\n`, "sl.yaml", {});
    expect(parse("balancer").affinity.sessionless).toBe("balancer");
    expect(parse("prefix").affinity.sessionless).toBe("prefix");
    expect(() => parse("hash")).toThrow(/affinity\.sessionless: must be one of prefix, balancer/);
  });
});
