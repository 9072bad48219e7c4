// `agent-serve gateway`: the gateway alone, in front of whatever engines the config names.
import { parseArgs } from "node:util";
import { openExposureProblem } from "../config/exposure.js";
import { ConfigError, loadConfigFile } from "../config/load.js";
import { UsageError, type Command } from "./command.js";
import { logFormat, makeLogger, runGatewayUntilSignal } from "./run-gateway.js";

export const DEFAULT_CONFIG_PATH = "configs/gateway.yaml";

export const gatewayOptions = {
  config: { type: "string", short: "c", default: DEFAULT_CONFIG_PATH },
  "log-level": { type: "string", default: "info" },
} as const;

export const gatewayFlagsHelp = `  -c, --config FILE     gateway config (YAML); default ${DEFAULT_CONFIG_PATH}
      --log-level LEVEL one of fatal, error, warn, info, debug, trace, silent; default info
  -h, --help            this text

environment:
  AGENT_SERVE_PORT         overrides server.port
  AGENT_SERVE_ADMIN_TOKEN  overrides server.admin_token (enables /admin)
  AGENT_SERVE_API_KEYS     client key hashes added to server.api_keys: SHA256[:AGENT_ID], comma or
                           space separated ('agent-serve hash-key -' prints a key's hash)

A host other than loopback (127.0.0.1, ::1) needs client API keys, or server.allow_open: true.

signals: SIGINT/SIGTERM stop gracefully (drain within server.shutdown_grace_seconds, exit 0);
SIGHUP reloads the config file (a bad file is reported and the running config stays).`;

export function parseGatewayFlags(argv: string[]): { configPath: string; logLevel: string } {
  let values;
  try {
    ({ values } = parseArgs({ args: argv, options: gatewayOptions, strict: true, allowPositionals: false }));
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
  const levels = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];
  if (!levels.includes(values["log-level"]))
    throw new UsageError(`--log-level must be one of ${levels.join(", ")}`);
  return { configPath: values.config, logLevel: values["log-level"] };
}

/**
 * Loads the config or prints its problems (exit code 2 through the returned undefined), among them a host open
 * to other machines without client keys (closed by default).
 */
export async function loadOrReport(path: string) {
  try {
    const config = await loadConfigFile(path);
    const open = openExposureProblem(config);
    if (open !== undefined) throw new ConfigError(path, [open]);
    return config;
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`agent-serve: ${err.message}\n`);
      return undefined;
    }
    throw err;
  }
}

export const gatewayCommand: Command = {
  name: "gateway",
  help: `usage: agent-serve gateway [--config FILE] [--log-level LEVEL]

Runs the gateway alone; every backend's base_url must point at a running engine. 'simulate' blocks in
the config are ignored here (see 'agent-serve start').

${gatewayFlagsHelp}`,
  async run(argv) {
    const flags = parseGatewayFlags(argv);
    const config = await loadOrReport(flags.configPath);
    if (config === undefined) return 2;
    const format = logFormat(config.server.log_format, process.stdout.isTTY === true);
    return runGatewayUntilSignal(config, flags.configPath, makeLogger(flags.logLevel, format));
  },
};
