// Reads, validates and resolves the gateway config: YAML file + environment overrides -> GatewayConfig.
import { readFile } from "node:fs/promises";
import { parse as parseYaml, YAMLParseError } from "yaml";
import type { z } from "zod";
import { GatewayError } from "../core/errors.js";
import { closestKey, knownKeysAt } from "./did-you-mean.js";
import { gatewayConfigSchema, type GatewayConfig } from "./schema.js";

/** A config that cannot be used; `problems` are one line each, every one naming the field's path. */
export class ConfigError extends GatewayError {
  override name = "ConfigError";
  constructor(
    readonly source: string,
    readonly problems: readonly string[],
  ) {
    super("invalid_config", `invalid config ${source}:\n${problems.map((p) => `  ${p}`).join("\n")}`);
  }
}

/** `["backends", 2, "base_url"]` -> `backends[2].base_url`. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const part of path) {
    if (typeof part === "number") out += `[${part}]`;
    else out += out === "" ? String(part) : `.${String(part)}`;
  }
  return out === "" ? "(top level)" : out;
}

function describeIssue(issue: z.core.$ZodIssue): string {
  if (issue.code === "unrecognized_keys") {
    const where = issue.path.length > 0 ? `${formatPath(issue.path)}.` : "";
    const known = knownKeysAt(gatewayConfigSchema, issue.path);
    return issue.keys
      .map((key) => {
        const near = closestKey(key, known);
        return `${where}${key}: unknown key${near === undefined ? "" : ` (did you mean '${near}'?)`}`;
      })
      .join("\n");
  }
  return `${formatPath(issue.path)}: ${issue.message}`;
}

export interface EnvOverrides {
  AGENT_SERVE_PORT?: string | undefined;
  AGENT_SERVE_ADMIN_TOKEN?: string | undefined;
  /** Client key hashes added to server.api_keys: `SHA256[:AGENT_ID]`, separated by commas or white space. */
  AGENT_SERVE_API_KEYS?: string | undefined;
}

/** Validates an already-parsed document (YAML or JSON) and applies environment overrides. */
export function parseConfig(document: unknown, source: string, env: EnvOverrides = {}): GatewayConfig {
  const merged = applyEnv(document, source, env);
  const result = gatewayConfigSchema.safeParse(merged);
  if (!result.success) {
    const problems = result.error.issues.flatMap((issue) => describeIssue(issue).split("\n"));
    throw new ConfigError(source, problems);
  }
  return result.data;
}

function applyEnv(document: unknown, source: string, env: EnvOverrides): unknown {
  if (document === null || typeof document !== "object" || Array.isArray(document)) return document;
  const doc = document as Record<string, unknown>;
  const rawServer = doc["server"];
  if (
    rawServer !== undefined &&
    (rawServer === null || typeof rawServer !== "object" || Array.isArray(rawServer))
  )
    return document; // the schema reports the bad `server` value itself
  const server: Record<string, unknown> = { ...(rawServer as Record<string, unknown> | undefined) };
  if (env.AGENT_SERVE_PORT !== undefined && env.AGENT_SERVE_PORT !== "") {
    const port = Number(env.AGENT_SERVE_PORT);
    if (!/^\d+$/.test(env.AGENT_SERVE_PORT) || port > 65535) {
      throw new ConfigError(source, [
        `AGENT_SERVE_PORT: must be a TCP port (0-65535), got '${env.AGENT_SERVE_PORT}'`,
      ]);
    }
    server["port"] = port;
  }
  if (env.AGENT_SERVE_ADMIN_TOKEN !== undefined && env.AGENT_SERVE_ADMIN_TOKEN !== "") {
    server["admin_token"] = env.AGENT_SERVE_ADMIN_TOKEN;
  }
  const envKeys = (env.AGENT_SERVE_API_KEYS ?? "").split(/[\s,]+/).filter((entry) => entry !== "");
  if (envKeys.length > 0) {
    const fileKeys = Array.isArray(server["api_keys"]) ? (server["api_keys"] as unknown[]) : [];
    // A malformed entry is reported by the schema, as server.api_keys[i].sha256 (the key's hash, not a secret).
    server["api_keys"] = [
      ...fileKeys,
      ...envKeys.map((entry) => {
        const [sha256, agentId] = entry.split(":", 2);
        return agentId === undefined || agentId === "" ? { sha256 } : { sha256, agent_id: agentId };
      }),
    ];
  }
  return { ...doc, server };
}

/**
 * The dotted path of the key on `line` (1-based) of block-style YAML, from the keys above it with less
 * indentation: what a syntax error's line belongs to. undefined when no key is on or above it.
 */
export function keyPathAtLine(text: string, line: number): string | undefined {
  const lines = text.split("\n");
  const keys: string[] = [];
  let indent = Infinity;
  for (let i = Math.min(line, lines.length) - 1; i >= 0; i--) {
    const match = /^(\s*)(?:-\s+)?([^\s:#][^:#]*?)\s*:(?:\s|$)/.exec(lines[i]!);
    if (match === null || match[1]!.length >= indent) continue;
    keys.unshift(match[2]!);
    indent = match[1]!.length;
    if (indent === 0) break;
  }
  return keys.length === 0 ? undefined : keys.join(".");
}

/** Parses YAML text; syntax errors become a ConfigError naming the key, the line and the column. */
export function parseConfigText(text: string, source: string, env: EnvOverrides = {}): GatewayConfig {
  let document: unknown;
  try {
    document = parseYaml(text, { prettyErrors: true, uniqueKeys: true });
  } catch (err) {
    if (err instanceof YAMLParseError) {
      const [line, col] = [err.linePos?.[0].line, err.linePos?.[0].col];
      const key = line === undefined ? undefined : keyPathAtLine(text, line);
      // The parser's message without its own position and excerpt: "Map keys must be unique".
      const what = err.message.split("\n")[0]!.replace(/ at line \d+, column \d+:?$/, "");
      throw new ConfigError(source, [
        `${key ?? "(top level)"}: YAML syntax error at line ${line ?? "?"}, column ${col ?? "?"}: ${what} (${err.code})`,
      ]);
    }
    throw err;
  }
  if (document === null || document === undefined)
    throw new ConfigError(source, ["(top level): the file is empty"]);
  return parseConfig(document, source, env);
}

export async function loadConfigFile(path: string, env: EnvOverrides = process.env): Promise<GatewayConfig> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    const reason = err instanceof Error && "code" in err ? String(err.code) : String(err);
    throw new ConfigError(path, [`cannot read the file (${reason})`]);
  }
  return parseConfigText(text, path, env);
}
