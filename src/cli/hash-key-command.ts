// `agent-serve hash-key KEY`: prints the SHA-256 to put in server.api_keys (the key itself never goes in a file).
import { sha256Hex } from "../gateway/client-auth.js";
import { UsageError, type Command } from "./command.js";

export const hashKeyCommand: Command = {
  name: "hash-key",
  help: `usage: agent-serve hash-key KEY

Prints the hex SHA-256 of KEY. Put it in the config as
  server:
    api_keys:
      - {sha256: <printed hash>, agent_id: team-a}   # agent_id is optional
Clients then send 'Authorization: Bearer KEY'.`,
  async run(argv) {
    if (argv.length !== 1 || argv[0] === "") throw new UsageError("give exactly one key");
    process.stdout.write(`${sha256Hex(argv[0]!)}\n`);
    return 0;
  },
};
