// Peak RSS of a gateway process relaying (or refusing) a 1 GB non-streaming answer.
// node --import tsx bench/faults/large-answer.ts [--limit BYTES] [--size BYTES]
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startEngine } from "./engines.js";

function flag(name: string): number | undefined {
  const at = process.argv.indexOf(name);
  return at < 0 ? undefined : Number(process.argv[at + 1]);
}
const sizeBytes = flag("--size") ?? 1024 ** 3;
const limitBytes = flag("--limit");
const CLI = fileURLToPath(new URL("../../src/cli.ts", import.meta.url));

/** Sends a JSON object of `sizeBytes` as fast as the gateway takes it, chunked (no Content-Length). */
const engine = await startEngine((req, res) => {
  res.writeHead(200, { "content-type": "application/json" });
  const chunk = Buffer.alloc(1024 * 1024, 0x78);
  let sent = 0;
  res.write('{"choices":[{"message":{"content":"');
  const pump = (): void => {
    while (sent < sizeBytes) {
      sent += chunk.length;
      if (!res.write(chunk)) return void res.once("drain", pump);
    }
    res.end('"}}]}');
  };
  req.socket.on("close", () => (sent = sizeBytes + 1));
  pump();
});
const dir = await mkdtemp(join(tmpdir(), "agent-serve-large-"));
const config = join(dir, "gateway.yaml");
await writeFile(
  config,
  `server: {host: 127.0.0.1, port: 0}\nbackends:\n  - {id: only, tier: small, base_url: "${engine.url}", model: m}\n` +
    (limitBytes === undefined ? "" : `upstream: {max_response_bytes: ${limitBytes}}\n`),
);
const child = spawn(process.execPath, ["--import", "tsx", CLI, "gateway", "--config", config], {
  stdio: ["ignore", "pipe", "pipe"],
});
let output = "";
const port = await new Promise<number>((resolve, reject) => {
  const onData = (c: Buffer): void => {
    output += c.toString();
    const match = output.match(/listening on 127\.0\.0\.1:(\d+)/);
    if (match) resolve(Number(match[1]));
  };
  child.stdout.on("data", onData);
  child.stderr.on("data", onData);
  child.once("exit", () => reject(new Error(output)));
});
const rssKiB = (field: string): number =>
  Number(readFileSync(`/proc/${child.pid}/status`, "utf8").match(new RegExp(`${field}:\\s+(\\d+)`))![1]);
const beforeKiB = rssKiB("VmRSS");
const startedMs = performance.now();
const response = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
});
let receivedBytes = 0;
for await (const chunk of response.body!) receivedBytes += (chunk as Uint8Array).length;
const peakRssMiB = Math.round(rssKiB("VmHWM") / 1024);
const seconds = Math.round(performance.now() - startedMs) / 1000;
child.kill("SIGTERM");
await new Promise((resolve) => child.once("exit", resolve)); // its log lines are all out now
console.log(
  JSON.stringify({
    answerBytes: sizeBytes,
    limitBytes: limitBytes ?? "default (64 MiB)",
    status: response.status,
    receivedBytes,
    seconds,
    rssBeforeMiB: Math.round(beforeKiB / 1024),
    peakRssMiB,
    logged: /answer too large/.test(output),
  }),
);
await engine.close();
