// `agent-serve hash-key KEY`: prints the SHA-256 to put in server.api_keys (the key itself never goes in a file).
import { text } from "node:stream/consumers";
import { sha256Hex } from "../gateway/client-auth.js";
import { UsageError, type Command } from "./command.js";

/** The key read from stdin: its text without the line end `echo` or a file adds. */
export function keyFromInput(input: string): string {
  return input.replace(/\r?\n$/, "");
}

export const hashKeyCommand: Command = {
  name: "hash-key",
  help: `usage: agent-serve hash-key KEY
       agent-serve hash-key -        (reads the key from stdin, so it stays out of the shell history)

Prints the hex SHA-256 of KEY. Put it in the config as
  server:
    api_keys:
      - {sha256: <printed hash>, agent_id: team-a}   # agent_id is optional
or give it to the gateway in AGENT_SERVE_API_KEYS (docs/deployment.md).
Clients then send 'Authorization: Bearer KEY'. Example: head -c 32 /dev/urandom | base64 | tee key.txt | agent-serve hash-key -`,
  async run(argv) {
    if (argv.length !== 1 || argv[0] === "")
      throw new UsageError("give exactly one key (or - to read it from stdin)");
    const key = argv[0] === "-" ? keyFromInput(await text(process.stdin)) : argv[0]!;
    if (key === "") throw new UsageError("the key read from stdin is empty");
    process.stdout.write(`${sha256Hex(key)}\n`);
    return 0;
  },
};
