// Where node-llama-cpp cannot load, `agent-serve engine` says why and exits 1 (the package is mocked away here).
import { afterEach, describe, expect, it, vi } from "vitest";

async function runEngineCommand(): Promise<{ code: number; stderr: string }> {
  const { engineCommand } = await import("../../src/engine/command.js");
  let stderr = "";
  const write = vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
    stderr += String(chunk);
    return true;
  });
  try {
    return { code: await engineCommand.run(["--port", "0"]), stderr };
  } finally {
    write.mockRestore();
  }
}

describe("agent-serve engine without a usable node-llama-cpp", () => {
  afterEach(() => {
    vi.doUnmock("node-llama-cpp");
    vi.resetModules();
  });

  it("explains that the optional package is missing", async () => {
    vi.doMock("node-llama-cpp", () => {
      throw new Error("Cannot find package 'node-llama-cpp'");
    });
    const { code, stderr } = await runEngineCommand();
    expect(code).toBe(1);
    expect(stderr).toMatch(/^agent-serve engine: the real engine needs the optional package node-llama-cpp/);
    expect(stderr).toContain(`${process.platform}-${process.arch}`);
  });

  it("explains that there is no prebuilt binary for this platform", async () => {
    vi.doMock("node-llama-cpp", () => ({
      getLlama: () => Promise.reject(new Error("no prebuilt binary matches")),
    }));
    const { EngineUnavailableError, startRealEngine } = await import("../../src/engine/index.js");
    const failure = startRealEngine({ port: 0 });
    await expect(failure).rejects.toBeInstanceOf(EngineUnavailableError);
    await expect(failure).rejects.toThrow(
      /no usable prebuilt llama\.cpp CPU binary .*no prebuilt binary matches/,
    );
    const { code, stderr } = await runEngineCommand();
    expect(code).toBe(1);
    expect(stderr).toContain("never builds llama.cpp from source");
  });
});
