// Claude Code's sub-agent through the gateway: the parent's thread stays on its engine, the sub-agent is a session of its own.
import { expect } from "vitest";
import { namespaceTest as test } from "../helpers/network-namespace.js";
import { claudeCode, subAgentScript, TASK_FILES, TASK_PROMPT } from "./clis.js";
import { makeAgentDirs, startAgentRig, type AgentRig } from "./rig.js";
import { AGENT_TEST_TIMEOUT_MS, describe, expectFinished, expectOneEngine, sessionsOf } from "./task.js";

test(
  "Claude Code's Agent sub-agent: keyed by its x-claude-code-agent-id, the parent by its thread; each on one engine with hits",
  async () => {
    const dirs = makeAgentDirs("claude-code-sub");
    let rig: AgentRig | undefined;
    try {
      rig = await startAgentRig(subAgentScript(dirs.workdir));
      const started = rig;
      const run = await started.run(
        claudeCode.command(started.gatewayUrl, dirs.home, TASK_PROMPT),
        dirs.workdir,
      );
      expectFinished(run, started, TASK_FILES.slice(0, 2));
      const threads = sessionsOf(await started.stopGateway());
      const context = describe(started);
      // two sessions: the parent's thread (`<session id>#<hash>`) and the sub-agent's own agent id, which only
      // its calls carry (x-claude-code-agent-id)
      expect(threads.size, context).toBe(2);
      const [parent, sub] = [...threads.values()].sort((a, b) => b.length - a.length);
      expectOneEngine(claudeCode, parent!, started, 4);
      expect(sub!.length, context).toBe(2);
      expect(new Set(sub!.map((c) => c.backend)).size, context).toBe(1);
      expect(sub![1]!.hit, context).toBe(true);
      expect(new Set(sub!.map((c) => c.sessionSource)), context).toEqual(
        new Set(["header:x-claude-code-agent-id"]),
      );
      expect(parent![0]!.session, context).toMatch(/^[0-9a-f-]{36}#/);
    } finally {
      await rig?.close();
      dirs.remove();
    }
  },
  AGENT_TEST_TIMEOUT_MS,
);
