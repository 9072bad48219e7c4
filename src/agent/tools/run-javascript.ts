// The run_javascript tool: code in QuickJS compiled to WebAssembly, with no file system, network or process.
import {
  newQuickJSWASMModuleFromVariant,
  type QuickJSContext,
  type QuickJSHandle,
  type QuickJSWASMModule,
} from "quickjs-emscripten-core";
import { systemClock, type Clock } from "../../core/clock.js";
import { capOutput, failure, stringArg, type AgentTool, type ToolLimits, type ToolResult } from "./tool.js";

export const RUN_JAVASCRIPT_LIMITS: ToolLimits = {
  timeoutMs: 500,
  memoryBytes: 16 * 1024 * 1024,
  outputChars: 4000,
};
/** The interpreter's C stack: deep recursion stops with a RangeError long before the host stack is at risk. */
const MAX_STACK_BYTES = 256 * 1024;
const MAX_CODE_CHARS = 20_000;

/**
 * One loaded WebAssembly QuickJS module. Each run gets a fresh runtime and context (own heap, own limits),
 * so nothing leaks from one call or one agent to the next. The context holds only the ECMAScript built-ins
 * plus `console.log`: QuickJS's `std`/`os` modules are not part of this build's context, there is no
 * `require`, `process`, `fetch` or module loader, so code cannot reach files, sockets or processes.
 */
export class JsSandbox {
  private constructor(
    private readonly quickjs: QuickJSWASMModule,
    private readonly clock: Clock,
  ) {}

  static async load(clock: Clock = systemClock): Promise<JsSandbox> {
    // The variant's package is CommonJS to TypeScript and ESM to Node: the dynamic import suits both.
    const quickjs = await newQuickJSWASMModuleFromVariant(import("@jitl/quickjs-wasmfile-release-sync"));
    return new JsSandbox(quickjs, clock);
  }

  run(code: string, limits: ToolLimits): ToolResult {
    if (code.length > MAX_CODE_CHARS) return failure(`the code is longer than ${MAX_CODE_CHARS} characters`);
    const runtime = this.quickjs.newRuntime();
    const deadlineMs = this.clock.nowMs() + limits.timeoutMs;
    let interrupted = false;
    runtime.setMemoryLimit(limits.memoryBytes);
    runtime.setMaxStackSize(MAX_STACK_BYTES);
    // Called by the interpreter every few thousand instructions: an endless loop ends here.
    runtime.setInterruptHandler(() => {
      interrupted ||= this.clock.nowMs() > deadlineMs;
      return interrupted;
    });
    const context = runtime.newContext();
    const output = new OutputBuffer(limits.outputChars);
    try {
      installConsole(context, output);
      const evaluated = context.evalCode(code, "agent.js");
      let outcome: ToolResult;
      if (evaluated.error) {
        outcome = this.errorResult(context, evaluated.error, interrupted, limits);
      } else {
        outcome = this.settle(context, evaluated.value, () => interrupted, limits);
      }
      const printed = output.text();
      const body = printed === "" ? outcome.output : `${printed}\n${outcome.output}`;
      return { ok: outcome.ok, output: capOutput(body, limits.outputChars) };
    } finally {
      context.dispose();
      runtime.dispose();
    }
  }

  /** A completed value, or a promise run to its end (bounded by the same interrupt deadline). */
  private settle(
    context: QuickJSContext,
    value: QuickJSHandle,
    interrupted: () => boolean,
    limits: ToolLimits,
  ): ToolResult {
    try {
      let state = context.getPromiseState(value);
      // A value that is not a promise comes back as "fulfilled" with the very same handle.
      if (state.type === "fulfilled" && state.notAPromise === true) return dumpValue(context, value);
      if (state.type === "pending") {
        const jobs = context.runtime.executePendingJobs();
        if (jobs.error) return this.errorResult(context, jobs.error, interrupted(), limits);
        state = context.getPromiseState(value);
      }
      if (state.type === "pending") return failure("the code's promise never settled");
      if (state.type === "rejected") return this.errorResult(context, state.error, interrupted(), limits);
      try {
        return dumpValue(context, state.value);
      } finally {
        state.value.dispose();
      }
    } finally {
      value.dispose();
    }
  }

  private errorResult(
    context: QuickJSContext,
    error: QuickJSHandle,
    interrupted: boolean,
    limits: ToolLimits,
  ): ToolResult {
    try {
      if (interrupted) return failure(`stopped: the code ran longer than ${limits.timeoutMs} ms`);
      const dumped: unknown = context.dump(error);
      const message = describeError(dumped);
      if (/out of memory/i.test(message))
        return failure(`stopped: the code used more than ${limits.memoryBytes} bytes of memory`);
      return failure(message);
    } finally {
      error.dispose();
    }
  }
}

function dumpValue(context: QuickJSContext, handle: QuickJSHandle): ToolResult {
  const value: unknown = context.dump(handle);
  return { ok: true, output: value === undefined ? "(no value)" : `=> ${formatValue(value)}` };
}

function formatValue(value: unknown): string {
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

function describeError(dumped: unknown): string {
  if (typeof dumped === "object" && dumped !== null && "message" in dumped) {
    const { name, message } = dumped as { name?: unknown; message?: unknown };
    return `${typeof name === "string" ? name : "Error"}: ${String(message)}`;
  }
  return `thrown: ${formatValue(dumped)}`;
}

/** console.log output, kept to the cap: past it the sandbox stops storing (and says so once). */
class OutputBuffer {
  private readonly parts: string[] = [];
  private chars = 0;
  private dropped = 0;

  constructor(private readonly maxChars: number) {}

  write(line: string): void {
    if (this.chars >= this.maxChars) {
      this.dropped += line.length + 1;
      return;
    }
    this.parts.push(line);
    this.chars += line.length + 1;
  }

  text(): string {
    const text = this.parts.join("\n");
    return this.dropped === 0 ? text : `${text}\n[output cut: ${this.dropped} more characters]`;
  }
}

function installConsole(context: QuickJSContext, output: OutputBuffer): void {
  const consoleObject = context.newObject();
  const log = context.newFunction("log", (...args: QuickJSHandle[]) => {
    output.write(args.map((arg) => formatValue(context.dump(arg))).join(" "));
  });
  context.setProp(consoleObject, "log", log);
  context.setProp(consoleObject, "error", log);
  context.setProp(context.global, "console", consoleObject);
  log.dispose();
  consoleObject.dispose();
}

/** Where code runs: a JsSandbox on this thread (tests, with an injected clock) or a WorkerSandbox (the product). */
export interface JavaScriptRunner {
  run(code: string, limits: ToolLimits): ToolResult | Promise<ToolResult>;
  close?(): Promise<void>;
}

export function runJavascriptTool(
  sandbox: JavaScriptRunner,
  limits: ToolLimits = RUN_JAVASCRIPT_LIMITS,
): AgentTool {
  return {
    name: "run_javascript",
    description:
      "Run JavaScript (ES2023) in an isolated QuickJS sandbox and return what console.log printed and the " +
      `value of the last expression. No files, network, timers or modules. Limits: ${limits.timeoutMs} ms, ` +
      `${limits.memoryBytes / 1024 / 1024} MiB, ${limits.outputChars} characters of output.`,
    parameters: {
      type: "object",
      properties: { code: { type: "string", description: "a script; its last expression is the result" } },
      required: ["code"],
      additionalProperties: false,
    },
    limits,
    selfTimed: true,
    run(args) {
      const code = stringArg(args, "code");
      if (typeof code !== "string") return Promise.resolve(code);
      return Promise.resolve(sandbox.run(code, limits));
    },
    close: () => sandbox.close?.() ?? Promise.resolve(),
  };
}
