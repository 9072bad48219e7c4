// Where a gateway's CPU goes: a `node --cpu-prof` profile's samples grouped into the request path's parts.
//
// Take the profile of a gateway under load (bench/README.md, "Seventh round" has the commands), then:
//
//   node --import tsx bench/overhead/profile-parts.ts CPU.xxx.cpuprofile [REQUESTS]
//
// Each sample's self time goes to one part, decided by its own function and by its callers (a write under
// pino is logging, any frame under the module loader is start-up); idle samples are left out. With REQUESTS
// (the requests served while profiling), each part is also given in µs per request. Under machine load the
// profiler charges time the process spent descheduled to whatever frame was running, mostly system calls
// (socket writes): compare parts within one profile, and take CPU per request from process.cpuUsage or /proc.
import { readFileSync } from "node:fs";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const profile = JSON.parse(readFileSync(process.argv[2]!, "utf8")) as Profile;
const requests = Number(process.argv[3] ?? 0);
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parentOf = new Map<number, number>();
for (const n of profile.nodes) for (const child of n.children ?? []) parentOf.set(child, n.id);

function hasCaller(id: number, test: (frame: ProfileNode["callFrame"]) => boolean): boolean {
  for (let at: number | undefined = id; at !== undefined; at = parentOf.get(at))
    if (test(byId.get(at)!.callFrame)) return true;
  return false;
}

const GATEWAY_PARTS: [RegExp, string][] = [
  [/gateway\/(sse-relay|response-metadata|usage|upstream-body)/, "relays, metadata splice, usage"],
  [/receipts\//, "receipts, fingerprint"],
  [/admission\//, "admission, slots, flow queue"],
  [/affinity\/|routing\//, "placement, routing"],
  [/metrics\//, "metrics (own code)"],
  [/gateway\//, "request path (the rest of src/gateway)"],
];

function partOf(id: number): string | undefined {
  const { functionName, url } = byId.get(id)!.callFrame;
  if (functionName === "(idle)") return undefined;
  if (hasCaller(id, (f) => /internal\/modules\/|bootstrap\/realm/.test(f.url)))
    return "start-up: module loading";
  if (
    hasCaller(id, (f) =>
      /node_modules\/(pino|sonic-boom)\/|src\/(core\/json-log-line|cli\/log-batch)\./.test(f.url),
    )
  )
    return "logging (pino, sonic-boom, their writes)";
  if (functionName === "(garbage collector)") return "garbage collection";
  if (functionName === "writev" || functionName.startsWith("write")) return "socket writes (system calls)";
  const pkg = /node_modules\/((@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1] === "undici" ? "undici (the engine client)" : `npm ${pkg[1]}`;
  if (url.startsWith("wasm://")) return "undici (the engine client)"; // its HTTP parser, llhttp
  if (url.startsWith("node:")) return "Node: http, net, streams, timers";
  const source = url.replace(/^.*\/src\//, "");
  for (const [pattern, part] of GATEWAY_PARTS) if (pattern.test(source)) return part;
  return url === "" ? "V8 and native (other)" : "other";
}

const timeOf = new Map<number, number>();
profile.samples.forEach((id, i) => timeOf.set(id, (timeOf.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
const parts = new Map<string, number>();
let busyUs = 0;
for (const [id, us] of timeOf) {
  const part = partOf(id);
  if (part === undefined) continue;
  busyUs += us;
  parts.set(part, (parts.get(part) ?? 0) + us);
}
for (const [part, us] of [...parts].sort((a, b) => b[1] - a[1])) {
  const perRequest = requests > 0 ? ` ${(us / requests).toFixed(1).padStart(7)} µs/request` : "";
  console.log(
    `${(us / 1000).toFixed(0).padStart(7)} ms ${((us / busyUs) * 100).toFixed(1).padStart(5)}%${perRequest}  ${part}`,
  );
}
console.log(`busy ${(busyUs / 1000).toFixed(0)} ms`);
