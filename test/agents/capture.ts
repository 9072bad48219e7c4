// Captures what a coding-agent CLI sends: the rig (engines and gateway) in the loopback-only namespace, a recording
// proxy in front of the gateway, and the CLI run on the scripted task against the proxy. Run as root:
// `node --import tsx test/agents/capture.ts claude-code|codex|opencode|pi OUT_DIR` writes OUT_DIR/requests.jsonl
// (every request: method, path, headers, body) and prints one summary line per request.
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { AGENT_CLIS, claudeCode, subAgentScript, TASK_PROMPT } from "./clis.js";
import type { RecordedRequest } from "./recording-proxy.js";
import { makeAgentDirs, simScript, startAgentRig } from "./rig.js";

const PROXY_TS = fileURLToPath(new URL("./recording-proxy.ts", import.meta.url));

/** The fields a reader looks at first: body keys, message roles, the system prompt's first block. */
function summary(record: RecordedRequest): string {
  const body = record.body;
  if (typeof body !== "object" || body === null) return `${record.method} ${record.path}`;
  const fields = body as Record<string, unknown>;
  const messages = (fields["messages"] ?? fields["input"]) as
    { role?: unknown; type?: unknown }[] | undefined;
  const roles = Array.isArray(messages) ? messages.map((m) => m.role ?? m.type).join(",") : "";
  const system = fields["system"];
  const firstSystem = Array.isArray(system) ? (system[0] as { text?: unknown } | undefined)?.text : system;
  return [
    `${record.method} ${record.path}`,
    `keys=${Object.keys(fields).join(",")}`,
    `roles=${roles}`,
    typeof firstSystem === "string" ? `system[0]=${JSON.stringify(firstSystem.slice(0, 160))}` : "",
  ].join(" ");
}

async function main(): Promise<void> {
  const [name, outDir] = process.argv.slice(2);
  // claude-code-sub: Claude Code with the sub-agent script of sub-agents.test.ts
  const subAgent = name === "claude-code-sub";
  const cli = subAgent ? claudeCode : AGENT_CLIS.find((c) => c.name === name);
  if (cli === undefined || outDir === undefined) {
    process.stderr.write(
      `usage: capture.ts ${AGENT_CLIS.map((c) => c.name).join("|")}|claude-code-sub OUT_DIR\n`,
    );
    process.exit(2);
  }
  mkdirSync(outDir, { recursive: true });
  const out = join(outDir, "requests.jsonl");
  const dirs = makeAgentDirs(`capture-${cli.name}`);
  const rig = await startAgentRig(
    subAgent ? subAgentScript(dirs.workdir) : simScript(cli.script(dirs.workdir)),
  );
  try {
    const proxy = rig.spawn(process.execPath, ["--import", "tsx", PROXY_TS, rig.gatewayUrl, out]);
    const proxyUrl = (await proxy.waitForLine(/recording on (http:\S+)/))[1]!;
    const run = await rig.run(cli.command(proxyUrl, dirs.home, TASK_PROMPT), dirs.workdir);
    process.stdout.write(`${cli.name} exited ${run.exit.code ?? run.exit.signal}\n`);
    if (run.exit.code !== 0) process.stdout.write(`${run.output.slice(-4000)}\n`);
    for (const line of readFileSync(out, "utf8").split("\n").filter(Boolean))
      process.stdout.write(`${summary(JSON.parse(line) as RecordedRequest)}\n`);
  } finally {
    await rig.close();
    dirs.remove();
  }
}

await main();
