// claude-code, installed from npm, finishes a six-tool-call scripted task through the gateway offline (loopback-only namespace).
import { namespaceTest as test } from "../helpers/network-namespace.js";
import { claudeCode } from "./clis.js";
import { AGENT_TEST_TIMEOUT_MS, checkAgentTask } from "./task.js";

test(
  "claude-code: six tool calls, all on one engine by its own session, every call after the first >= 95% cached",
  async () => {
    await checkAgentTask(claudeCode);
  },
  AGENT_TEST_TIMEOUT_MS,
);
