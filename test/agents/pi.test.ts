// pi, installed from npm, finishes a scripted task through the gateway offline (loopback-only namespace).
import { namespaceTest as test } from "../helpers/network-namespace.js";
import { pi } from "./clis.js";
import { AGENT_TEST_TIMEOUT_MS, checkAgentTask } from "./task.js";

test(
  "pi: four model calls, three tool calls, all on one engine by its own session",
  async () => {
    await checkAgentTask(pi);
  },
  AGENT_TEST_TIMEOUT_MS,
);
