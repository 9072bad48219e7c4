// The QuickJS WebAssembly sandbox: runs code, and refuses files, network and processes within its limits.
import { beforeAll, describe, expect, it } from "vitest";
import type { Clock } from "../../src/core/clock.js";
import { JsSandbox, RUN_JAVASCRIPT_LIMITS, runJavascriptTool } from "../../src/agent/tools/run-javascript.js";

/** A clock that moves 1 ms every time it is read: the deadline comes after a fixed number of checks. */
class TickingClock implements Clock {
  reads = 0;
  nowMs(): number {
    return this.reads++;
  }
}

const limits = { timeoutMs: 200, memoryBytes: 8 * 1024 * 1024, outputChars: 300 };

describe("run_javascript sandbox", () => {
  let sandbox: JsSandbox;
  let clock: TickingClock;
  beforeAll(async () => {
    clock = new TickingClock();
    sandbox = await JsSandbox.load(clock);
  });

  it("runs a program: console.log output and the last expression's value", () => {
    const result = sandbox.run(
      "const fib = [0, 1]; while (fib.length < 10) fib.push(fib.at(-1) + fib.at(-2));\n" +
        "console.log('sum', fib.reduce((a, b) => a + b, 0)); fib",
      limits,
    );
    expect(result).toEqual({ ok: true, output: "sum 88\n=> [0,1,1,2,3,5,8,13,21,34]" });
  });

  it("awaits a promise the code returns", () => {
    expect(sandbox.run("(async () => { await null; return 6 * 7; })()", limits)).toEqual({
      ok: true,
      output: "=> 42",
    });
  });

  it("has no file system, network or process access", () => {
    const names = ["require", "process", "fetch", "XMLHttpRequest", "WebSocket", "std", "os", "Deno", "Bun"];
    const more = ["setTimeout", "module", "Worker", "importScripts"];
    const globals = sandbox.run(
      `${JSON.stringify([...names, ...more])}.map((name) => name + ":" + typeof globalThis[name]).join(" ")`,
      limits,
    );
    expect(globals).toEqual({
      ok: true,
      output: `=> ${[...names, ...more].map((name) => `${name}:undefined`).join(" ")}`,
    });
    // A control: the same probe sees what the sandbox does have, so the check above is not vacuous.
    expect(
      sandbox.run('["console", "JSON", "Math"].map((n) => typeof globalThis[n]).join(" ")', limits),
    ).toEqual({
      ok: true,
      output: "=> object object object",
    });
    expect(sandbox.run("require('fs').readFileSync('/etc/passwd', 'utf8')", limits)).toEqual({
      ok: false,
      output: "error: ReferenceError: 'require' is not defined",
    });
    for (const module of ["fs", "node:fs", "std", "os", "child_process", "/etc/passwd"]) {
      expect(sandbox.run(`import(${JSON.stringify(module)})`, limits)).toEqual({
        ok: false,
        output: `error: ReferenceError: could not load module '${module}'`,
      });
    }
    expect(sandbox.run("import * as os from 'os'; os.exec(['ls'])", limits)).toMatchObject({ ok: false });
  });

  it("stops an endless loop at its time limit", () => {
    const readsBefore = clock.reads;
    expect(sandbox.run("let i = 0; while (true) { i++; }", limits)).toEqual({
      ok: false,
      output: "error: stopped: the code ran longer than 200 ms",
    });
    // The deadline is read once to set and then at every interrupt check until it passed.
    expect(clock.reads - readsBefore).toBeGreaterThan(limits.timeoutMs);
    // The next run gets a fresh runtime: the stopped loop left nothing behind.
    expect(sandbox.run("typeof i", limits)).toEqual({ ok: true, output: "=> undefined" });
  });

  it("stops code at its memory limit and deep recursion at the stack limit", () => {
    expect(sandbox.run("'x'.repeat(64 * 1024 * 1024).length", limits)).toEqual({
      ok: false,
      output: `error: stopped: the code used more than ${limits.memoryBytes} bytes of memory`,
    });
    expect(sandbox.run("const f = (n) => f(n + 1) + 1; f(0)", limits)).toEqual({
      ok: false,
      output: "error: InternalError: stack overflow",
    });
  });

  it("caps the output it keeps", () => {
    const result = sandbox.run("for (let i = 0; i < 10000; i++) console.log('line ' + i)", limits);
    expect(result.ok).toBe(true);
    expect(result.output.length).toBeLessThanOrEqual(limits.outputChars);
    expect(result.output).toContain("[output cut: ");
  });

  it("reports errors as the model's to fix", () => {
    expect(sandbox.run("throw new TypeError('bad input')", limits)).toEqual({
      ok: false,
      output: "error: TypeError: bad input",
    });
    expect(sandbox.run("let = ;", limits)).toMatchObject({
      ok: false,
      output: expect.stringMatching(/^error: SyntaxError/),
    });
  });

  it("as a tool: its limits and arguments", async () => {
    const tool = runJavascriptTool(sandbox);
    expect(tool.limits).toEqual(RUN_JAVASCRIPT_LIMITS);
    const signal = new AbortController().signal;
    expect(await tool.run({ code: "[3, 1, 2].sort()" }, signal)).toEqual({ ok: true, output: "=> [1,2,3]" });
    expect(await tool.run({ source: "1" }, signal)).toEqual({
      ok: false,
      output: "error: argument 'code' must be a string",
    });
  });
});
