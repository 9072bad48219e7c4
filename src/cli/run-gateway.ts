// Runs a gateway in the foreground until SIGINT/SIGTERM (graceful stop) with SIGHUP reloading the config.
import { pino, type Logger } from "pino";
import { markDefaultFormat } from "../core/json-log-line.js";
import { loadConfigFile } from "../config/load.js";
import type { GatewayConfig } from "../config/schema.js";
import { Gateway } from "../gateway/gateway.js";
import { LogLineBatch } from "./log-batch.js";
import { prettyDestination } from "./pretty-log.js";

/**
 * Log characters gathered before a write: one request's line is ~400 bytes, so a busy gateway writes about every 40
 * requests. sonic-boom caps a write at 16 KiB and wants the batch below that.
 */
const LOG_BATCH_CHARS = 16_000;
/** The longest a line waits in the batch: a quiet gateway's lines still show up at once to a person. */
const LOG_FLUSH_INTERVAL_MS = 100;

/** The log's format: the config's, else pretty when stdout is a terminal (a person), JSON when it is not. */
export function logFormat(configured: "pretty" | "json" | undefined, isTty: boolean): "pretty" | "json" {
  return configured ?? (isTty ? "pretty" : "json");
}

/**
 * The gateway's logger: JSON lines (makeJsonLogger), or short lines for a person at a terminal (pretty-log.ts),
 * written at once since a person reads them as they come.
 */
export function makeLogger(level: string, format: "pretty" | "json" = "json"): Logger {
  if (format === "json") return makeJsonLogger(level);
  return pino(
    { name: "agent-serve", level },
    prettyDestination((text) => process.stdout.write(text)),
  );
}

/**
 * JSON lines on stdout, written asynchronously in batches. Each write is a round trip through libuv's
 * thread pool (a wake-up of a worker thread and of the event loop): one per line would cost a busy gateway
 * more CPU than routing the request does. The lines are gathered by LogLineBatch (log-batch.ts), which hands
 * sonic-boom a batch by size, on a short timer and before exit; sonic-boom writes each at once. (Its own
 * gathering re-measured the whole batch on every line; and its `flush(callback)` also asks for an fsync of
 * stdout, so the timer does not use it.)
 */
function makeJsonLogger(level: string): Logger {
  const destination = pino.destination({ dest: 1, sync: false, minLength: 0 });
  // The default line format: the request line is written whole (core/json-log-line.ts).
  return markDefaultFormat(
    pino(
      { name: "agent-serve", level },
      new LogLineBatch(destination, LOG_BATCH_CHARS, LOG_FLUSH_INTERVAL_MS),
    ),
  );
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
  exit: (code: number) => void = (code) => process.exit(code),
): Promise<number> {
  const gateway = await Gateway.start(config, { logger, loadConfig: () => loadConfigFile(configPath) });
  logger.info(
    { url: gateway.url, backends: config.backends.map((b) => `${b.id}@${b.base_url}`) },
    `agent-serve gateway listening on ${config.server.host}:${gateway.port}`,
  );

  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (signal: NodeJS.Signals | string, exitCode = 0): void => {
      if (stopping) {
        // A second Ctrl-C (or SIGTERM) while draining: the person means it. Say so, then end at once; the
        // engines of `start` end with this process (parent-link), and cut requests are logged by their clients.
        if (signal === "SIGINT" || signal === "SIGTERM") forceExit(signal);
        return;
      }
      stopping = true;
      logger.info(
        { signal },
        `stopping: draining in-flight requests (up to ${config.server.shutdown_grace_seconds} s; ${signal === "SIGINT" ? "Ctrl-C" : "SIGINT or SIGTERM"} again to stop now)`,
      );
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
    const forceExit = (signal: NodeJS.Signals): void => {
      const line = `${signal} again: stopping now, without waiting for in-flight requests (exit 130)`;
      logger.warn({ signal }, line);
      process.stderr.write(`agent-serve: ${line}\n`);
      logger.flush(() => exit(130));
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
