// The demo agent's four tools, built once per run and shared by its agents (each call is isolated).
import type { Clock } from "../core/clock.js";
import { CORPUS_DIR, WORKSPACE_DIR } from "./assets.js";
import { calculatorTool } from "./tools/calculator.js";
import { readFileTool } from "./tools/read-file.js";
import { JsSandbox, runJavascriptTool } from "./tools/run-javascript.js";
import { CorpusIndex, searchCorpusTool } from "./tools/search-corpus.js";
import type { AgentTool } from "./tools/tool.js";

export async function defaultTools(clock?: Clock): Promise<AgentTool[]> {
  const [readFile, corpus, sandbox] = await Promise.all([
    readFileTool(WORKSPACE_DIR),
    CorpusIndex.fromDirectory(CORPUS_DIR),
    JsSandbox.load(clock),
  ]);
  return [readFile, searchCorpusTool(corpus), calculatorTool(), runJavascriptTool(sandbox)];
}
