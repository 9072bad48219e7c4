// Two coding agents with the same prompt side by side: each lands by its own session, not by the shared prefix.
import { expect } from "vitest";
import { namespaceTest as test } from "../helpers/network-namespace.js";
import { codex, TASK_PROMPT } from "./clis.js";
import { makeAgentDirs, simScript, startAgentRig, type AgentRig } from "./rig.js";
import { AGENT_TEST_TIMEOUT_MS, describe, expectFinished, expectOneEngine, sessionsOf } from "./task.js";

test(
  "two Codex runs of one prompt: two sessions, each on one engine with hits, named by Codex's session-id",
  async () => {
    const dirs = [makeAgentDirs("codex-a"), makeAgentDirs("codex-b")];
    let rig: AgentRig | undefined;
    try {
      // Codex's script uses relative paths, so one script serves both working directories
      rig = await startAgentRig(simScript(codex.script(dirs[0]!.workdir)));
      const started = rig;
      const runs = await Promise.all(
        dirs.map((d) => started.run(codex.command(started.gatewayUrl, d.home, TASK_PROMPT), d.workdir)),
      );
      for (const run of runs) expectFinished(run, started);
      const sessions = sessionsOf(await started.stopGateway());
      // same system prompt, tools and task: only the session tells them apart
      expect(sessions.size, describe(started)).toBe(2);
      expect(sessions.has("(none)"), describe(started)).toBe(false);
      for (const calls of sessions.values()) expectOneEngine(codex, calls, started);
    } finally {
      await rig?.close();
      for (const d of dirs) d.remove();
    }
  },
  AGENT_TEST_TIMEOUT_MS,
);
