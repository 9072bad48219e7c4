// The thread a WorkerSandbox runs code on: one JsSandbox, one call at a time, results posted back.
import { GatewayError } from "../../core/errors.js";
import { parentPort } from "node:worker_threads";
import { JsSandbox } from "./run-javascript.js";
import type { ToolLimits, ToolResult } from "./tool.js";

export interface SandboxJob {
  id: number;
  code: string;
  limits: ToolLimits;
}

export type SandboxMessage = { kind: "ready" } | { kind: "result"; id: number; result: ToolResult };

const port = parentPort;
if (port === null) throw new GatewayError("internal_error", "sandbox-worker.ts runs only as a worker thread");
const sandbox = await JsSandbox.load();
port.on("message", (job: SandboxJob) => {
  const message: SandboxMessage = { kind: "result", id: job.id, result: sandbox.run(job.code, job.limits) };
  port.postMessage(message);
});
port.postMessage({ kind: "ready" } satisfies SandboxMessage);
