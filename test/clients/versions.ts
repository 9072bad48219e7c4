// The installed version of a client package (npm aliases included), for test names and the docs table.
import { readFileSync } from "node:fs";

/** `name` is the folder under node_modules: "openai", "openai-v7", "@openai/agents", ... */
export function installedVersion(name: string): string {
  const url = new URL(`../../node_modules/${name}/package.json`, import.meta.url);
  return (JSON.parse(readFileSync(url, "utf8")) as { version: string }).version;
}
