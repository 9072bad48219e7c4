// Every subcommand of agent-serve, in the order `--help` lists them.
import { agentCommand } from "../agent/command.js";
import { engineCommand } from "../engine/command.js";
import { simCommand } from "../sim/command.js";
import { studyCommand } from "../study/command.js";
import type { Command } from "./command.js";
import { gatewayCommand } from "./gateway-command.js";
import { hashKeyCommand } from "./hash-key-command.js";
import { startCommand } from "./start-command.js";

export const commands: readonly Command[] = [
  startCommand,
  gatewayCommand,
  simCommand,
  engineCommand,
  studyCommand,
  agentCommand,
  hashKeyCommand,
];
