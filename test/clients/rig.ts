// The two paths a client case runs on: straight to a simulated engine, and through a gateway in front of two.
import { pino } from "pino";
import { parseConfig } from "../../src/config/load.js";
import { Gateway } from "../../src/gateway/gateway.js";
import { startSimEngine, type SimEngineHandle, type SimEngineOptions } from "../../src/sim/index.js";
import { startEngineTap, type EngineTap, type Exchange } from "./tap.js";

export const CLIENT_MODEL = "sim-small";
/** Every engine of both paths has this seed, so the same request gets the same reply on either path. */
export const CLIENT_SEED = 7;

export type PathKind = "direct" | "gateway";

/** Where a client points: an OpenAI base URL, the session it sends, and what the engines behind it saw. */
export interface Target {
  kind: PathKind;
  /** `${origin}/v1`. */
  baseURL: string;
  origin: string;
  model: string;
  sessionId: string;
  /** Exchanges of the engines behind this target, in the order they ended. */
  exchanges: Exchange[];
}

export interface Rig {
  direct: Target;
  gateway: Target;
  close(): Promise<void>;
}

/** Generation exchanges only (health probes and load polls also pass the taps). */
export function generationExchanges(target: Target): Exchange[] {
  return target.exchanges.filter(
    (e) =>
      (e.method === "POST" &&
        (e.path.startsWith("/v1/chat/completions") || e.path.startsWith("/v1/responses"))) ||
      (e.method !== "POST" && e.path.startsWith("/v1/responses/")),
  );
}

/**
 * Fresh engines per case, so both paths start from empty caches and see the same request sequence (the
 * gateway pins the session to one of its two engines), and cached-token counts compare as well.
 */
export async function startRig(sessionId: string, sim: Partial<SimEngineOptions> = {}): Promise<Rig> {
  const engines: SimEngineHandle[] = [];
  const taps: EngineTap[] = [];
  let gateway: Gateway | undefined;
  const close = async (): Promise<void> => {
    await gateway?.close(0);
    await Promise.all(taps.map((t) => t.close()));
    await Promise.all(engines.map((e) => e.close()));
  };
  try {
    const start = async (label: string, log: Exchange[]): Promise<string> => {
      const engine = await startSimEngine({
        profile: "instant",
        model: CLIENT_MODEL,
        seed: CLIENT_SEED,
        ...sim,
      });
      engines.push(engine);
      const tap = await startEngineTap(label, engine.url, log);
      taps.push(tap);
      return tap.url;
    };
    const directLog: Exchange[] = [];
    const gatewayLog: Exchange[] = [];
    const [directOrigin, ...backendUrls] = await Promise.all([
      start("direct-0", directLog),
      start("small-0", gatewayLog),
      start("small-1", gatewayLog),
    ]);
    const config = parseConfig(
      {
        server: { host: "127.0.0.1", port: 0 },
        backends: backendUrls.map((url, i) => ({
          id: `small-${i}`,
          tier: "small",
          base_url: url,
          model: CLIENT_MODEL,
        })),
      },
      "client-rig",
    );
    gateway = await Gateway.start(config, {
      logger: pino({ level: process.env["TEST_LOG_LEVEL"] ?? "silent" }),
      listen: { host: "127.0.0.1", port: 0 },
    });
    const target = (kind: PathKind, origin: string, exchanges: Exchange[]): Target => ({
      kind,
      origin,
      baseURL: `${origin}/v1`,
      model: CLIENT_MODEL,
      sessionId,
      exchanges,
    });
    return {
      direct: target("direct", directOrigin!, directLog),
      gateway: target("gateway", gateway.url, gatewayLog),
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
