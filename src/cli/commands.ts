// Every subcommand of agent-serve, in the order `--help` lists them.
import type { Command } from "./command.js";
import { simCommand } from "../sim/command.js";
import { gatewayCommand } from "./gateway-command.js";
import { startCommand } from "./start-command.js";

export const commands: readonly Command[] = [startCommand, gatewayCommand, simCommand];
