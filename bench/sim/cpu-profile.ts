// Summarises a V8 `.cpuprofile` (from `node --cpu-prof`): the functions with the most self time, the functions
// with the most total time (self plus callees), and the source files with the most self time, as shares of all
// samples. Enough to see where an engine's time goes.
//
//   node --import tsx bench/sim/cpu-profile.ts /tmp/sim-prof/CPU.*.cpuprofile [--top 40]
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { fixed } from "./stats.js";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { top: { type: "string", default: "40" } },
});
const top = Number(values.top);

function shortUrl(url: string): string {
  const match = /\/(node_modules\/.*|src\/.*|bench\/.*)$/.exec(url);
  if (match) return match[1] as string;
  return url || "(native)";
}

function addTo(map: Map<string, number>, key: string, amount: number): void {
  map.set(key, (map.get(key) ?? 0) + amount);
}

function printTable(title: string, map: Map<string, number>, total: number): void {
  console.log(`\n${title}`);
  const rows = [...map.entries()].sort((a, b) => b[1] - a[1]).slice(0, top);
  for (const [key, count] of rows) console.log(`${fixed((count / total) * 100, 1).padStart(5)}%  ${key}`);
}

for (const file of positionals) {
  const profile = JSON.parse(readFileSync(file, "utf8")) as CpuProfile;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const hits = new Map<number, number>();
  for (const id of profile.samples) hits.set(id, (hits.get(id) ?? 0) + 1);
  const total = profile.samples.length;
  const parentOf = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);
  const keyOf = (node: ProfileNode): string =>
    `${node.callFrame.functionName || "(anonymous)"}  ${shortUrl(node.callFrame.url)}:${node.callFrame.lineNumber + 1}`;
  const byFunction = new Map<string, number>();
  const totalByFunction = new Map<string, number>();
  const byFile = new Map<string, number>();
  for (const [id, count] of hits) {
    const node = byId.get(id) as ProfileNode;
    addTo(byFunction, keyOf(node), count);
    addTo(byFile, shortUrl(node.callFrame.url), count);
    // Total time: every function on the sampled stack, once even if it recurses.
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parentOf.get(at)) {
      const key = keyOf(byId.get(at) as ProfileNode);
      if (!seen.has(key)) addTo(totalByFunction, key, count);
      seen.add(key);
    }
  }
  console.log(`${file}: ${total} samples`);
  printTable("self time by function", byFunction, total);
  printTable("total time by function", totalByFunction, total);
  printTable("self time by file", byFile, total);
}
