// Runs sandboxed code on worker threads: the agents' event loop never waits on it, and a hard stop always works.
import { Worker } from "node:worker_threads";
import type { SandboxJob, SandboxMessage } from "./sandbox-worker.js";
import { failure, type ToolLimits, type ToolResult } from "./tool.js";

/**
 * Past the interrupt deadline the worker gets this long to report "stopped" itself; then it is terminated.
 * The interrupt handler runs between bytecodes, so one long native call (a huge Array.fill that drives the
 * heap to its limit) can outlast it: terminate() ends even that.
 */
const HARD_STOP_GRACE_MS = 200;
/** The worker's own V8 heap (QuickJS's heap is WebAssembly memory, bounded by the sandbox's memory limit). */
const WORKER_HEAP_MB = 64;

/** Under tsx or vitest this module is .ts: the worker registers tsx before importing the entry. */
const ENTRY_URL = new URL(
  import.meta.url.endsWith(".ts") ? "./sandbox-worker.ts" : "./sandbox-worker.js",
  import.meta.url,
).href;
const BOOT = `const { workerData } = require("node:worker_threads");
(async () => {
  if (workerData.tsx) (await import("tsx/esm/api")).register();
  await import(workerData.entry);
})();`;

interface Slot {
  worker: Worker;
  ready: Promise<void>;
}

export class WorkerSandbox {
  private readonly idle: Slot[] = [];
  private readonly all = new Set<Slot>();
  private readonly waiting: ((slot: Slot) => void)[] = [];
  private nextId = 0;
  private closed = false;

  /** At most `maxWorkers` calls run at once; more wait for a free worker. */
  constructor(private readonly maxWorkers = 2) {}

  async run(code: string, limits: ToolLimits): Promise<ToolResult> {
    if (this.closed) return failure("the sandbox is closed");
    const slot = await this.acquire();
    try {
      await slot.ready;
    } catch (err) {
      this.discard(slot);
      return failure(`the sandbox did not start: ${err instanceof Error ? err.message : String(err)}`);
    }
    const id = this.nextId++;
    const outcome = await new Promise<{ result: ToolResult; healthy: boolean }>((resolve) => {
      const onMessage = (message: SandboxMessage): void => {
        if (message.kind === "result" && message.id === id) finish({ result: message.result, healthy: true });
      };
      const onExit = (): void => finish({ result: failure("the sandbox thread exited"), healthy: false });
      const timer = setTimeout(() => {
        const stopped = failure(`stopped: the code ran longer than ${limits.timeoutMs} ms`);
        finish({ result: stopped, healthy: false });
      }, limits.timeoutMs + HARD_STOP_GRACE_MS);
      const finish = (value: { result: ToolResult; healthy: boolean }): void => {
        clearTimeout(timer);
        slot.worker.off("message", onMessage);
        slot.worker.off("exit", onExit);
        resolve(value);
      };
      slot.worker.on("message", onMessage);
      slot.worker.once("exit", onExit);
      slot.worker.postMessage({ id, code, limits } satisfies SandboxJob);
    });
    if (outcome.healthy) this.release(slot);
    else this.discard(slot);
    return outcome.result;
  }

  /** Starts every worker now, so no call pays for a thread start and a WebAssembly compile. */
  async warmUp(): Promise<void> {
    while (this.all.size < this.maxWorkers) this.idle.push(this.spawn());
    await Promise.all([...this.all].map((slot) => slot.ready));
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.all].map((slot) => slot.worker.terminate()));
    this.all.clear();
    this.idle.length = 0;
  }

  private acquire(): Promise<Slot> {
    const idle = this.idle.pop();
    if (idle !== undefined) return Promise.resolve(idle);
    if (this.all.size < this.maxWorkers) return Promise.resolve(this.spawn());
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  private release(slot: Slot): void {
    const next = this.waiting.shift();
    if (next !== undefined) next(slot);
    else this.idle.push(slot);
  }

  /** A worker that was stopped or failed is never reused; a waiting call gets a fresh one. */
  private discard(slot: Slot): void {
    this.all.delete(slot);
    void slot.worker.terminate();
    const next = this.waiting.shift();
    if (next !== undefined && !this.closed) next(this.spawn());
  }

  private spawn(): Slot {
    const worker = new Worker(BOOT, {
      eval: true,
      workerData: { entry: ENTRY_URL, tsx: ENTRY_URL.endsWith(".ts") },
      resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB },
      stdout: false,
      stderr: false,
    });
    // An idle worker must not keep the process alive.
    worker.unref();
    const ready = new Promise<void>((resolve, reject) => {
      const onMessage = (message: SandboxMessage): void => {
        if (message.kind !== "ready") return;
        worker.off("message", onMessage);
        worker.off("error", reject);
        resolve();
      };
      worker.on("message", onMessage);
      worker.once("error", reject);
    });
    ready.catch(() => undefined);
    const slot: Slot = { worker, ready };
    this.all.add(slot);
    return slot;
  }
}
