// The sandbox on worker threads: results come back, the agents' event loop stays free, a hard stop always ends code.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WorkerSandbox } from "../../src/agent/tools/worker-sandbox.js";

const limits = { timeoutMs: 300, memoryBytes: 16 * 1024 * 1024, outputChars: 1000 };

describe("WorkerSandbox", () => {
  let sandbox: WorkerSandbox;
  beforeAll(async () => {
    sandbox = new WorkerSandbox(1);
    await sandbox.warmUp();
  });
  afterAll(() => sandbox.close());

  it("runs code on the worker and returns its output", async () => {
    expect(await sandbox.run("console.log(typeof process, typeof require); 6 * 7", limits)).toEqual({
      ok: true,
      output: "undefined undefined\n=> 42",
    });
  });

  it("stops code the interrupt cannot reach, without blocking this thread, and starts afresh", async () => {
    // One native call per iteration that grinds the heap: QuickJS polls its interrupt only between bytecodes.
    // Counts this thread's event-loop turns while the code runs (no timer: a turn is a setImmediate callback).
    let turns = 0;
    let done = false;
    const turn = (): void => {
      if (done) return;
      turns++;
      setImmediate(turn);
    };
    setImmediate(turn);
    const grinder = sandbox.run("const a = []; while (true) a.push(new Array(100000).fill(1.5))", limits);
    // Read at the moment the result arrives: code run on this thread would answer before the loop turned once.
    const [result, turnsFirst] = await grinder.then((r) => [r, turns] as const);
    done = true;
    expect(result.ok).toBe(false);
    expect(result.output).toMatch(
      /^error: stopped: the code (ran longer than 300 ms|used more than \d+ bytes)/,
    );
    // This thread's event loop turned while the code ran: the event loop of the agents was never held.
    expect(turnsFirst).toBeGreaterThan(0);
    // The stopped worker is gone; the next call gets a fresh one with nothing left over.
    expect(await sandbox.run("typeof a", limits)).toEqual({ ok: true, output: "=> undefined" });
  });

  it("queues calls beyond its workers and answers each", async () => {
    const results = await Promise.all([1, 2, 3].map((n) => sandbox.run(`${n} * 10`, limits)));
    expect(results.map((r) => r.output)).toEqual(["=> 10", "=> 20", "=> 30"]);
  });

  it("refuses work once closed", async () => {
    const closing = new WorkerSandbox(1);
    await closing.close();
    expect(await closing.run("1", limits)).toEqual({ ok: false, output: "error: the sandbox is closed" });
  });
});
