// A flood of idle sockets against a gateway process under a low open-file limit: everyone else still gets in.
import { writeFile } from "node:fs/promises";
import { spawn } from "node:child_process";
import { connect, type Socket } from "node:net";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { answerOk, startScriptedEngine, type ScriptedEngine } from "../helpers/faulty-engine.js";
import { CLI } from "../helpers/processes.js";
import { useTempDirs } from "../helpers/temp-dir.js";

const tempDir = useTempDirs();
const TOKEN = "flood-admin-token-0123456";
const FILE_LIMIT = 256;
const FLOOD = 600;

function openSocket(port: number): Promise<Socket | undefined> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => resolve(socket));
    socket.once("error", () => resolve(undefined));
    socket.on("error", () => undefined);
  });
}

describe("connection floods", () => {
  let engine: ScriptedEngine | undefined;
  const flood: Socket[] = [];
  let stop: (() => void) | undefined;
  afterAll(async () => {
    for (const socket of flood) socket.destroy();
    stop?.();
    await engine?.close();
  });

  it(`${FLOOD} idle sockets under 'ulimit -n ${FILE_LIMIT}' lock nobody out: health, metrics, admin and completions answer`, async () => {
    engine = await startScriptedEngine({ completion: ({ res }) => answerOk(res) });
    const dir = await tempDir("agent-serve-flood-");
    const config = join(dir, "gateway.yaml");
    await writeFile(
      config,
      `server: {host: 127.0.0.1, port: 0, admin_token: ${TOKEN}}\n` +
        `backends:\n  - {id: only, tier: small, base_url: "${engine.url}", model: m}\n`,
    );
    const child = spawn(
      "bash",
      [
        "-c",
        `ulimit -n ${FILE_LIMIT} && exec "$0" --import tsx "$1" gateway --config "$2"`,
        process.execPath,
        CLI,
        config,
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    stop = () => child.kill("SIGKILL");
    let output = "";
    const port = await new Promise<number>((resolve, reject) => {
      const onData = (chunk: Buffer): void => {
        output += chunk.toString();
        const match = output.match(/listening on 127\.0\.0\.1:(\d+)/);
        if (match) resolve(Number(match[1]));
      };
      child.stdout!.on("data", onData);
      child.stderr!.on("data", onData);
      child.once("exit", () => reject(new Error(`gateway exited:\n${output}`)));
    });
    for (let i = 0; i < FLOOD; i += 50) {
      const batch = await Promise.all(Array.from({ length: 50 }, () => openSocket(port)));
      for (const socket of batch) if (socket !== undefined) flood.push(socket);
    }
    const url = `http://127.0.0.1:${port}`;
    const bounded = { signal: AbortSignal.timeout(10_000) };
    const healthz = await fetch(`${url}/healthz`, bounded);
    expect(healthz.status).toBe(200);
    const metrics = await fetch(`${url}/metrics`, bounded);
    expect(metrics.status).toBe(200);
    const admin = await fetch(`${url}/admin/backends`, {
      ...bounded,
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(admin.status).toBe(200);
    const completion = await fetch(`${url}/v1/chat/completions`, {
      ...bounded,
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
    });
    expect(completion.status).toBe(200);
    expect(output).not.toMatch(/EMFILE/);
  });
});
