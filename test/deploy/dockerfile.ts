// Test fixture: a Dockerfile read into stages and instructions, a .dockerignore matcher, and the packages a compiled entry point can import.
import { existsSync, readFileSync } from "node:fs";
import { isBuiltin } from "node:module";
import { dirname, relative, resolve } from "node:path";
import ts from "typescript";

export interface Instruction {
  keyword: string;
  /** The text after the keyword, continuation lines joined. */
  args: string;
  line: number;
}

export interface Stage {
  image: string;
  name: string | undefined;
  instructions: Instruction[];
}

/** Stages in order; a line ending in `\` continues on the next, comment lines are dropped (as Docker does). */
export function parseDockerfile(text: string): Stage[] {
  const stages: Stage[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const start = i + 1;
    let line = lines[i]!.trim();
    if (line === "" || line.startsWith("#")) continue;
    while (line.endsWith("\\") && i + 1 < lines.length) {
      i++;
      const next = lines[i]!.trim();
      line = line.slice(0, -1) + (next.startsWith("#") ? "" : ` ${next}`);
    }
    const match = /^(\S+)\s*(.*)$/.exec(line)!;
    const keyword = match[1]!.toUpperCase();
    const args = match[2]!.replace(/\s+/g, " ").trim();
    if (keyword === "FROM") {
      const from = /^(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args);
      if (from === null) throw new Error(`line ${start}: cannot read FROM ${args}`);
      stages.push({ image: from[1]!, name: from[2], instructions: [] });
      continue;
    }
    const stage = stages.at(-1);
    if (stage === undefined) throw new Error(`line ${start}: ${keyword} before any FROM`);
    stage.instructions.push({ keyword, args, line: start });
  }
  return stages;
}

/** An instruction's exec form (`["a", "b"]`) as a list, or undefined for the shell form. */
export function execForm(args: string): string[] | undefined {
  if (!args.startsWith("[")) return undefined;
  const parsed: unknown = JSON.parse(args);
  if (!Array.isArray(parsed) || !parsed.every((p) => typeof p === "string"))
    throw new Error(`not a list of strings: ${args}`);
  return parsed;
}

/**
 * Whether `.dockerignore` patterns leave `path` (relative to the context) out of the build context: a
 * pattern matches from the context's root, `*` within one path segment, `**` across segments, and a
 * matched directory excludes everything under it. Exceptions (`!pattern`) are not modelled: refused.
 */
export function isIgnored(patterns: readonly string[], path: string): boolean {
  const parts = path.split("/");
  return patterns.some((pattern) => {
    if (pattern.startsWith("!")) throw new Error(`.dockerignore exception ${pattern} is not modelled`);
    const source = pattern
      .replace(/^\/+|\/+$/g, "")
      .split("/")
      .map((seg) => (seg === "**" ? ".*" : seg.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/\*/g, "[^/]*")))
      .join("/");
    const regex = new RegExp(`^${source}$`);
    return parts.some((_, i) => regex.test(parts.slice(0, i + 1).join("/")));
  });
}

export function readDockerignore(path: string): string[] {
  return readFileSync(path, "utf8")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
}

export interface ImportGraph {
  /** Files reached from the entry point, relative to `root`. */
  files: string[];
  /** Package names imported by a bare specifier (node builtins excluded), with a file that imports each. */
  packages: Map<string, string>;
  /** Files with an `import(...)` whose specifier is not a string literal: what they load cannot be seen here. */
  opaqueDynamicImports: string[];
}

function packageName(specifier: string): string {
  const parts = specifier.split("/");
  return specifier.startsWith("@") ? `${parts[0]}/${parts[1]}` : parts[0]!;
}

/** Follows every static import, re-export and literal dynamic import of compiled JavaScript from `entry`. */
export function importGraph(entry: string, root = dirname(entry)): ImportGraph {
  const seen = new Set<string>();
  const packages = new Map<string, string>();
  const opaque: string[] = [];
  const queue = [resolve(entry)];
  while (queue.length > 0) {
    const file = queue.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    const text = readFileSync(file, "utf8");
    const name = relative(root, file);
    if (/\bimport\s*\(\s*[^\s"'`]/.test(text)) opaque.push(name);
    for (const { fileName } of ts.preProcessFile(text, true, true).importedFiles) {
      if (fileName.startsWith(".") || fileName.startsWith("/")) {
        const target = resolve(dirname(file), fileName);
        if (!existsSync(target)) throw new Error(`${name} imports ${fileName}, which does not exist`);
        queue.push(target);
      } else if (!isBuiltin(fileName)) {
        const pkg = packageName(fileName);
        if (!packages.has(pkg)) packages.set(pkg, name);
      }
    }
  }
  return {
    files: [...seen].map((f) => relative(root, f)).sort(),
    packages,
    opaqueDynamicImports: opaque.sort(),
  };
}
