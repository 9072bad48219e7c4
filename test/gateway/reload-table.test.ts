// The reload table (src/gateway/reload.ts): every key of the config schema is either applied by a reload step or
// listed as restart-only, never both; the docs list the same restart-only set; and nothing outside the settings
// derivation reads config values through the settings.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { z } from "zod";
import { pino } from "pino";
import { parseConfig } from "../../src/config/load.js";
import { gatewayConfigSchema } from "../../src/config/schema.js";
import { Gateway } from "../../src/gateway/gateway.js";
import { startSimEngine } from "../../src/sim/index.js";
import { SMALL_MODEL, chat } from "../helpers/cluster.js";
import { RELOAD_STEPS, RESTART_ONLY } from "../../src/gateway/reload.js";

interface SchemaDef {
  type: string;
  innerType?: z.core.$ZodType;
  shape?: Record<string, z.core.$ZodType>;
  in?: z.core.$ZodType;
  out?: z.core.$ZodType;
}

/** Every key of the schema, dotted: objects are walked into; arrays, records and unions are one key each. */
function schemaKeys(schema: z.core.$ZodType, prefix = "", out: string[] = []): string[] {
  const def = schema._zod.def as unknown as SchemaDef;
  switch (def.type) {
    case "default":
    case "prefault":
    case "optional":
    case "nullable":
    case "readonly":
      return schemaKeys(def.innerType!, prefix, out);
    case "pipe": {
      // A section's preprocess (null means defaults) is a pipe from a transform into the section's schema.
      const first = def.in!._zod.def as unknown as SchemaDef;
      return schemaKeys(first.type === "transform" ? def.out! : def.in!, prefix, out);
    }
    case "object":
      for (const [key, value] of Object.entries(def.shape!))
        schemaKeys(value, prefix === "" ? key : `${prefix}.${key}`, out);
      return out;
    default:
      out.push(prefix);
      return out;
  }
}

/** A listed key covers itself and everything under it. */
const covers = (listed: string, key: string): boolean => key === listed || key.startsWith(`${listed}.`);

const keys = schemaKeys(gatewayConfigSchema);
const applied = RELOAD_STEPS.flatMap((step) => step.keys);
const restartOnly = RESTART_ONLY.map((entry) => entry.key);

describe("the reload table", () => {
  it("walks a schema of many keys (the walker reaches the leaves)", () => {
    expect(keys.length).toBeGreaterThan(90);
    expect(keys).toContain("server.tracing.sample_ratio");
    expect(keys).toContain("affinity.store");
  });

  it("applies or lists as restart-only every key of the schema, never both", () => {
    const neither = keys.filter(
      (key) => !applied.some((a) => covers(a, key)) && !restartOnly.some((r) => covers(r, key)),
    );
    const both = keys.filter(
      (key) => applied.some((a) => covers(a, key)) && restartOnly.some((r) => covers(r, key)),
    );
    expect(neither).toEqual([]);
    expect(both).toEqual([]);
  });

  it("names only keys the schema has, each once", () => {
    for (const listed of [...applied, ...restartOnly])
      expect(
        keys.some((key) => covers(listed, key)),
        listed,
      ).toBe(true);
    expect(new Set(applied).size).toBe(applied.length);
    expect(new Set(restartOnly).size).toBe(restartOnly.length);
  });

  it("has its restart-only keys listed in docs/configuration.md", () => {
    const docs = readFileSync("docs/configuration.md", "utf8");
    const section = docs.slice(docs.indexOf("Restart-only keys:"));
    const documented = [...section.matchAll(/^- (.*?):/gm)].flatMap((line) =>
      [...line[1]!.matchAll(/`([^`]+)`/g)].map((match) => match[1]!),
    );
    expect(documented.sort()).toEqual([...restartOnly].sort());
  });
});

describe("the settings derivation", () => {
  it("is the only reader of config values (no settings.config.<key> elsewhere in src)", () => {
    const readers: string[] = [];
    const walk = (dir: string): void => {
      for (const name of readdirSync(dir)) {
        const path = join(dir, name);
        if (statSync(path).isDirectory()) walk(path);
        else if (path.endsWith(".ts") && path !== join("src", "gateway", "settings.ts")) {
          if (/settings\.config\.[a-z]/.test(readFileSync(path, "utf8"))) readers.push(path);
        }
      }
    };
    walk("src");
    expect(readers).toEqual([]);
  });
});

describe("a reload", () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  it("applies pool settings and the staleness bound of engine readings, and names restart-only changes", async () => {
    const engine = await startSimEngine({ model: SMALL_MODEL });
    closers.push(() => engine.close());
    const config = (extra: { upstream?: object; health?: object; server?: object }) =>
      parseConfig(
        {
          server: { host: "127.0.0.1", port: 0, ...extra.server },
          health: { probe_interval_seconds: 3600, engine_metrics_interval_seconds: 2, ...extra.health },
          upstream: extra.upstream ?? {},
          backends: [{ id: "small-0", tier: "small", base_url: engine.url, model: SMALL_MODEL }],
        },
        "test",
      );
    const gateway = await Gateway.start(config({}), { logger: pino({ level: "silent" }) });
    closers.push(() => gateway.close(0));
    const { pools, scheduler } = gateway.runtime;
    expect((await chat(gateway.url, { session: "s" })).status).toBe(200);
    const poolBefore = pools.get(gateway.runtime.registry.get("small-0")!).pool;
    expect(scheduler.engineSignalMaxAgeMs).toBe(6_000);

    const { changed } = gateway.reload(
      config({
        upstream: { keep_alive_connections: 7, connect_timeout_seconds: 1 },
        health: { engine_metrics_interval_seconds: 5 },
        server: { port: 1 },
      }),
    );
    expect(pools.current).toMatchObject({ connections: 7, connectTimeoutMs: 1000 });
    expect(pools.get(gateway.runtime.registry.get("small-0")!).pool).not.toBe(poolBefore);
    expect(scheduler.engineSignalMaxAgeMs).toBe(15_000);
    expect(changed).toContain("server.port changed: takes effect at the next restart");
    // Requests go on, on the new pool.
    expect((await chat(gateway.url, { session: "s" })).status).toBe(200);
  });
});
