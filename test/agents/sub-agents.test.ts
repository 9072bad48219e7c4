// Claude Code's sub-agent through the gateway: the parent's thread stays on its engine, the sub-agent is its own thread.
import { join } from "node:path";
import { expect, test } from "vitest";
import { claudeCode, TASK_PROMPT } from "./clis.js";
import { FINAL_TEXT, makeAgentDirs, startAgentRig, taskConversation, type AgentRig } from "./rig.js";
import { AGENT_TEST_TIMEOUT_MS, describe, expectFinished, expectOneEngine, sessionsOf } from "./task.js";

/** The sub-agent's task: its first user turn, which the script matches to give it its own turns. */
const SUBTASK = "Sub-task: create bye.txt with the text bye.";

test(
  "Claude Code's Agent sub-agent: same session id, its own thread key; each thread on one engine with hits",
  async () => {
    const dirs = makeAgentDirs("claude-code-sub");
    let rig: AgentRig | undefined;
    try {
      const hello = join(dirs.workdir, "hello.txt");
      rig = await startAgentRig({
        conversations: [
          {
            name: "sub-agent",
            match: { contains: SUBTASK, in: "user" },
            turns: [
              {
                call: {
                  tool: "Write",
                  arguments: { file_path: join(dirs.workdir, "bye.txt"), content: "bye" },
                },
              },
              { text: "bye.txt is written." },
            ],
          },
          taskConversation(
            "parent",
            [
              { tool: "Write", arguments: { file_path: hello, content: "hi" } },
              { tool: "Read", arguments: { file_path: hello } },
              {
                tool: "Agent",
                arguments: {
                  description: "Write bye.txt",
                  prompt: SUBTASK,
                  subagent_type: "general-purpose",
                },
              },
            ],
            FINAL_TEXT,
          ),
        ],
        default: { text: "Done." },
      });
      const started = rig;
      const run = await started.run(
        claudeCode.command(started.gatewayUrl, dirs.home, TASK_PROMPT),
        dirs.workdir,
      );
      expectFinished(run, started);
      const threads = sessionsOf(await started.stopGateway());
      const context = describe(started);
      // one session id, two thread keys (`<id>#<hash>`): the parent's and the sub-agent's
      expect(threads.size, context).toBe(2);
      const ids = new Set([...threads.keys()].map((key) => key.split("#")[0]));
      expect(ids.size, context).toBe(1);
      const [parent, sub] = [...threads.values()].sort((a, b) => b.length - a.length);
      expectOneEngine(claudeCode, parent!, started, 4);
      expect(sub!.length, context).toBe(2);
      expect(new Set(sub!.map((c) => c.backend)).size, context).toBe(1);
      expect(sub![1]!.hit, context).toBe(true);
      expect(new Set(sub!.map((c) => c.sessionSource)), context).toEqual(new Set([claudeCode.sessionSource]));
    } finally {
      await rig?.close();
      dirs.remove();
    }
  },
  AGENT_TEST_TIMEOUT_MS,
);
