// The agent's tools as the model sees them (OpenAI function tools) and one dispatch path with every limit.
import type { ChatCompletionFunctionTool } from "openai/resources/chat/completions";
import { capOutput, failure, type AgentTool, type ToolResult } from "./tools/tool.js";

export interface ToolCallRecord {
  name: string;
  ok: boolean;
  durationMs: number;
}

/** How much longer the toolbox waits for a self-timed tool (the sandbox's interrupt, then its hard stop). */
const SELF_TIMED_GRACE_MS = 1000;

export class Toolbox {
  private readonly byName: Map<string, AgentTool>;

  constructor(
    readonly tools: readonly AgentTool[],
    private readonly nowMs: () => number = () => performance.now(),
  ) {
    this.byName = new Map(tools.map((tool) => [tool.name, tool]));
  }

  async close(): Promise<void> {
    await Promise.all(this.tools.map((tool) => tool.close?.()));
  }

  /** The `tools` parameter of a chat completion. */
  definitions(): ChatCompletionFunctionTool[] {
    return this.tools.map((tool) => ({
      type: "function",
      function: { name: tool.name, description: tool.description, parameters: { ...tool.parameters } },
    }));
  }

  /**
   * Runs one call the model asked for. Whatever goes wrong (unknown tool, arguments that are not a JSON
   * object, a tool over its time limit, a tool that throws) becomes an error result for the model to read:
   * a bad call never ends the agent's turn.
   */
  async call(name: string, argumentsJson: string): Promise<ToolResult & { record: ToolCallRecord }> {
    const started = this.nowMs();
    const result = await this.dispatch(name, argumentsJson);
    return { ...result, record: { name, ok: result.ok, durationMs: this.nowMs() - started } };
  }

  private async dispatch(name: string, argumentsJson: string): Promise<ToolResult> {
    const tool = this.byName.get(name);
    if (tool === undefined)
      return failure(`no tool named '${name}'; the tools are ${[...this.byName.keys()].join(", ")}`);
    let args: unknown;
    try {
      args = JSON.parse(argumentsJson === "" ? "{}" : argumentsJson);
    } catch {
      return failure("the arguments are not valid JSON");
    }
    if (typeof args !== "object" || args === null || Array.isArray(args))
      return failure("the arguments must be a JSON object");
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<ToolResult>((resolve) => {
      timer = setTimeout(
        () => {
          controller.abort();
          resolve(failure(`${name} took longer than its limit of ${tool.limits.timeoutMs} ms`));
        },
        tool.limits.timeoutMs + (tool.selfTimed === true ? SELF_TIMED_GRACE_MS : 0),
      );
    });
    try {
      const result = await Promise.race([
        tool.run(args as Record<string, unknown>, controller.signal),
        timedOut,
      ]);
      return { ok: result.ok, output: capOutput(result.output, tool.limits.outputChars) };
    } catch (err) {
      return failure(`${name} failed: ${err instanceof Error ? err.message : String(err)}`);
    } finally {
      clearTimeout(timer);
    }
  }
}
