// A second Ctrl-C during the drain stops the gateway at once, and says so (the first one waits for in-flight requests).
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, expect, it } from "vitest";

const CLI_TS = fileURLToPath(new URL("../../src/cli.ts", import.meta.url));

let engine: Server | undefined;
let dir: string | undefined;
afterEach(async () => {
  engine?.closeAllConnections();
  engine?.close();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

it("a second SIGINT during the drain exits 130 at once with a line saying so", async () => {
  // An engine that takes a completion and never answers it: the drain would wait out its whole grace.
  let taken: (req: IncomingMessage) => void = () => undefined;
  const completionTaken = new Promise<IncomingMessage>((resolve) => (taken = resolve));
  engine = createServer((req, res) => {
    if (req.method === "POST") taken(req);
    else res.writeHead(200, { "content-type": "application/json" }).end("{}");
  });
  engine.listen(0, "127.0.0.1");
  await once(engine, "listening");
  const enginePort = (engine.address() as AddressInfo).port;
  dir = await mkdtemp(join(tmpdir(), "agent-serve-second-signal-"));
  const config = join(dir, "gateway.yaml");
  await writeFile(
    config,
    `server: {host: 127.0.0.1, port: 0, shutdown_grace_seconds: 120}\n` +
      `backends:\n  - {id: e0, tier: small, base_url: "http://127.0.0.1:${enginePort}", model: m}\n`,
  );
  const child = spawn(process.execPath, ["--import", "tsx", CLI_TS, "gateway", "--config", config], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  const exited = once(child, "exit") as Promise<[number | null, NodeJS.Signals | null]>;
  let output = "";
  const seen = (pattern: RegExp): Promise<RegExpMatchArray> =>
    new Promise((resolve) => {
      const check = (): void => {
        const match = pattern.exec(output);
        if (match !== null) resolve(match);
      };
      for (const stream of [child.stdout, child.stderr])
        stream.setEncoding("utf8").on("data", (chunk: string) => {
          output += chunk;
          check();
        });
      check();
    });
  try {
    const port = Number((await seen(/gateway listening on [^\s"]*:(\d+)/))[1]);
    const request = fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
    }).catch((err: unknown) => err);
    await completionTaken;
    child.kill("SIGINT");
    await seen(/Ctrl-C again to stop now/);
    child.kill("SIGINT");
    const [code] = await exited;
    expect(code, output).toBe(130);
    expect(output).toContain(
      "agent-serve: SIGINT again: stopping now, without waiting for in-flight requests",
    );
    await request;
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  }
}, 60_000);
