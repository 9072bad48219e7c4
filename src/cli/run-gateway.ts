// Runs a gateway in the foreground until SIGINT/SIGTERM (graceful stop) with SIGHUP reloading the config.
import { pino, type Logger } from "pino";
import { loadConfigFile } from "../config/load.js";
import type { GatewayConfig } from "../config/schema.js";
import { Gateway } from "../gateway/gateway.js";

/**
 * JSON lines on stdout, written asynchronously: a line goes out at once when no write is in progress,
 * and lines that arrive during a write leave together after it (so a busy gateway makes few system
 * calls, and a quiet one shows every line at once). The buffer is flushed before exit.
 */
export function makeLogger(level: string): Logger {
  return pino({ name: "agent-serve", level }, pino.destination({ dest: 1, sync: false }));
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
