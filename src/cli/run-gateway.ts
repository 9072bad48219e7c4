// Runs a gateway in the foreground until SIGINT/SIGTERM (graceful stop) with SIGHUP reloading the config.
import { pino, type Logger } from "pino";
import { loadConfigFile } from "../config/load.js";
import type { GatewayConfig } from "../config/schema.js";
import { Gateway } from "../gateway/gateway.js";

/** Log bytes gathered before a write; one request's line is ~300 bytes, so a busy gateway writes rarely. */
const LOG_BATCH_BYTES = 4096;
/** The longest a line waits in the batch: a quiet gateway's lines still show up at once to a person. */
const LOG_FLUSH_INTERVAL_MS = 100;

/**
 * JSON lines on stdout, written asynchronously in batches. Each write is a round trip through libuv's
 * thread pool (a wake-up of a worker thread and of the event loop): one per line would cost a busy gateway
 * more CPU than routing the request does. The batch is flushed on a short timer and before exit.
 */
export function makeLogger(level: string): Logger {
  const destination = pino.destination({ dest: 1, sync: false, minLength: LOG_BATCH_BYTES });
  // With a callback, flush() reports a destroyed stream (stdout closed) instead of throwing it.
  setInterval(() => destination.flush(() => undefined), LOG_FLUSH_INTERVAL_MS).unref();
  return pino({ name: "agent-serve", level }, destination);
}

/** Resolves with the exit code once the gateway has stopped; `beforeExit` runs after the gateway closed. */
export async function runGatewayUntilSignal(
  config: GatewayConfig,
  configPath: string,
  logger: Logger,
  beforeExit: () => Promise<void> = async () => undefined,
): Promise<number> {
  const gateway = await Gateway.start(config, { logger, loadConfig: () => loadConfigFile(configPath) });
  logger.info(
    { url: gateway.url, backends: config.backends.map((b) => `${b.id}@${b.base_url}`) },
    `agent-serve gateway listening on ${config.server.host}:${gateway.port}`,
  );

  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (signal: NodeJS.Signals): void => {
      if (stopping) return;
      stopping = true;
      logger.info({ signal }, "stopping: draining in-flight requests");
      void gateway
        .close()
        .then(beforeExit)
        .then(() => new Promise<void>((done) => logger.flush(() => done())))
        .then(
          () => resolve(0),
          (err: unknown) => {
            logger.error({ err }, "error while stopping");
            resolve(1);
          },
        )
        .finally(() => {
          process.off("SIGINT", stop);
          process.off("SIGTERM", stop);
          process.off("SIGHUP", reload);
        });
    };
    const reload = (): void => void gateway.reloadOrReport();
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
    process.on("SIGHUP", reload);
  });
}
