// Runs a gateway in the foreground until SIGINT/SIGTERM (graceful stop) with SIGHUP reloading the config.
import { pino, type Logger } from "pino";
import { loadConfigFile } from "../config/load.js";
import type { GatewayConfig } from "../config/schema.js";
import { Gateway } from "../gateway/gateway.js";

/**
 * Log bytes gathered before a write: one request's line is ~400 bytes, so a busy gateway writes about every 40
 * requests. sonic-boom caps a write at 16 KiB and wants the batch below that.
 */
const LOG_BATCH_BYTES = 16_000;
/** The longest a line waits in the batch: a quiet gateway's lines still show up at once to a person. */
const LOG_FLUSH_INTERVAL_MS = 100;

/**
 * JSON lines on stdout, written asynchronously in batches. Each write is a round trip through libuv's
 * thread pool (a wake-up of a worker thread and of the event loop): one per line would cost a busy gateway
 * more CPU than routing the request does. The batch is flushed on a short timer (sonic-boom's own
 * `periodicFlush`, which flushes without a callback: `flush(callback)` also asks for an fsync of stdout, one more
 * thread-pool round trip every 100 ms for nothing) and before exit.
 */
export function makeLogger(level: string): Logger {
  const destination = pino.destination({
    dest: 1,
    sync: false,
    minLength: LOG_BATCH_BYTES,
    periodicFlush: LOG_FLUSH_INTERVAL_MS,
  });
  return pino({ name: "agent-serve", level }, destination);
}

/**
 * Resolves with the exit code once the gateway has stopped; `beforeExit` runs after the gateway closed.
 * `stopWhen` stops it too (an engine of `start` that ended), with the exit code it resolves to.
 */
export async function runGatewayUntilSignal(
  config: GatewayConfig,
  configPath: string,
  logger: Logger,
  beforeExit: () => Promise<void> = async () => undefined,
  stopWhen?: Promise<{ reason: string; exitCode: number }>,
): Promise<number> {
  const gateway = await Gateway.start(config, { logger, loadConfig: () => loadConfigFile(configPath) });
  logger.info(
    { url: gateway.url, backends: config.backends.map((b) => `${b.id}@${b.base_url}`) },
    `agent-serve gateway listening on ${config.server.host}:${gateway.port}`,
  );

  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (signal: NodeJS.Signals | string, exitCode = 0): void => {
      if (stopping) return;
      stopping = true;
      logger.info({ signal }, "stopping: draining in-flight requests");
      void gateway
        .close()
        .then(beforeExit)
        .then(() => logger.info({ exitCode }, "stopped"))
        .then(() => new Promise<void>((done) => logger.flush(() => done())))
        .then(
          () => resolve(exitCode),
          (err: unknown) => {
            logger.error({ err }, "error while stopping");
            resolve(1);
          },
        )
        .finally(() => {
          process.off("SIGINT", onSignal);
          process.off("SIGTERM", onSignal);
          process.off("SIGHUP", reload);
        });
    };
    // Node passes the signal's number as a second argument: it must not become the exit code.
    const onSignal = (signal: NodeJS.Signals): void => stop(signal);
    const reload = (): void => void gateway.reloadOrReport();
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
    process.on("SIGHUP", reload);
    void stopWhen?.then(({ reason, exitCode }) => stop(reason, exitCode));
  });
}
