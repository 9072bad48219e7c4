// The demo agent's four tools, built once per run and shared by its agents (each call is isolated).
import { availableParallelism } from "node:os";
import { CORPUS_DIR, WORKSPACE_DIR } from "./assets.js";
import { calculatorTool } from "./tools/calculator.js";
import { readFileTool } from "./tools/read-file.js";
import { runJavascriptTool } from "./tools/run-javascript.js";
import { CorpusIndex, searchCorpusTool } from "./tools/search-corpus.js";
import type { AgentTool } from "./tools/tool.js";
import { WorkerSandbox } from "./tools/worker-sandbox.js";

/** Code runs on worker threads, one per core up to four, started here rather than on the first call. */
export async function defaultTools(): Promise<AgentTool[]> {
  const sandbox = new WorkerSandbox(Math.max(1, Math.min(4, availableParallelism())));
  const [readFile, corpus] = await Promise.all([
    readFileTool(WORKSPACE_DIR),
    CorpusIndex.fromDirectory(CORPUS_DIR),
    sandbox.warmUp(),
  ]);
  return [readFile, searchCorpusTool(corpus), calculatorTool(), runJavascriptTool(sandbox)];
}
