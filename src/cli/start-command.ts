// `agent-serve start` (what `npm start` runs): the config's simulated engines, then the gateway in front.
import type { Command } from "./command.js";
import { startEngineProcesses, stopEngineProcesses } from "./engine-processes.js";
import { gatewayFlagsHelp, loadOrReport, parseGatewayFlags } from "./gateway-command.js";
import { makeLogger, runGatewayUntilSignal } from "./run-gateway.js";

export const startCommand: Command = {
  name: "start",
  help: `usage: agent-serve start [--config FILE] [--log-level LEVEL]

Starts one 'agent-serve sim' process for every backend that has a 'simulate' block (on the host and
port of its base_url), waits until each answers /health, then runs the gateway in front of all backends.
Ctrl-C or SIGTERM drains the gateway, then stops the engines, and exits 0.

${gatewayFlagsHelp}`,
  async run(argv) {
    const flags = parseGatewayFlags(argv);
    const config = await loadOrReport(flags.configPath);
    if (config === undefined) return 2;
    const logger = makeLogger(flags.logLevel);
    const engines = await startEngineProcesses(config.backends);
    logger.info(
      { engines: engines.map((e) => e.backendId) },
      `started ${engines.length} simulated engine(s)`,
    );
    try {
      return await runGatewayUntilSignal(config, flags.configPath, logger, () =>
        stopEngineProcesses(engines),
      );
    } catch (err) {
      await stopEngineProcesses(engines);
      throw err;
    }
  },
};
