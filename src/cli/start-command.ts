// `agent-serve start` (what `npm start` runs): the config's simulated engines, then the gateway in front.
import { randomBytes } from "node:crypto";
import type { Command } from "./command.js";
import { firstEngineExit, startEngineProcesses, stopEngineProcesses } from "./engine-processes.js";
import { gatewayFlagsHelp, loadOrReport, parseGatewayFlags } from "./gateway-command.js";
import { logFormat, makeLogger, runGatewayUntilSignal } from "./run-gateway.js";

export const startCommand: Command = {
  name: "start",
  help: `usage: agent-serve start [--config FILE] [--log-level LEVEL]

Starts one 'agent-serve sim' process for every backend that has a 'simulate' block (on the host and
port of its base_url), waits until each answers /health, then runs the gateway in front of all backends.
Ctrl-C or SIGTERM drains the gateway, then stops the engines, and exits 0; an engine stopped on its own
(SIGINT or SIGTERM sent to it) stops the rest the same way, and an engine that crashed stops it with exit 1.
Engines end with this process however it ends (SIGKILL included). A taken port is one line and exit 1.
Without an admin token (server.admin_token or AGENT_SERVE_ADMIN_TOKEN), a random one is made and printed,
so the demo's /admin API is usable.

${gatewayFlagsHelp}`,
  async run(argv) {
    const flags = parseGatewayFlags(argv);
    const loaded = await loadOrReport(flags.configPath);
    if (loaded === undefined) return 2;
    const token = loaded.server.admin_token === undefined ? demoAdminToken() : undefined;
    const config =
      token === undefined ? loaded : { ...loaded, server: { ...loaded.server, admin_token: token } };
    const logger = makeLogger(
      flags.logLevel,
      logFormat(config.server.log_format, process.stdout.isTTY === true),
    );
    const engines = await startEngineProcesses(config.backends);
    logger.info(
      { engines: engines.map((e) => ({ id: e.backendId, pid: e.child.pid })) },
      `started ${engines.length} simulated engine(s)`,
    );
    if (token !== undefined) {
      process.stderr.write(
        `agent-serve start: admin API token for this run (set server.admin_token or AGENT_SERVE_ADMIN_TOKEN to choose one): ${token}\n`,
      );
    }
    // An engine that ends on its own ends the demo: stopped by a signal is a clean stop, a crash is not.
    const engineEnded = firstEngineExit(engines).then(({ backendId, signal, code }) => ({
      reason: `engine ${backendId} exited (${signal ?? `code ${code}`})`,
      exitCode: signal === "SIGINT" || signal === "SIGTERM" || code === 0 ? 0 : 1,
    }));
    try {
      return await runGatewayUntilSignal(
        config,
        flags.configPath,
        logger,
        () => stopEngineProcesses(engines),
        engineEnded,
      );
    } catch (err) {
      await stopEngineProcesses(engines);
      throw err;
    }
  },
};

/**
 * The demo's admin token when the config names none (neither the file nor the environment): a random one for
 * this run, also put where reloads read it (the environment override).
 */
function demoAdminToken(): string {
  const token = randomBytes(16).toString("hex");
  process.env["AGENT_SERVE_ADMIN_TOKEN"] = token;
  return token;
}
