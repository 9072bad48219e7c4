// Test fixture run inside a network namespace of its own (as a container has one): starts a command line as
// the image would, reaches it at a non-loopback address, and prints what it saw as one JSON line.
import { spawn, spawnSync } from "node:child_process";
import { createInterface } from "node:readline";

export interface NamespaceProbe {
  /** The command line (the image's entrypoint and the documented arguments), run in `cwd`. */
  command: string[];
  cwd: string;
  env: Record<string, string>;
  /** The address published ports reach (a container's own interface), and the container port. */
  address: string;
  port: number;
  /** The log line (a regular expression's source) that says the command serves. */
  listening: string;
  /** GET these paths, then POST the chat completion, in order. */
  get: string[];
  chat: Record<string, unknown> | undefined;
  /** Run while the command serves (the image's HEALTHCHECK); its exit code is reported. */
  healthcheck: string[] | undefined;
}

export interface NamespaceReport {
  listening: string;
  answers: { path: string; status: number; body: string }[];
  healthcheckExit: number | null | undefined;
  exitCode: number | null;
  output: string[];
}

async function main(): Promise<void> {
  const probe = JSON.parse(process.argv[2]!) as NamespaceProbe;
  // The namespace starts with its loopback down and no other address: a container's own address stands
  // in as a second address (not 127.x) that only a server bound to every interface answers on.
  spawnSync("ip", ["link", "set", "lo", "up"], { stdio: "inherit" });
  spawnSync("ip", ["addr", "add", `${probe.address}/32`, "dev", "lo"], { stdio: "inherit" });
  const child = spawn(probe.command[0]!, probe.command.slice(1), {
    cwd: probe.cwd,
    env: probe.env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const output: string[] = [];
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const listening = await new Promise<string>((resolve, reject) => {
    for (const stream of [child.stdout, child.stderr]) {
      createInterface({ input: stream }).on("line", (line) => {
        output.push(line);
        if (new RegExp(probe.listening).test(line)) resolve(line);
      });
    }
    void exited.then((code) =>
      reject(new Error(`exited with ${code} before listening:\n${output.join("\n")}`)),
    );
  });
  const base = `http://${probe.address}:${probe.port}`;
  const answers: NamespaceReport["answers"] = [];
  for (const path of probe.get) {
    const res = await fetch(base + path);
    answers.push({ path, status: res.status, body: await res.text() });
  }
  if (probe.chat !== undefined) {
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(probe.chat),
    });
    answers.push({ path: "/v1/chat/completions", status: res.status, body: await res.text() });
  }
  let healthcheckExit: number | null | undefined;
  if (probe.healthcheck !== undefined) {
    const check = spawnSync(probe.healthcheck[0]!, probe.healthcheck.slice(1), {
      cwd: probe.cwd,
      env: probe.env,
    });
    healthcheckExit = check.status;
  }
  child.kill("SIGTERM");
  const exitCode = await exited;
  const report: NamespaceReport = { listening, answers, healthcheckExit, exitCode, output };
  process.stdout.write(`${JSON.stringify(report)}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`${String(err instanceof Error ? err.stack : err)}\n`);
  process.exit(1);
});
