// The agent-serve command line: finds the subcommand and hands it the rest of the arguments.
import { GatewayError } from "../core/errors.js";
import { UsageError } from "./command.js";
import { commands, type CommandEntry } from "./commands.js";
import { packageVersion } from "./version.js";

function topHelp(list: readonly CommandEntry[]): string {
  const width = Math.max(...list.map((c) => c.name.length));
  return [
    "usage: agent-serve <command> [flags]",
    "",
    "Session-affinity gateway for agentic LLM traffic in front of vLLM-style engines.",
    "",
    "commands:",
    ...list.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    "",
    "Run `agent-serve <command> --help` for the flags of one command; `agent-serve --version` for the version.",
  ].join("\n");
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === "--version" || name === "-V" || name === "-v") {
    process.stdout.write(`agent-serve ${packageVersion()}\n`);
    return 0;
  }
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    process.stdout.write(topHelp(commands) + "\n");
    return name === undefined ? 2 : 0;
  }
  const entry = commands.find((c) => c.name === name);
  if (!entry) {
    process.stderr.write(
      `agent-serve: unknown command '${name}' (run 'agent-serve --help' for the commands)\n`,
    );
    return 2;
  }
  const command = await entry.load();
  if (rest.includes("--help") || rest.includes("-h")) {
    process.stdout.write(command.help + "\n");
    return 0;
  }
  try {
    return await command.run(rest);
  } catch (err) {
    if (err instanceof UsageError) {
      // Node's parseArgs capitalises its messages ("Unknown option"); every other message here is lower case.
      const message = err.message.charAt(0).toLowerCase() + err.message.slice(1);
      process.stderr.write(`agent-serve ${name}: ${message} (run 'agent-serve ${name} --help' for usage)\n`);
      return 2;
    }
    throw new CommandFailed(name, err);
  }
}

/** A command that failed: who failed, and why. */
class CommandFailed extends Error {
  constructor(
    readonly command: string,
    override readonly cause: unknown,
  ) {
    super(command);
  }
}

/**
 * One line for what a person can act on (a deliberate GatewayError, a port taken, a file missing); the stack
 * only for what is a bug.
 */
function failureLine(err: unknown): string {
  const who = err instanceof CommandFailed ? `agent-serve ${err.command}` : "agent-serve";
  const cause = err instanceof CommandFailed ? err.cause : err;
  // internal_error marks a broken invariant (a bug): its stack is what a report needs.
  if (cause instanceof GatewayError && cause.code !== "internal_error") return `${who}: ${cause.message}`;
  const code = (cause as NodeJS.ErrnoException | undefined)?.code;
  if (cause instanceof Error && code === "EADDRINUSE") {
    const { address, port } = cause as NodeJS.ErrnoException & { address?: string; port?: number };
    return `${who}: cannot listen on ${address ?? "?"}:${port ?? "?"}: the port is taken (stop what uses it, or choose another port)`;
  }
  if (cause instanceof Error && (code === "EACCES" || code === "EADDRNOTAVAIL" || code === "ENOENT")) {
    return `${who}: ${cause.message}`;
  }
  return `${who}: ${cause instanceof Error ? (cause.stack ?? cause.message) : String(cause)}`;
}

main(process.argv.slice(2))
  .then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`${failureLine(err)}\n`);
      process.exitCode = 1;
    },
  )
  // An IPC channel to the `agent-serve start` that spawned this process would keep it alive after its end.
  .finally(() => {
    if (process.connected) process.disconnect();
  });
