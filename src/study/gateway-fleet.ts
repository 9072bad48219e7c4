// Replicas of one gateway config as child processes: restart one, sum a metric over all, wait for their view.
import { GatewayError } from "../core/errors.js";
import { rmSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startGatewayProcess, type GatewayProcess } from "../cli/gateway-process.js";
import { parseConfig } from "../config/load.js";
import type { GatewayConfig } from "../config/schema.js";
import { metricSample, scrapeMetrics } from "../metrics/prometheus-text.js";

/** Where a fleet registers the kills of its processes as they spawn (an InterruptGuard). */
export interface KillRegistry {
  add(kill: () => void): () => void;
}

const VIEW_POLL_MS = 20;
const VIEW_TIMEOUT_MS = 15_000;

export class GatewayFleet {
  private stopped = false;

  private constructor(
    /** The parsed config every replica runs (for reports and config hashes). */
    readonly config: GatewayConfig,
    private readonly dir: string,
    private readonly configPath: string,
    private readonly replicas: GatewayProcess[],
    private readonly guard: KillRegistry | undefined,
  ) {}

  /**
   * Validates `rawConfig` here (a bad one fails with the loader's message before any process starts), writes
   * it to a temporary file and starts `count` gateways on it. `server.port` should be 0: each replica gets
   * its own OS-assigned port.
   */
  static async start(
    rawConfig: Record<string, unknown>,
    count: number,
    guard?: KillRegistry,
  ): Promise<GatewayFleet> {
    const config = parseConfig(rawConfig, "gateway fleet");
    const dir = await mkdtemp(join(tmpdir(), "agent-serve-fleet-"));
    guard?.add(() => rmSync(dir, { recursive: true, force: true }));
    const onSpawn = guard === undefined ? undefined : (kill: () => void) => void guard.add(kill);
    const configPath = join(dir, "gateway.json");
    const replicas: GatewayProcess[] = [];
    try {
      // JSON is YAML: the gateway's own loader reads the file as users' files are read.
      await writeFile(configPath, JSON.stringify(rawConfig, null, 2) + "\n");
      const started = await Promise.allSettled(
        Array.from({ length: count }, () => startGatewayProcess(configPath, { onSpawn })),
      );
      for (const result of started) if (result.status === "fulfilled") replicas.push(result.value);
      const failed = started.find((r): r is PromiseRejectedResult => r.status === "rejected");
      if (failed !== undefined) throw failed.reason;
      return new GatewayFleet(config, dir, configPath, replicas, guard);
    } catch (err) {
      await Promise.all(replicas.map((r) => r.stop()));
      await rm(dir, { recursive: true, force: true });
      throw err;
    }
  }

  get size(): number {
    return this.replicas.length;
  }

  /** Replica i's base URL (a new one after restart(i)). */
  url(index: number): string {
    return this.replica(index).url;
  }

  get urls(): string[] {
    return this.replicas.map((r) => r.url);
  }

  /** Stops replica i gracefully (SIGTERM) and starts a fresh process on the same config in its place. */
  async restart(index: number): Promise<void> {
    const old = this.replica(index);
    const exit = await old.stop();
    if (exit.code !== 0)
      throw new GatewayError(
        "engine_start_failed",
        `replica ${index} exited with ${exit.code ?? exit.signal}:\n${old.output()}`,
      );
    const guard = this.guard;
    this.replicas[index] = await startGatewayProcess(this.configPath, {
      onSpawn: guard === undefined ? undefined : (kill) => void guard.add(kill),
    });
  }

  /** A metric of replica i (summed over the series that carry `labels`; 0 when it has none). */
  async metric(index: number, name: string, labels: Record<string, string> = {}): Promise<number> {
    return metricSample(await scrapeMetrics(this.url(index)), name, labels) ?? 0;
  }

  /** A metric summed over the running replicas (a restarted replica's counters start again at 0). */
  async sum(name: string, labels: Record<string, string> = {}): Promise<number> {
    let total = 0;
    for (let i = 0; i < this.replicas.length; i++) total += await this.metric(i, name, labels);
    return total;
  }

  /** Resolves once every replica reports the backend up (or down) in agentserve_backend_up. */
  async waitForBackend(backendId: string, state: "up" | "down"): Promise<void> {
    const deadline = performance.now() + VIEW_TIMEOUT_MS;
    const want = state === "up" ? 1 : 0;
    for (;;) {
      let agree = 0;
      for (const replica of this.replicas) {
        const text = await scrapeMetrics(replica.url);
        if (metricSample(text, "agentserve_backend_up", { backend: backendId }) === want) agree++;
      }
      if (agree === this.replicas.length) return;
      if (performance.now() > deadline)
        throw new GatewayError(
          "internal_error",
          `${agree} of ${this.replicas.length} replicas saw ${backendId} ${state} in time`,
        );
      await new Promise((resolve) => setTimeout(resolve, VIEW_POLL_MS));
    }
  }

  /** Stops every replica (SIGTERM, drain) and removes the config file; safe to call twice. */
  async close(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    await Promise.all(this.replicas.map((r) => r.stop()));
    await rm(this.dir, { recursive: true, force: true });
  }

  private replica(index: number): GatewayProcess {
    const replica = this.replicas[index];
    if (replica === undefined) throw new RangeError(`no replica ${index} (fleet of ${this.replicas.length})`);
    return replica;
  }
}
