// The agent-serve command line: finds the subcommand and hands it the rest of the arguments.
import { UsageError } from "./command.js";
import { commands, type CommandEntry } from "./commands.js";

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
    "Run `agent-serve <command> --help` for the flags of one command.",
  ].join("\n");
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    process.stdout.write(topHelp(commands) + "\n");
    return name === undefined ? 2 : 0;
  }
  const entry = commands.find((c) => c.name === name);
  if (!entry) {
    process.stderr.write(`agent-serve: unknown command '${name}'\n\n${topHelp(commands)}\n`);
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
      process.stderr.write(`agent-serve ${name}: ${err.message}\n\n${command.help}\n`);
      return 2;
    }
    throw err;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`agent-serve: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  },
);
