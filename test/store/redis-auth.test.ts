// Redis stores with a password (from an environment variable, as a Kubernetes Secret gives it) and TLS options.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, parseConfig } from "../../src/config/load.js";
import type { RedisStoreConfig } from "../../src/config/shared-state.js";
import { redisConnection, redisEnvProblems } from "../../src/store/redis-connection.js";
import { redisAvailable, startRedisServer, type RedisServer } from "../helpers/redis-server.js";
import {
  answerOk,
  post,
  startGatewayFor,
  startScriptedEngine,
  type ScriptedEngine,
} from "../helpers/faulty-engine.js";

const PASSWORD = "s3cret/with:odd@chars%";
const redisTool = redisAvailable();

const store = (fields: Partial<RedisStoreConfig>): RedisStoreConfig => ({
  kind: "redis",
  url: "redis://redis.example:6379/0",
  timeout_ms: 50,
  key_prefix: "p:",
  ...fields,
});

describe("redis connection settings", () => {
  it("puts password_env's password in the URL, takes url_env's URL, and tls switches to rediss://", () => {
    const env = { PW: PASSWORD, URL: "redis://:old@other.example:6380/2" };
    const withPassword = new URL(redisConnection(store({ password_env: "PW" }), env).url);
    expect(decodeURIComponent(withPassword.password)).toBe(PASSWORD);
    expect(withPassword.host).toBe("redis.example:6379");
    const fromEnv = new URL(
      redisConnection(store({ url: undefined, url_env: "URL", password_env: "PW" }), env).url,
    );
    expect(fromEnv.host).toBe("other.example:6380");
    expect(decodeURIComponent(fromEnv.password)).toBe(PASSWORD);
    expect(redisConnection(store({ tls: true }), env).url).toMatch(/^rediss:\/\/redis\.example:6379\/0$/);
    expect(redisConnection(store({}), env).tls).toBeUndefined();
  });

  it("reads tls_ca_file, and names every missing variable or unreadable file", async () => {
    const dir = await mkdtemp(join(tmpdir(), "redis-ca-"));
    try {
      const ca = join(dir, "ca.pem");
      await writeFile(ca, "-----BEGIN CERTIFICATE-----\n");
      expect(redisConnection(store({ tls_ca_file: ca }), {}).tls?.ca?.toString()).toContain(
        "BEGIN CERTIFICATE",
      );
      expect(
        redisEnvProblems(
          store({ url_env: "NO_URL", password_env: "NO_PW", tls_ca_file: join(dir, "none.pem") }),
          "affinity.store",
          { NO_URL: "http://not-redis" },
        ),
      ).toEqual([
        "affinity.store.password_env: environment variable NO_PW is not set",
        "affinity.store.url_env: NO_URL does not hold a redis:// or rediss:// URL",
        expect.stringMatching(/^affinity\.store\.tls_ca_file: cannot read .*none\.pem/),
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("the store config", () => {
  it("needs url or url_env", () => {
    const backends = [{ id: "b", tier: "small", base_url: "http://127.0.0.1:1", model: "m" }];
    expect(() => parseConfig({ backends, affinity: { store: { kind: "redis" } } }, "test")).toThrow(
      /affinity\.store\.url: must be a redis:\/\/ URL/,
    );
    const config = parseConfig(
      { backends, affinity: { store: { kind: "redis", url_env: "X", tls: true } } },
      "test",
    );
    expect(config.affinity.store).toMatchObject({ kind: "redis", url_env: "X", tls: true });
  });
});

describe.skipIf(redisTool.skip)("a gateway on a Redis that requires a password", () => {
  let redis: RedisServer;
  let engine: ScriptedEngine;
  let admin: Redis;
  beforeAll(async () => {
    redis = await startRedisServer(redisTool.path!);
    admin = new Redis(redis.url);
    await admin.config("SET", "requirepass", PASSWORD);
    engine = await startScriptedEngine({ completion: ({ res }) => answerOk(res) });
  }, 30_000);
  afterAll(async () => {
    admin.disconnect();
    await engine.close();
    await redis.stop();
  });

  async function bindingsThrough(storeConfig: Record<string, unknown>, prefix: string): Promise<string[]> {
    const gw = await startGatewayFor([{ id: "only", url: engine.url }], {
      affinity: { store: { kind: "redis", timeout_ms: 500, key_prefix: prefix, ...storeConfig } },
      admission: {
        store: { kind: "redis", timeout_ms: 500, key_prefix: `${prefix}budget:`, ...storeConfig },
      },
    });
    try {
      expect(await gw.gateway.runtime.bindings.connected(5000)).toBe(true);
      expect(await gw.gateway.runtime.budgets.connected(5000)).toBe(true);
      expect((await post(gw.url, undefined, { "x-session-id": "s-auth", "x-agent-id": "a" })).status).toBe(
        200,
      );
      await gw.gateway.runtime.bindings.flush();
      await gw.gateway.runtime.budgets.flush();
    } finally {
      await gw.close();
    }
    const authed = new Redis(redis.url, { password: PASSWORD });
    try {
      return await authed.keys(`${prefix}*`);
    } finally {
      authed.disconnect();
    }
  }

  it("connects with the password from password_env and writes bindings and budgets", async () => {
    process.env["TEST_REDIS_PASSWORD"] = PASSWORD;
    try {
      const keys = await bindingsThrough({ url: redis.url, password_env: "TEST_REDIS_PASSWORD" }, "pw:");
      expect(keys.some((k) => k.includes("s-auth"))).toBe(true);
      expect(keys.some((k) => k.startsWith("pw:budget:"))).toBe(true);
    } finally {
      delete process.env["TEST_REDIS_PASSWORD"];
    }
  });

  it("connects with the whole URL from url_env", async () => {
    const url = new URL(redis.url);
    url.password = encodeURIComponent(PASSWORD);
    process.env["TEST_REDIS_URL"] = url.toString();
    try {
      const keys = await bindingsThrough({ url_env: "TEST_REDIS_URL" }, "url:");
      expect(keys.some((k) => k.includes("s-auth"))).toBe(true);
    } finally {
      delete process.env["TEST_REDIS_URL"];
    }
  });

  it("refuses to start when the variable is not set, naming it", async () => {
    await expect(
      startGatewayFor([{ id: "only", url: engine.url }], {
        affinity: { store: { kind: "redis", url: redis.url, password_env: "TEST_REDIS_UNSET" } },
      }),
    ).rejects.toThrow(ConfigError);
    await expect(
      startGatewayFor([{ id: "only", url: engine.url }], {
        affinity: { store: { kind: "redis", url: redis.url, password_env: "TEST_REDIS_UNSET" } },
      }),
    ).rejects.toThrow(/affinity\.store\.password_env: environment variable TEST_REDIS_UNSET is not set/);
  });
});
