// Scripted mode (`agent-serve sim --script FILE`): the file's schema, and loading it from YAML or JSON.
//
// A script drives a real coding agent through a known trajectory. It is stateless: a request's turn is the number
// of assistant turns already in its conversation, so any client, API or gateway retry replays the same turn.
import { GatewayError } from "../core/errors.js";
import { readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import { z } from "zod";

const toolArguments = z.record(z.string(), z.unknown());

/** One way to make a call: a tool name and its arguments (as that tool's schema wants them). */
const alternative = z.strictObject({
  tool: z.string().min(1),
  arguments: toolArguments.default({}),
});

/**
 * A call: one tool, or alternatives tried in order (the first the request offers wins), either as
 * `{tool: [names...], arguments}` with shared arguments or as a list of `{tool, arguments}`.
 */
const call = z.union([
  z.strictObject({
    tool: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]),
    arguments: toolArguments.default({}),
  }),
  z.array(alternative).min(1),
]);

const turn = z
  .strictObject({
    /** Text the assistant writes (before its calls, if it makes any). */
    text: z.string().optional(),
    /** One call this turn. */
    call: call.optional(),
    /** Several calls in one turn (parallel tool calls). */
    calls: z.array(call).min(1).optional(),
  })
  .refine((t) => t.text !== undefined || t.call !== undefined || t.calls !== undefined, {
    message: "a turn needs text, call or calls",
  })
  .refine((t) => t.call === undefined || t.calls === undefined, {
    message: "a turn has call or calls, not both",
  });

const matcher = z.union([
  z.string().min(1),
  z
    .strictObject({
      contains: z.string().min(1).optional(),
      regex: z.string().min(1).optional(),
      /** Where to look: the system prompt, the first user message, or either (default). */
      in: z.enum(["system", "user", "either"]).default("either"),
    })
    .refine((m) => (m.contains === undefined) !== (m.regex === undefined), {
      message: "a match needs exactly one of contains or regex",
    }),
]);

const conversation = z.strictObject({
  name: z.string().optional(),
  match: matcher.optional(),
  turns: z.array(turn).min(1),
});

export const simScriptSchema = z.strictObject({
  conversations: z.array(conversation).min(1),
  /** The reply to requests no conversation matches (titles, summaries) and to turns past a script's end. */
  default: turn.optional(),
});

export type SimScriptFile = z.infer<typeof simScriptSchema>;
export type ScriptTurn = z.infer<typeof turn>;
export type ScriptCall = z.infer<typeof call>;

/** A conversation ready to match: its pattern compiled. */
export interface CompiledConversation {
  name: string;
  /** Undefined: matches every conversation. */
  pattern: RegExp | undefined;
  where: "system" | "user" | "either";
  turns: ScriptTurn[];
}

export interface SimScript {
  conversations: CompiledConversation[];
  defaultTurn: ScriptTurn | undefined;
}

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** Validates a parsed script and compiles its patterns; throws an Error naming the bad field. */
export function compileScript(value: unknown): SimScript {
  const parsed = simScriptSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const path = issue?.path.join(".") ?? "";
    throw new GatewayError(
      "invalid_config",
      `invalid script${path ? ` at ${path}` : ""}: ${issue?.message ?? "malformed"}`,
    );
  }
  const conversations = parsed.data.conversations.map((entry, index): CompiledConversation => {
    const name = entry.name ?? `conversation ${index + 1}`;
    const match = entry.match;
    if (match === undefined) return { name, pattern: undefined, where: "either", turns: entry.turns };
    if (typeof match === "string") {
      return { name, pattern: new RegExp(escapeRegex(match)), where: "either", turns: entry.turns };
    }
    let pattern: RegExp;
    try {
      pattern = new RegExp(match.regex ?? escapeRegex(match.contains ?? ""));
    } catch (err) {
      throw new GatewayError(
        "invalid_config",
        `invalid script at conversations.${index}.match.regex: ${(err as Error).message}`,
      );
    }
    return { name, pattern, where: match.in, turns: entry.turns };
  });
  return { conversations, defaultTurn: parsed.data.default };
}

/** Reads a script file (YAML, of which JSON is a subset). */
export function loadScript(file: string): SimScript {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new GatewayError("invalid_config", `cannot read script ${file}: ${(err as Error).message}`);
  }
  let value: unknown;
  try {
    value = parseYaml(text) as unknown;
  } catch (err) {
    throw new GatewayError(
      "invalid_config",
      `script ${file} is not valid YAML or JSON: ${(err as Error).message}`,
    );
  }
  return compileScript(value);
}
