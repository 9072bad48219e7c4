// A fresh, self-contained deployment for one study condition: engines (simulated or real) and a gateway, in-process.
import { GatewayError } from "../core/errors.js";
import { availableParallelism } from "node:os";
import { pino } from "pino";
import { Pool, type Dispatcher } from "undici";
import { parseConfig } from "../config/load.js";
import type { GatewayConfig } from "../config/schema.js";
import { Gateway } from "../gateway/gateway.js";
import { startRealEngine, type RealEngineHandle } from "../engine/index.js";
import { startSimEngine, type SimEngineHandle } from "../sim/index.js";
import { sendChatTurn } from "./chat-client.js";

/** Simulated vLLM engines, or real llama.cpp engines (`agent-serve engine`) serving the generated model. */
export type EngineKind = "sim" | "real";

export interface EngineSpec {
  id: string;
  tier: string;
  /** The simulator's cost profile (real engines have their own costs). */
  profile: string;
  model: string;
  /** backends[].max_inflight (default the config's). */
  maxInflight?: number;
  /** backends[].weight (default 1). */
  weight?: number;
  /** The engine's context window in tokens (vLLM's --max-model-len; default the profile's). */
  maxModelLen?: number;
}

export interface EnvironmentSpec {
  engines: EngineSpec[];
  /** Config sections merged over the defaults (affinity, health, upstream, ...). */
  config?: Record<string, unknown>;
  /** Default "sim". Real engines run in wall-clock time: give them timeScale 1. */
  engineKind?: EngineKind;
  /** Slots of each real engine (default the engine's): at least the sessions that may run on one at once. */
  realEngineSlots?: number;
  timeScale: number;
  seed: number;
}

type EngineHandle = SimEngineHandle | RealEngineHandle;

function startEngine(spec: EnvironmentSpec, index: number): Promise<EngineHandle> {
  const engine = spec.engines[index]!;
  if (spec.engineKind === "real") {
    // The engines share this machine's cores: each takes its share (more threads than cores stall llama.cpp).
    const threads = Math.max(1, Math.floor(availableParallelism() / spec.engines.length));
    const slots = spec.realEngineSlots;
    return startRealEngine({ servedModelName: engine.model, threads, ...(slots ? { slots } : {}) });
  }
  return startSimEngine({
    profile: engine.profile,
    model: engine.model,
    timeScale: spec.timeScale,
    seed: spec.seed + index,
    ...(engine.maxModelLen === undefined ? {} : { maxModelLen: engine.maxModelLen }),
  });
}

function simulated(engine: EngineHandle | undefined, id: string): SimEngineHandle {
  if (engine === undefined || !("setFault" in engine))
    throw new GatewayError(
      "invalid_config",
      `engine ${id} is not a simulated engine: only those can be stopped and restarted`,
    );
  return engine;
}

/** The gateway a study drives: started here (`StudyEnvironment`) or given by URL (`--gateway`). */
export interface StudyTarget {
  url: string;
  pool: Pool;
  /** Simulated time per wall time: latencies are reported in engine (simulated) time. */
  timeScale: number;
  close(): Promise<void>;
}

export class StudyEnvironment implements StudyTarget {
  readonly pool: Pool;

  private constructor(
    readonly gateway: Gateway,
    readonly engines: Map<string, EngineHandle>,
    readonly config: GatewayConfig,
    private readonly spec: EnvironmentSpec,
  ) {
    this.pool = new Pool(gateway.url, { connections: 256, pipelining: 1 });
  }

  get url(): string {
    return this.gateway.url;
  }

  get timeScale(): number {
    return this.spec.timeScale;
  }

  static async start(spec: EnvironmentSpec): Promise<StudyEnvironment> {
    const engines = new Map<string, EngineHandle>();
    try {
      for (const [index, engine] of spec.engines.entries())
        engines.set(engine.id, await startEngine(spec, index));
      const config = parseConfig(
        {
          ...spec.config,
          server: { host: "127.0.0.1", port: 0 },
          backends: spec.engines.map((engine) => ({
            id: engine.id,
            tier: engine.tier,
            base_url: engines.get(engine.id)!.url,
            model: engine.model,
            ...(engine.maxInflight === undefined ? {} : { max_inflight: engine.maxInflight }),
            ...(engine.weight === undefined ? {} : { weight: engine.weight }),
          })),
        },
        "study",
      );
      const gateway = await Gateway.start(config, {
        logger: pino({ level: process.env["AGENT_SERVE_STUDY_LOG_LEVEL"] ?? "silent" }),
        listen: { host: "127.0.0.1", port: 0 },
      });
      return new StudyEnvironment(gateway, engines, config, spec);
    } catch (err) {
      await Promise.all([...engines.values()].map((e) => e.close()));
      throw err;
    }
  }

  /**
   * Opens the connections a long-running deployment already has: `concurrency` one-token requests at once,
   * without a session id or a shared prompt (nothing is bound; under `hrw` the balancer spreads them, under
   * the re-implemented routers their policy places them and indexes their few tokens), so the study's
   * client holds that many connections to the gateway and the gateway some to the engines. Without this,
   * the workload's first burst (a fan-out of 12 calls at t = 0) paid for connecting, and the study process
   * for accepting, every one of them: tens of wall-clock ms, times the time scale, on the first requests of
   * every condition, which was the whole p99 of several policies. Nothing here is recorded.
   */
  async warmConnections(concurrency: number, tierHint: string): Promise<void> {
    await warmConnections(this.pool, concurrency, tierHint);
  }

  /** Kills an engine the way a crash would: it stops listening and drops every connection. */
  stopEngine(id: string): void {
    simulated(this.engines.get(id), id).setFault({ kind: "die" });
  }

  /** Starts a fresh engine (empty cache, as after a restart) on the stopped one's port. */
  async restartEngine(id: string): Promise<void> {
    const old = simulated(this.engines.get(id), id);
    const spec = this.spec.engines.find((e) => e.id === id)!;
    await old.close();
    this.engines.set(
      id,
      await startSimEngine({
        profile: spec.profile,
        model: spec.model,
        timeScale: this.spec.timeScale,
        port: old.port,
        seed: this.spec.seed + 100,
        ...(spec.maxModelLen === undefined ? {} : { maxModelLen: spec.maxModelLen }),
      }),
    );
  }

  async close(): Promise<void> {
    await this.pool.close();
    await this.gateway.close(0);
    await Promise.all([...this.engines.values()].map((e) => e.close()));
  }
}

/**
 * `concurrency` one-token requests at once through `pool`, without a session id or a shared prompt:
 * StudyEnvironment.warmConnections says why. Throws when one fails.
 */
export async function warmConnections(
  pool: Dispatcher,
  concurrency: number,
  tierHint: string,
): Promise<void> {
  const results = await Promise.all(
    Array.from({ length: concurrency }, (_, i) =>
      sendChatTurn(
        pool,
        {
          sessionId: undefined,
          messages: [{ role: "user", content: `connection warm-up ${i}` }],
          tierHint,
          maxTokens: 1,
          stream: false,
        },
        () => performance.now(),
      ),
    ),
  );
  const failed = results.find((r) => !r.ok);
  if (failed !== undefined)
    throw new GatewayError("upstream_error", `the deployment's warm-up request failed: ${failed.error}`);
}

/** A gateway someone else runs (`--gateway URL`): wall-clock time, no control over engines or config. */
export function externalTarget(url: string): StudyTarget {
  const pool = new Pool(url, { connections: 256, pipelining: 1 });
  return { url, pool, timeScale: 1, close: () => pool.close() };
}
