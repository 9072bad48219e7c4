// The docs name every part of the code: each folder of src/ has its row in docs/architecture.md's parts table
// and its line in README's layout, and `agent-serve study --help`'s list names every study there is.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { commands } from "../../src/cli/commands.js";

const folders = readdirSync("src").filter((name) => statSync(join("src", name)).isDirectory());

describe("the docs' layout", () => {
  it("has a row per src folder in docs/architecture.md's parts table", () => {
    const docs = readFileSync("docs/architecture.md", "utf8");
    const rows = new Set([...docs.matchAll(/^\| `src\/([a-z-]+)`/gm)].map((match) => match[1]));
    expect(folders.length).toBeGreaterThan(10);
    expect(folders.filter((folder) => !rows.has(folder))).toEqual([]);
  });

  it("has a line per src folder in README's layout", () => {
    const readme = readFileSync("README.md", "utf8");
    const lines = new Set([...readme.matchAll(/^src\/([a-z-]+) /gm)].map((match) => match[1]));
    expect(folders.filter((folder) => !lines.has(folder))).toEqual([]);
  });

  it("names every study in the study command's description", () => {
    const studies = readdirSync(join("src", "study", "studies"))
      .filter((name) => name.endsWith(".ts"))
      .map((name) => name.slice(0, -3));
    const summary = commands.find((command) => command.name === "study")?.summary ?? "";
    const listed = /run a load study \(([^)]*)\)/.exec(summary)?.[1]?.split(", ") ?? [];
    expect(studies.length).toBe(10);
    expect([...listed].sort()).toEqual([...studies].sort());
  });
});
