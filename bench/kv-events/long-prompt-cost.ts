// The gateway's CPU and added time for a coding agent's long prompts (100-200k tokens, ~0.5-0.8 MB of JSON per call),
// placed as the kvevents study places them: approximately (bindings, prefix keys), or by the engines' KV events
// (the prompt rendered, cut into blocks and hashed, every block the engine stores decoded and indexed).
//
// One gateway (the built cli, log level info to /dev/null) in front of one `instant` simulated engine that
// publishes KV events and answers at once, so the time measured is the gateway's: each call's first byte in wall ms,
// and the gateway's CPU per call from /proc (Linux). Sessions run one after another, each call after the previous
// answer, the two arms alternating by session. At the kvevents study's time scale of 10, a wall millisecond is ten
// simulated ones.
//
// Run: npm run build && node --import tsx bench/kv-events/long-prompt-cost.ts [--sessions 6] [--turns 8]
// With --cpu-prof DIR, each gateway writes a V8 CPU profile into DIR when it stops.
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { request } from "undici";
import { startSimEngine, type SimEngineHandle } from "../../src/sim/index.js";
import { percentile } from "../../src/study/stats.js";
import { gatewayConfig, type Placement } from "../../src/study/studies/kvevents.js";
import { machine } from "../affinity/common.js";
import { loopbackKvEvents } from "../../test/kv-events/loopback-kv-events.js";
import { freePort, waitHealthy } from "../common.js";

const { values: args } = parseArgs({
  options: {
    sessions: { type: "string", default: "6" },
    turns: { type: "string", default: "8" },
    "cpu-prof": { type: "string" },
  },
});
const SESSIONS = Number(args.sessions);
const TURNS = Number(args.turns);
const CLI = fileURLToPath(new URL("../../dist/src/cli.js", import.meta.url));
/** The model gatewayConfig (the kvevents study's) names for its engines. */
const MODEL = "Qwen/Qwen2.5-7B-Instruct";
/** The kvevents study's full plan: an 80,000-character system prompt, a 300-360k opening, 16-48k per tool result. */
const SYSTEM = "You are a coding agent. Read the files, run the tools, fix the bug. ".repeat(1200);
const OPENING_CHARS = 330_000;
const TOOL_RESULT_CHARS = 32_000;

function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** Text that differs per session and turn, so that nothing past the system prompt is shared between sessions. */
function filler(seed: string, chars: number): string {
  const line = `// ${seed}: const value = compute(input, options); if (!value) throw new Error("none");\n`;
  return line.repeat(Math.ceil(chars / line.length)).slice(0, chars);
}

async function call(url: string, sessionId: string, messages: unknown[]): Promise<number> {
  const startMs = performance.now();
  const res = await request(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-session-id": sessionId },
    body: JSON.stringify({ model: MODEL, stream: true, max_tokens: 8, messages }),
  });
  let atMs = NaN;
  for await (const chunk of res.body as AsyncIterable<Buffer>) {
    if (Number.isNaN(atMs) && chunk.length > 0) atMs = performance.now() - startMs;
  }
  if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
  return atMs;
}

interface Arm {
  placement: Placement;
  child: ChildProcess;
  url: string;
  firstByteMs: number[];
  cpuMs: number;
  calls: number;
  promptChars: number;
}

async function startArm(placement: Placement, engine: SimEngineHandle, dir: string): Promise<Arm> {
  const port = await freePort();
  const condition = { name: placement, pressure: "roomy", replicas: 1, placement, store: "memory" } as const;
  const config = { ...gatewayConfig(condition, [engine], 1_000_000), server: { host: "127.0.0.1", port } };
  const path = join(dir, `${placement}.json`);
  await writeFile(path, JSON.stringify(config));
  const profile = args["cpu-prof"] === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${args["cpu-prof"]}`];
  const child = spawn(
    process.execPath,
    [...profile, CLI, "gateway", "--config", path, "--log-level", "info"],
    {
      stdio: ["ignore", "ignore", "inherit"],
    },
  );
  const url = `http://127.0.0.1:${port}`;
  await waitHealthy(`${url}/healthz`);
  return { placement, child, url, firstByteMs: [], cpuMs: 0, calls: 0, promptChars: 0 };
}

async function session(arm: Arm, id: string): Promise<void> {
  const messages: unknown[] = [
    { role: "system", content: SYSTEM },
    { role: "user", content: filler(id, OPENING_CHARS) },
  ];
  for (let turn = 0; turn < TURNS; turn++) {
    const chars = JSON.stringify(messages).length;
    const before = cpuMs(arm.child.pid!);
    const firstByte = await call(arm.url, id, messages);
    arm.cpuMs += cpuMs(arm.child.pid!) - before;
    arm.firstByteMs.push(firstByte);
    arm.calls++;
    arm.promptChars += chars;
    messages.push(
      { role: "assistant", content: `Reading part ${turn}.` },
      { role: "user", content: filler(`${id}-${turn}`, TOOL_RESULT_CHARS) },
    );
  }
}

async function main(): Promise<void> {
  const events = loopbackKvEvents();
  const dir = await mkdtemp(join(tmpdir(), "long-prompt-cost-"));
  const engine = await startSimEngine({
    profile: "instant",
    model: MODEL,
    maxModelLen: 262_144,
    kvEvents: { config: events },
  });
  const arms: Arm[] = [];
  try {
    for (const placement of ["approximate", "events"] as const)
      arms.push(await startArm(placement, engine, dir));
    // A warm-up session per arm, not counted.
    for (const arm of arms) await session(arm, `warm-${arm.placement}`);
    for (const arm of arms) Object.assign(arm, { firstByteMs: [], cpuMs: 0, calls: 0, promptChars: 0 });
    for (let s = 0; s < SESSIONS; s++)
      for (const arm of s % 2 === 0 ? arms : [...arms].reverse())
        await session(arm, `s${s}-${arm.placement}`);
    console.log(machine());
    console.log(`${SESSIONS} sessions of ${TURNS} calls per arm, one call at a time:`);
    for (const arm of arms) {
      const t = arm.firstByteMs;
      console.log(
        `${arm.placement.padEnd(11)} first byte p50 ${percentile(t, 50).toFixed(1)} ms, p90 ${percentile(t, 90).toFixed(1)} ms;` +
          ` gateway CPU ${(arm.cpuMs / arm.calls).toFixed(1)} ms per call; mean prompt ${Math.round(arm.promptChars / arm.calls / 1000)}k characters`,
      );
    }
  } finally {
    await Promise.all(
      arms.map((arm) => {
        const exited = new Promise((resolve) => arm.child.once("exit", resolve));
        arm.child.kill("SIGTERM");
        return exited;
      }),
    );
    await engine.close();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
