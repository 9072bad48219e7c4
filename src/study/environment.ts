// A fresh, self-contained deployment for one study condition: simulated engines and a gateway, in-process.
import { pino } from "pino";
import { Pool } from "undici";
import { parseConfig } from "../config/load.js";
import type { GatewayConfig } from "../config/schema.js";
import { Gateway } from "../gateway/gateway.js";
import { startSimEngine, type SimEngineHandle } from "../sim/index.js";

export interface EngineSpec {
  id: string;
  tier: string;
  profile: string;
  model: string;
}

export interface EnvironmentSpec {
  engines: EngineSpec[];
  /** Config sections merged over the defaults (affinity, health, upstream, ...). */
  config?: Record<string, unknown>;
  timeScale: number;
  seed: number;
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
    readonly engines: Map<string, SimEngineHandle>,
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
    const engines = new Map<string, SimEngineHandle>();
    try {
      for (const [index, engine] of spec.engines.entries()) {
        engines.set(
          engine.id,
          await startSimEngine({
            profile: engine.profile,
            model: engine.model,
            timeScale: spec.timeScale,
            seed: spec.seed + index,
          }),
        );
      }
      const config = parseConfig(
        {
          ...spec.config,
          server: { host: "127.0.0.1", port: 0 },
          backends: spec.engines.map((engine) => ({
            id: engine.id,
            tier: engine.tier,
            base_url: engines.get(engine.id)!.url,
            model: engine.model,
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

  /** Kills an engine the way a crash would: it stops listening and drops every connection. */
  stopEngine(id: string): void {
    this.engines.get(id)!.setFault({ kind: "die" });
  }

  /** Starts a fresh engine (empty cache, as after a restart) on the stopped one's port. */
  async restartEngine(id: string): Promise<void> {
    const old = this.engines.get(id)!;
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
      }),
    );
  }

  async close(): Promise<void> {
    await this.pool.close();
    await this.gateway.close(0);
    await Promise.all([...this.engines.values()].map((e) => e.close()));
  }
}

/** A gateway someone else runs (`--gateway URL`): wall-clock time, no control over engines or config. */
export function externalTarget(url: string): StudyTarget {
  const pool = new Pool(url, { connections: 256, pipelining: 1 });
  return { url, pool, timeScale: 1, close: () => pool.close() };
}
