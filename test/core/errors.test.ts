// The one error family: every error the project throws on purpose is a GatewayError with a stable code.
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { SlotUnavailableError } from "../../src/admission/backend-slots.js";
import { UsageError } from "../../src/cli/command.js";
import { ConfigError } from "../../src/config/load.js";
import { GatewayError, toGatewayError } from "../../src/core/errors.js";
import { EngineUnavailableError } from "../../src/engine/llama-binding.js";
import { ClientClosedError } from "../../src/gateway/server.js";
import { AttemptFailure } from "../../src/gateway/upstream-failure.js";

/** Every .ts file under dir, recursively. */
function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? sourceFiles(join(dir, entry.name))
      : entry.name.endsWith(".ts")
        ? [join(dir, entry.name)]
        : [],
  );
}

/**
 * Error classes that are not GatewayErrors, on purpose: the simulated vLLM engine's own family (vLLM's envelope,
 * not the gateway's). Any other class extending Error must be module-private (thrown and caught inside its file).
 */
const OTHER_FAMILIES = new Set(["SimRequestError"]);
/**
 * Built-in errors a thrower may still use: RangeError for an argument outside a function's contract (a caller's
 * bug, as the standard library throws it; a CLI turns user input it reaches into a UsageError first).
 */
const BUILT_IN_CONTRACTS = new Set(["RangeError"]);

describe("the error family, read from the source", () => {
  const files = sourceFiles(fileURLToPath(new URL("../../src", import.meta.url))).map((path) => ({
    path,
    text: readFileSync(path, "utf8"),
  }));
  const parents = new Map<string, { parent: string; exported: boolean; path: string }>();
  for (const { path, text } of files) {
    for (const m of text.matchAll(/^(export )?(?:abstract )?class (\w+) extends (\w+)/gm))
      parents.set(m[2]!, { parent: m[3]!, exported: m[1] !== undefined, path });
  }
  const descendsFrom = (name: string, roots: ReadonlySet<string>): boolean => {
    for (let at: string | undefined = name; at !== undefined; at = parents.get(at)?.parent)
      if (roots.has(at)) return true;
    return false;
  };
  const GATEWAY = new Set(["GatewayError"]);
  const isGatewayError = (name: string): boolean => descendsFrom(name, GATEWAY);
  // A subclass of another family (the engines' SimRequestError) belongs to that family.
  const isOtherFamily = (name: string): boolean => descendsFrom(name, OTHER_FAMILIES);

  it("throws no plain Error (or TypeError, SyntaxError) anywhere in src", () => {
    const plain = files.flatMap(({ path, text }) =>
      [...text.matchAll(/throw new (Error|TypeError|SyntaxError)\(/g)].map(
        (m) => `${path.slice(path.lastIndexOf("/src/") + 1)}:${text.slice(0, m.index).split("\n").length}`,
      ),
    );
    expect(plain).toEqual([]);
  });

  it("every error class that leaves its module is a GatewayError", () => {
    const errorClasses = [...parents].filter(
      ([name, { parent }]) => /Error$/.test(parent) || isGatewayError(name),
    );
    expect(errorClasses.length).toBeGreaterThan(5);
    const outside = errorClasses
      .filter(([name, { exported }]) => exported && !isGatewayError(name) && !isOtherFamily(name))
      .map(([name, { path }]) => `${name} (${path})`);
    expect(outside).toEqual([]);
  });

  it("every class thrown with `throw new` is a GatewayError, a module-private class or another family", () => {
    const thrown = new Set(
      files.flatMap(({ text }) => [...text.matchAll(/throw new (\w+)\(/g)].map((m) => m[1]!)),
    );
    const stray = [...thrown].filter(
      (name) =>
        !isGatewayError(name) &&
        !isOtherFamily(name) &&
        !BUILT_IN_CONTRACTS.has(name) &&
        parents.get(name)?.exported !== false,
    );
    expect(stray).toEqual([]);
  });
});

describe("the error family", () => {
  const cases: [GatewayError, string, number][] = [
    [new ClientClosedError("gone"), "client_closed", 499],
    [new SlotUnavailableError("backend marked down"), "backend_unavailable", 503],
    [new AttemptFailure("upstream_timeout", "late", true), "upstream_timeout", 504],
    [new AttemptFailure("upstream_error", "reset", false), "upstream_error", 502],
    [new ConfigError("gateway.yaml", ["backends[0].id: required"]), "invalid_config", 400],
    [new UsageError("unknown flag --x"), "usage_error", 400],
    [new EngineUnavailableError("no binary"), "engine_unavailable", 503],
  ];

  it.each(cases)("%s has its code, status and the envelope", (error, code, status) => {
    expect(error).toBeInstanceOf(GatewayError);
    expect(error.code).toBe(code);
    expect(error.status).toBe(status);
    expect(toGatewayError(error)).toBe(error);
    expect(error.toJSON().error).toMatchObject({ code, message: error.message });
  });

  it("keeps each subclass's own facts and name", () => {
    const config = new ConfigError("f.yaml", ["a: bad", "b: bad"]);
    expect(config.name).toBe("ConfigError");
    expect(config.problems).toEqual(["a: bad", "b: bad"]);
    expect(config.message).toContain("  a: bad\n  b: bad");
    expect(new AttemptFailure("upstream_error", "x", true).healthSignal).toBe(true);
  });

  it("turns anything else into an internal error that leaks nothing", () => {
    const error = toGatewayError(new TypeError("secret detail"));
    expect(error.code).toBe("internal_error");
    expect(error.message).not.toContain("secret");
  });
});
