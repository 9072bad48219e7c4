// The calculator tool: arithmetic through the expression parser, so the model never guesses sums.
import { CONSTANT_NAMES, DEFAULT_EXPRESSION_LIMITS, FUNCTION_NAMES, evaluate } from "./expression.js";
import { failure, stringArg, type AgentTool, type ToolLimits } from "./tool.js";

export function calculatorTool(): AgentTool {
  // Parsing is linear in the expression and the depth is capped, so its size bounds both time and memory.
  const limits: ToolLimits = {
    timeoutMs: 100,
    memoryBytes: DEFAULT_EXPRESSION_LIMITS.maxChars * 64,
    outputChars: 64,
  };
  return {
    name: "calculator",
    description:
      "Evaluate an arithmetic expression exactly (double precision). Operators + - * / % ^ (or **), " +
      `parentheses, constants ${CONSTANT_NAMES.join(", ")}, functions ${FUNCTION_NAMES.join(", ")}. ` +
      `At most ${DEFAULT_EXPRESSION_LIMITS.maxChars} characters.`,
    parameters: {
      type: "object",
      properties: {
        expression: { type: "string", description: "for example (1234 * 5678) / 3 + 2^10" },
      },
      required: ["expression"],
      additionalProperties: false,
    },
    limits,
    run(args) {
      const expression = stringArg(args, "expression");
      if (typeof expression !== "string") return Promise.resolve(expression);
      const result = evaluate(expression);
      return Promise.resolve(result.ok ? { ok: true, output: String(result.value) } : failure(result.error));
    },
  };
}
