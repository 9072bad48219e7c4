// codex, installed from npm, finishes a scripted task through the gateway offline (loopback-only namespace).
import { namespaceTest as test } from "../helpers/network-namespace.js";
import { codex } from "./clis.js";
import { AGENT_TEST_TIMEOUT_MS, checkAgentTask } from "./task.js";

test(
  "codex: four model calls, three tool calls, all on one engine by its own session",
  async () => {
    await checkAgentTask(codex);
  },
  AGENT_TEST_TIMEOUT_MS,
);
