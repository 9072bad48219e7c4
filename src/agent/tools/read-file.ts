// The read_file tool: one text file of the bundled workspace, never a path outside it.
import { readdir, readFile, realpath, stat } from "node:fs/promises";
import { isAbsolute, join, relative, resolve, sep } from "node:path";
import { capOutput, failure, stringArg, type AgentTool, type ToolLimits } from "./tool.js";

export const READ_FILE_LIMITS: ToolLimits = { timeoutMs: 1000, memoryBytes: 64 * 1024, outputChars: 6000 };

/** Every file under `root`, as forward-slash paths relative to it, sorted. */
export async function listWorkspace(root: string): Promise<string[]> {
  const entries = await readdir(root, { recursive: true, withFileTypes: true });
  return entries
    .filter((entry) => entry.isFile())
    .map((entry) => relative(root, join(entry.parentPath, entry.name)).split(sep).join("/"))
    .sort();
}

function inside(root: string, candidate: string): boolean {
  const rel = relative(root, candidate);
  return rel !== "" && !rel.startsWith("..") && !isAbsolute(rel);
}

/**
 * Resolves a model-given path to a file under `root`, or says why not. Checked twice: the path as written
 * (`../x`, `/etc/passwd`) and after symlinks are followed, so a link in the workspace cannot lead out.
 */
export async function resolveWorkspacePath(
  root: string,
  path: string,
): Promise<string | { refused: string }> {
  if (path.includes("\0")) return { refused: "the path contains a NUL byte" };
  if (isAbsolute(path)) return { refused: "absolute paths are refused: give a path inside the workspace" };
  const realRoot = await realpath(root);
  const candidate = resolve(realRoot, path);
  if (!inside(realRoot, candidate)) return { refused: `'${path}' is outside the workspace` };
  let real: string;
  try {
    real = await realpath(candidate);
  } catch {
    return { refused: `no such file '${path}'` };
  }
  if (!inside(realRoot, real)) return { refused: `'${path}' leads outside the workspace` };
  return real;
}

export async function readFileTool(root: string, limits: ToolLimits = READ_FILE_LIMITS): Promise<AgentTool> {
  const files = await listWorkspace(root);
  return {
    name: "read_file",
    description:
      "Read one text file of the project workspace. Paths are relative to the workspace root; " +
      `files larger than ${limits.memoryBytes} bytes are refused. The files: ${files.join(", ")}.`,
    parameters: {
      type: "object",
      properties: { path: { type: "string", enum: files, description: "path relative to the workspace" } },
      required: ["path"],
      additionalProperties: false,
    },
    limits,
    async run(args, signal) {
      const path = stringArg(args, "path");
      if (typeof path !== "string") return path;
      const resolved = await resolveWorkspacePath(root, path);
      if (typeof resolved !== "string") return failure(resolved.refused);
      const info = await stat(resolved);
      if (!info.isFile()) return failure(`'${path}' is not a file`);
      if (info.size > limits.memoryBytes)
        return failure(
          `'${path}' has ${info.size} bytes, more than the ${limits.memoryBytes} this tool reads`,
        );
      const text = await readFile(resolved, { encoding: "utf8", signal });
      return { ok: true, output: capOutput(text, limits.outputChars) };
    },
  };
}
