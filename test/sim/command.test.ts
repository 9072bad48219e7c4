// `agent-serve sim`: flag parsing, and the real process (listening line, clean SIGTERM stop, death by fault).
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { UsageError } from "../../src/cli/command.js";
import { parseSimArgs, simCommand } from "../../src/sim/command.js";

const CLI = fileURLToPath(new URL("../../src/cli.ts", import.meta.url));

describe("parseSimArgs", () => {
  it("maps every flag onto engine options", () => {
    const parsed = parseSimArgs([
      "--port=0",
      "--host",
      "127.0.0.1",
      "--profile",
      "qwen2.5-7b",
      "--time-scale",
      "20",
      "--model",
      "my/model",
      "--seed",
      "4",
      "--max-num-seqs",
      "8",
      "--max-num-batched-tokens",
      "512",
      "--kv-blocks",
      "100",
      "--max-model-len",
      "4096",
      "--fault",
      "slow:50",
    ]);
    expect(parsed.engine).toEqual({
      host: "127.0.0.1",
      port: 0,
      profile: "qwen2.5-7b",
      timeScale: 20,
      model: "my/model",
      seed: 4,
      maxNumSeqs: 8,
      maxNumBatchedTokens: 512,
      kvCapacityBlocks: 100,
      maxModelLen: 4096,
    });
    expect(parsed.fault).toEqual({ kind: "slow", extraLatencyMs: 50 });
    expect(parseSimArgs([]).engine.port).toBe(8100);
  });

  it("maps the tool-call rates", () => {
    const parsed = parseSimArgs([
      "--tool-call-rate",
      "0.5",
      "--tool-call-rate-after-result",
      "0.1",
      "--parallel-tool-call-rate",
      "1",
    ]);
    expect(parsed.engine).toMatchObject({
      toolCallRate: 0.5,
      toolCallRateAfterToolResult: 0.1,
      parallelToolCallRate: 1,
    });
    expect(parseSimArgs(["--tool-types", "gpt-oss"]).engine.toolTypes).toBe("gpt-oss");
    expect(parseSimArgs([]).engine.toolTypes).toBeUndefined();
  });

  it("loads a --script file", () => {
    const parsed = parseSimArgs(["--script", "configs/sim-script.example.yaml"]);
    expect(parsed.engine.script?.conversations.map((c) => c.name)).toEqual([
      "fix-failing-test",
      "anything-else",
    ]);
  });

  it.each([
    [["--port", "http"]],
    [["--profile", "gpt-5"]],
    [["--time-scale", "0"]],
    [["--fault", "explode"]],
    [["--fault-delay-ms", "10"]],
    [["--tool-call-rate", "1.5"]],
    [["--parallel-tool-call-rate", "x"]],
    [["--tool-types", "harmony"]],
    [["--unknown"]],
    [["positional"]],
    [["--script", "no/such/script.yaml"]],
    [["--script", "package.json"]],
  ])("rejects %j with a UsageError", (argv) => {
    expect(() => parseSimArgs(argv)).toThrow(UsageError);
  });

  it("documents every flag in its help", () => {
    for (const flag of [
      "--port",
      "--host",
      "--profile",
      "--time-scale",
      "--model",
      "--seed",
      "--fault",
      "--tool-call-rate",
      "--tool-call-rate-after-result",
      "--parallel-tool-call-rate",
      "--tool-types",
      "--script",
    ]) {
      expect(simCommand.help).toContain(flag);
    }
  });
});

function launch(args: string[]): { child: ChildProcess; url: Promise<string>; exit: Promise<number | null> } {
  const child = spawn(process.execPath, ["--import", "tsx", CLI, "sim", "--port", "0", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  const url = new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const match = /listening on (http:\/\/\S+)/.exec(out);
      if (match) resolve(match[1]!);
    });
    child.once("exit", () => reject(new Error(`exited before listening: ${out}`)));
  });
  const exit = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return { child, url, exit };
}

describe("the sim process", () => {
  it("prints one line when listening, serves, and exits 0 on SIGTERM", async () => {
    const { child, url, exit } = launch(["--profile", "qwen2.5-7b", "--time-scale", "100"]);
    const base = await url;
    expect((await fetch(`${base}/health`)).status).toBe(200);
    const reply = await fetch(`${base}/v1/completions`, {
      method: "POST",
      body: '{"prompt":"hi","max_tokens":2}',
    });
    expect(reply.status).toBe(200);
    child.kill("SIGTERM");
    expect(await exit).toBe(0);
  });

  it("just dies on a die fault", async () => {
    const { url, exit } = launch(["--fault", "die", "--fault-delay-ms", "100"]);
    await url;
    expect(await exit).toBe(1);
  });
});
