// Every subcommand of agent-serve, in the order `--help` lists them. Each is loaded only when it runs: a
// gateway process then never loads the simulator, the studies or the agent fleet (a faster start and a
// smaller heap), and `--help` loads none of them.
import type { Command } from "./command.js";

export interface CommandEntry {
  name: string;
  /** One line for `agent-serve --help`. */
  summary: string;
  load(): Promise<Command>;
}

export const commands: readonly CommandEntry[] = [
  {
    name: "start",
    summary: "start the config's simulated engines and the gateway (the `npm start` demo)",
    load: async () => (await import("./start-command.js")).startCommand,
  },
  {
    name: "gateway",
    summary: "run the gateway against the engines named in the config (real vLLM in production)",
    load: async () => (await import("./gateway-command.js")).gatewayCommand,
  },
  {
    name: "sim",
    summary: "run a simulated vLLM engine (prefix KV cache, continuous batching, cost model, faults)",
    load: async () => (await import("../sim/command.js")).simCommand,
  },
  {
    name: "engine",
    summary: "run a real OpenAI-compatible llama.cpp engine on the CPU (or `engine make-model FILE`)",
    load: async () => (await import("../engine/command.js")).engineCommand,
  },
  {
    name: "study",
    summary:
      "run a load study (affinity, saturation, failure, sessions, hotspot, sessionless, replicas, agents, fairness) and write its report",
    load: async () => (await import("../study/command.js")).studyCommand,
  },
  {
    name: "agent",
    summary: "run the demo agent fleet (tool-using agents, one session each) and write its report",
    load: async () => (await import("../agent/command.js")).agentCommand,
  },
  {
    name: "hash-key",
    summary: "print the hash of a client API key, for server.api_keys",
    load: async () => (await import("./hash-key-command.js")).hashKeyCommand,
  },
];
