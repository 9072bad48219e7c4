// The shape of one `agent-serve` subcommand: the top-level cli only dispatches to these.
import { GatewayError } from "../core/errors.js";

export interface Command {
  name: string;
  /** Full usage text for `agent-serve NAME --help`: every flag documented. */
  help: string;
  /** Runs the command; resolves to the process exit code. */
  run(argv: string[]): Promise<number>;
}

/** Thrown for bad command-line usage: the cli prints the message and the command's help, exit 2. */
export class UsageError extends GatewayError {
  override name = "UsageError";
  constructor(message: string) {
    super("usage_error", message);
  }
}
