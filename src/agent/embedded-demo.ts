// The demo deployment the agents run against when no --gateway is given: the config's simulated engines and
// a gateway, in this process, on ports the OS picks (so it never collides with a running `npm start`).
import { GatewayError } from "../core/errors.js";
import { pino } from "pino";
import type { GatewayConfig } from "../config/schema.js";
import { Gateway } from "../gateway/gateway.js";
import { startSimEngine, type SimEngineHandle } from "../sim/index.js";

export interface EmbeddedDemo {
  url: string;
  /** Engine time per wall time of the simulated engines. */
  timeScale: number;
  config: GatewayConfig;
  close(): Promise<void>;
}

export interface EmbeddedDemoOptions {
  /** Overrides every backend's `simulate.time_scale`. */
  timeScale?: number;
}

export async function startEmbeddedDemo(
  config: GatewayConfig,
  options: EmbeddedDemoOptions = {},
): Promise<EmbeddedDemo> {
  const simulated = config.backends.filter((backend) => backend.simulate !== undefined);
  if (simulated.length === 0)
    throw new GatewayError(
      "invalid_config",
      "the config has no backend with a 'simulate' block: give --gateway URL to use real engines",
    );
  const scales = new Set(simulated.map((backend) => options.timeScale ?? backend.simulate!.time_scale));
  if (scales.size > 1)
    throw new GatewayError(
      "usage_error",
      "the config's simulated engines run at different time scales: give --time-scale X",
    );
  const timeScale = [...scales][0]!;
  const engines = new Map<string, SimEngineHandle>();
  try {
    for (const [index, backend] of simulated.entries()) {
      engines.set(
        backend.id,
        await startSimEngine({
          profile: backend.simulate!.profile,
          model: backend.model,
          timeScale,
          seed: backend.simulate!.seed ?? index,
        }),
      );
    }
    const demoConfig: GatewayConfig = {
      ...config,
      server: { ...config.server, host: "127.0.0.1", port: 0 },
      // Only the simulated backends: the others would be unreachable names in a demo.
      backends: simulated.map((backend) => ({ ...backend, base_url: engines.get(backend.id)!.url })),
    };
    const gateway = await Gateway.start(demoConfig, {
      logger: pino({ level: process.env["AGENT_SERVE_AGENT_LOG_LEVEL"] ?? "silent" }),
      listen: { host: "127.0.0.1", port: 0 },
    });
    return {
      url: gateway.url,
      timeScale,
      config: demoConfig,
      async close() {
        await gateway.close(0);
        await Promise.all([...engines.values()].map((engine) => engine.close()));
      },
    };
  } catch (err) {
    await Promise.all([...engines.values()].map((engine) => engine.close()));
    throw err;
  }
}
