// The calculator's parser: precedence, associativity, functions, and a clear refusal of anything else.
import { describe, expect, it } from "vitest";
import { calculatorTool } from "../../src/agent/tools/calculator.js";
import { evaluate } from "../../src/agent/tools/expression.js";

const value = (source: string): number => {
  const result = evaluate(source);
  if (!result.ok) throw new Error(`'${source}' failed: ${result.error}`);
  return result.value;
};

describe("expression evaluator", () => {
  it("follows the usual precedence and associativity", () => {
    expect(value("1 + 2 * 3")).toBe(7);
    expect(value("(1 + 2) * 3")).toBe(9);
    expect(value("10 - 4 - 3")).toBe(3); // left-associative
    expect(value("48 / 4 / 2")).toBe(6);
    expect(value("2 ^ 3 ^ 2")).toBe(512); // right-associative
    expect(value("2 ** 10")).toBe(1024);
    expect(value("-2 ^ 2")).toBe(-4); // the power binds tighter than the sign
    expect(value("2 ^ -1")).toBe(0.5);
    expect(value("17 % 5 * 2")).toBe(4);
    expect(value("--3")).toBe(3);
    expect(value("1e3 * .5 + 2.5")).toBe(502.5);
  });

  it("knows its constants and functions, with their arity", () => {
    expect(value("sqrt(16) + abs(-3)")).toBe(7);
    expect(value("max(1, 5, 3) - min(4, 2)")).toBe(3);
    expect(value("round(pi * 100)")).toBe(314);
    expect(value("ln(e)")).toBe(1);
    expect(value("48000 * 16 / 4096")).toBe(187.5);
    expect(evaluate("sqrt(1, 2)")).toEqual({ ok: false, error: "sqrt() takes 1 argument(s), got 2" });
  });

  it.each([
    ["", "the expression is empty"],
    ["2 +", "the expression ends too early"],
    ["1 2", "unexpected '2' at position 3"],
    ["(1 + 2", "missing ')' at the end"],
    ["foo(1)", "unknown function 'foo' at position 1"],
    ["x * 2", "unknown name 'x' at position 1"],
    ["process.exit(1)", "unexpected character '.' at position 8"],
    ["constructor", "unknown name 'constructor' at position 1"],
    ["constructor(1)", "unknown function 'constructor' at position 1"],
    ["__proto__", "unknown name '__proto__' at position 1"],
    ["toString(2)", "unknown function 'tostring' at position 1"],
    ["1; 2", "unexpected character ';' at position 2"],
    ["1 / 0", "division by zero"],
    ["10 ^ 400", "the result is not a finite number"],
    ["sqrt(-1)", "the result is not a finite number"],
  ])("refuses %j: %s", (source, error) => {
    expect(evaluate(source)).toEqual({ ok: false, error });
  });

  it("bounds the input: length and nesting", () => {
    expect(evaluate("1+".repeat(300) + "1")).toEqual({
      ok: false,
      error: "the expression is longer than 500 characters",
    });
    expect(evaluate("(".repeat(100) + "1" + ")".repeat(100))).toEqual({
      ok: false,
      error: "nested deeper than 64 levels",
    });
    expect(evaluate("-".repeat(100) + "1")).toEqual({ ok: false, error: "nested deeper than 64 levels" });
    expect(value("(".repeat(30) + "1" + ")".repeat(30))).toBe(1);
  });

  it("as a tool: a number for the model, or an error result", async () => {
    const tool = calculatorTool();
    const signal = new AbortController().signal;
    expect(await tool.run({ expression: "(1234 * 5678) / 2 + 2^10" }, signal)).toEqual({
      ok: true,
      output: "3504350",
    });
    expect(await tool.run({ expression: "2 +* 3" }, signal)).toEqual({
      ok: false,
      output: "error: unexpected '*' at position 4",
    });
    expect(await tool.run({ expression: 7 }, signal)).toEqual({
      ok: false,
      output: "error: argument 'expression' must be a string",
    });
  });
});
