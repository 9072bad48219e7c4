// The contract of one agent tool: a JSON-Schema function the model may call, its limits, and how it runs.

/** A JSON Schema object as OpenAI function tools take it (only the parts our tools use). */
export interface JsonSchemaObject {
  type: "object";
  properties: Record<string, Record<string, unknown>>;
  required: string[];
  additionalProperties: false;
}

/** What bounds one call. Every tool has all three; a limit a tool cannot exceed by construction says why. */
export interface ToolLimits {
  /** Wall time one call may take before it is stopped. */
  timeoutMs: number;
  /** Memory one call may use (file bytes read, sandbox heap, expression size), in bytes. */
  memoryBytes: number;
  /** Characters of output handed back to the model; more is cut and marked. */
  outputChars: number;
}

/** A call's outcome as the model sees it: `ok: false` output is an error message the model can act on. */
export interface ToolResult {
  ok: boolean;
  output: string;
}

export interface AgentTool {
  readonly name: string;
  readonly description: string;
  readonly parameters: JsonSchemaObject;
  readonly limits: ToolLimits;
  /**
   * The tool stops itself at its time limit and says so (the sandbox): the toolbox's own stop then waits a
   * grace period longer, so the tool's message wins. Others are stopped by the toolbox at the limit.
   */
  readonly selfTimed?: boolean;
  /** Runs one call with already-parsed arguments; never throws for bad input (returns ok: false). */
  run(args: Record<string, unknown>, signal: AbortSignal): Promise<ToolResult>;
  /** Frees what the tool holds (worker threads); the run calls it once at the end. */
  close?(): Promise<void>;
}

export function failure(message: string): ToolResult {
  return { ok: false, output: `error: ${message}` };
}

/** Cuts text to `maxChars`, saying how much was left out so the model knows the output is partial. */
export function capOutput(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  const marker = `\n[output cut: ${text.length - maxChars} more characters]`;
  return text.slice(0, Math.max(0, maxChars - marker.length)) + marker;
}

/** The string argument `name`, or an error result naming what is wrong. */
export function stringArg(args: Record<string, unknown>, name: string): string | ToolResult {
  const value = args[name];
  if (typeof value !== "string") return failure(`argument '${name}' must be a string`);
  return value;
}
