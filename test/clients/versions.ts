// The installed version of a client package (npm aliases included), for test names and the docs table.
import { existsSync, readFileSync } from "node:fs";

// Where a bare import from this folder finds a package, in Node's order: the newer majors of
// test/clients/package.json (`npm ci --prefix test/clients`) first, then the root package's node_modules.
const NODE_MODULES_FOLDERS = [
  new URL("./node_modules/", import.meta.url),
  new URL("../../node_modules/", import.meta.url),
];

/** `name` is the folder under node_modules: "openai", "openai-v7", "@openai/agents", ... */
export function installedVersion(name: string): string {
  for (const folder of NODE_MODULES_FOLDERS) {
    const url = new URL(`${name}/package.json`, folder);
    if (existsSync(url)) return (JSON.parse(readFileSync(url, "utf8")) as { version: string }).version;
  }
  throw new Error(`${name} is not installed: npm ci at the root, then npm ci --prefix test/clients`);
}
