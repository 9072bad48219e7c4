// A gateway in front of one simulated engine seen through a recording tap (test/clients/tap.ts): what the engine
// received and answered lands in `log`. For tests of what the gateway changes in a request (adaptation).
import { pino } from "pino";
import { parseConfig } from "../../src/config/load.js";
import { Gateway } from "../../src/gateway/gateway.js";
import type { SimEngineHandle } from "../../src/sim/index.js";
import { startEngineTap, type Exchange } from "../clients/tap.js";

export interface TappedGateway {
  url: string;
  /** Stops the gateway, the tap and the engine. */
  close(): Promise<void>;
}

/** The gateway (one backend `engine-0` of tier small serving `model`) with `adaptation` as written, if given. */
export async function startTappedGateway(
  engine: SimEngineHandle,
  model: string,
  log: Exchange[],
  adaptation?: Record<string, boolean>,
): Promise<TappedGateway> {
  const tap = await startEngineTap("engine", engine.url, log);
  try {
    const config = parseConfig(
      {
        server: { host: "127.0.0.1", port: 0 },
        backends: [{ id: "engine-0", tier: "small", base_url: tap.url, model }],
        ...(adaptation === undefined ? {} : { adaptation }),
      },
      "test",
    );
    const gateway = await Gateway.start(config, {
      logger: pino({ level: process.env["TEST_LOG_LEVEL"] ?? "silent" }),
      listen: { host: "127.0.0.1", port: 0 },
    });
    return {
      url: gateway.url,
      async close() {
        await gateway.close(0);
        await tap.close();
        await engine.close();
      },
    };
  } catch (err) {
    await tap.close();
    throw err;
  }
}
