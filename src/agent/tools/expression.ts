// A small arithmetic language for the calculator: a recursive-descent parser and evaluator, never eval.
//
//   expr    := term (("+" | "-") term)*
//   term    := unary (("*" | "/" | "%") unary)*
//   unary   := ("+" | "-") unary | power
//   power   := primary (("^" | "**") unary)?      right-associative; -2^2 is -(2^2), as in maths
//   primary := number | constant | function "(" expr ("," expr)* ")" | "(" expr ")"

export type Evaluation = { ok: true; value: number } | { ok: false; error: string };

export interface ExpressionLimits {
  maxChars: number;
  /** Nesting of parentheses, unary signs and powers: bounds the parser's recursion. */
  maxDepth: number;
}

export const DEFAULT_EXPRESSION_LIMITS: ExpressionLimits = { maxChars: 500, maxDepth: 64 };

// Maps, not object literals: a lookup of "constructor" or "__proto__" must find nothing.
const CONSTANTS = new Map<string, number>([
  ["pi", Math.PI],
  ["e", Math.E],
  ["tau", 2 * Math.PI],
]);

/** Functions with their arity (a range): a wrong count is an error, not NaN. */
interface MathFunction {
  min: number;
  max: number;
  apply: (args: number[]) => number;
}

const FUNCTIONS = new Map<string, MathFunction>(
  Object.entries({
    sqrt: { min: 1, max: 1, apply: ([x]) => Math.sqrt(x!) },
    abs: { min: 1, max: 1, apply: ([x]) => Math.abs(x!) },
    round: { min: 1, max: 1, apply: ([x]) => Math.round(x!) },
    floor: { min: 1, max: 1, apply: ([x]) => Math.floor(x!) },
    ceil: { min: 1, max: 1, apply: ([x]) => Math.ceil(x!) },
    ln: { min: 1, max: 1, apply: ([x]) => Math.log(x!) },
    log10: { min: 1, max: 1, apply: ([x]) => Math.log10(x!) },
    log2: { min: 1, max: 1, apply: ([x]) => Math.log2(x!) },
    exp: { min: 1, max: 1, apply: ([x]) => Math.exp(x!) },
    sin: { min: 1, max: 1, apply: ([x]) => Math.sin(x!) },
    cos: { min: 1, max: 1, apply: ([x]) => Math.cos(x!) },
    tan: { min: 1, max: 1, apply: ([x]) => Math.tan(x!) },
    min: { min: 1, max: 64, apply: (xs) => Math.min(...xs) },
    max: { min: 1, max: 64, apply: (xs) => Math.max(...xs) },
  } satisfies Record<string, MathFunction>),
);

export const FUNCTION_NAMES = [...FUNCTIONS.keys()];
export const CONSTANT_NAMES = [...CONSTANTS.keys()];

type Token =
  | { kind: "number"; value: number; at: number }
  | { kind: "name"; value: string; at: number }
  | { kind: "op"; value: string; at: number };

/** Thrown inside this module only, to unwind the recursion; `evaluate` turns it into a result. */
class SyntaxProblem extends Error {}

function tokenize(source: string): Token[] {
  const tokens: Token[] = [];
  const pattern = /(\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)|([A-Za-z_]\w*)|(\*\*|[-+*/%^(),])/y;
  let at = 0;
  while (at < source.length) {
    if (/\s/.test(source[at]!)) {
      at++;
      continue;
    }
    pattern.lastIndex = at;
    const match = pattern.exec(source);
    if (match === null) throw new SyntaxProblem(`unexpected character '${source[at]}' at position ${at + 1}`);
    if (match[1] !== undefined) tokens.push({ kind: "number", value: Number(match[1]), at });
    else if (match[2] !== undefined) tokens.push({ kind: "name", value: match[2].toLowerCase(), at });
    else tokens.push({ kind: "op", value: match[3]!, at });
    at = pattern.lastIndex;
  }
  return tokens;
}

class Parser {
  private index = 0;
  private depth = 0;

  constructor(
    private readonly tokens: Token[],
    private readonly maxDepth: number,
  ) {}

  parseAll(): number {
    if (this.tokens.length === 0) throw new SyntaxProblem("the expression is empty");
    const value = this.expr();
    const extra = this.tokens[this.index];
    if (extra !== undefined)
      throw new SyntaxProblem(`unexpected '${tokenText(extra)}' at position ${extra.at + 1}`);
    return value;
  }

  private peekOp(...ops: string[]): string | undefined {
    const token = this.tokens[this.index];
    return token?.kind === "op" && ops.includes(token.value) ? token.value : undefined;
  }

  private nested<T>(inner: () => T): T {
    if (++this.depth > this.maxDepth) throw new SyntaxProblem(`nested deeper than ${this.maxDepth} levels`);
    try {
      return inner();
    } finally {
      this.depth--;
    }
  }

  private expr(): number {
    let value = this.term();
    for (let op = this.peekOp("+", "-"); op !== undefined; op = this.peekOp("+", "-")) {
      this.index++;
      const right = this.term();
      value = op === "+" ? value + right : value - right;
    }
    return value;
  }

  private term(): number {
    let value = this.unary();
    for (let op = this.peekOp("*", "/", "%"); op !== undefined; op = this.peekOp("*", "/", "%")) {
      this.index++;
      const right = this.unary();
      if ((op === "/" || op === "%") && right === 0) throw new SyntaxProblem("division by zero");
      value = op === "*" ? value * right : op === "/" ? value / right : value % right;
    }
    return value;
  }

  private unary(): number {
    const sign = this.peekOp("+", "-");
    if (sign !== undefined) {
      this.index++;
      const operand = this.nested(() => this.unary());
      return sign === "-" ? -operand : operand;
    }
    return this.power();
  }

  private power(): number {
    const base = this.primary();
    if (this.peekOp("^", "**") === undefined) return base;
    this.index++;
    const exponent = this.nested(() => this.unary());
    return base ** exponent;
  }

  private primary(): number {
    const token = this.tokens[this.index];
    if (token === undefined) throw new SyntaxProblem("the expression ends too early");
    this.index++;
    if (token.kind === "number") return token.value;
    if (token.kind === "name") {
      if (this.peekOp("(") !== undefined) return this.call(token.value, token.at);
      const constant = CONSTANTS.get(token.value);
      if (constant === undefined)
        throw new SyntaxProblem(`unknown name '${token.value}' at position ${token.at + 1}`);
      return constant;
    }
    if (token.value === "(") {
      const value = this.nested(() => this.expr());
      this.expect(")");
      return value;
    }
    throw new SyntaxProblem(`unexpected '${token.value}' at position ${token.at + 1}`);
  }

  private call(name: string, at: number): number {
    const fn = FUNCTIONS.get(name);
    if (fn === undefined) throw new SyntaxProblem(`unknown function '${name}' at position ${at + 1}`);
    this.index++; // "("
    const args = this.nested(() => {
      const list = [this.expr()];
      while (this.peekOp(",") !== undefined) {
        this.index++;
        list.push(this.expr());
      }
      return list;
    });
    this.expect(")");
    if (args.length < fn.min || args.length > fn.max) {
      const wanted = fn.min === fn.max ? `${fn.min}` : `${fn.min} to ${fn.max}`;
      throw new SyntaxProblem(`${name}() takes ${wanted} argument(s), got ${args.length}`);
    }
    return fn.apply(args);
  }

  private expect(op: string): void {
    const token = this.tokens[this.index];
    if (token?.kind !== "op" || token.value !== op) {
      throw new SyntaxProblem(
        token === undefined ? `missing '${op}' at the end` : `expected '${op}' at position ${token.at + 1}`,
      );
    }
    this.index++;
  }
}

function tokenText(token: Token): string {
  return typeof token.value === "number" ? String(token.value) : token.value;
}

export function evaluate(source: string, limits: ExpressionLimits = DEFAULT_EXPRESSION_LIMITS): Evaluation {
  if (source.length > limits.maxChars)
    return { ok: false, error: `the expression is longer than ${limits.maxChars} characters` };
  try {
    const value = new Parser(tokenize(source), limits.maxDepth).parseAll();
    if (!Number.isFinite(value)) return { ok: false, error: "the result is not a finite number" };
    return { ok: true, value };
  } catch (err) {
    if (err instanceof SyntaxProblem) return { ok: false, error: err.message };
    throw err;
  }
}
