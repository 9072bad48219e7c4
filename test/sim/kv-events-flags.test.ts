// The sim command's KV-event flags: vLLM's --kv-events-config JSON, the encoding, the hash algorithm, PYTHONHASHSEED.
import { describe, expect, it } from "vitest";
import { UsageError } from "../../src/cli/command.js";
import { parseSimArgs } from "../../src/sim/command.js";

const ON = '{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5557","topic":"kv-events"}';

describe("agent-serve sim KV-event flags", () => {
  it("takes vLLM's JSON, the encoding, the algorithm, and PYTHONHASHSEED from the environment", () => {
    const options = parseSimArgs(
      [
        "--kv-events-config",
        ON,
        "--kv-events-encoding",
        "array",
        "--prefix-caching-hash-algo",
        "sha256_cbor",
      ],
      { PYTHONHASHSEED: "42" },
    );
    expect(options.engine.kvEvents).toMatchObject({
      config: {
        endpoint: "tcp://*:5557",
        topic: "kv-events",
        bufferSteps: 10_000,
        replayEndpoint: undefined,
      },
      encoding: "array",
      hashAlgo: "sha256_cbor",
      pythonHashSeed: "42",
    });
  });

  it("leaves events off without the flag or with enable_kv_cache_events false", () => {
    expect(parseSimArgs([], {}).engine.kvEvents).toBeUndefined();
    expect(
      parseSimArgs(["--kv-events-config", '{"enable_kv_cache_events":false}'], {}).engine.kvEvents,
    ).toBeUndefined();
  });

  it("refuses bad JSON, unknown keys, unknown encodings and the xxhash algorithms, saying why", () => {
    expect(() => parseSimArgs(["--kv-events-config", "{oops"], {})).toThrow(UsageError);
    expect(() =>
      parseSimArgs(["--kv-events-config", '{"enable_kv_cache_events":true,"hwm":-1}'], {}),
    ).toThrow(/hwm/);
    expect(() => parseSimArgs(["--kv-events-config", ON, "--kv-events-encoding", "json"], {})).toThrow(
      /map, array/,
    );
    expect(() => parseSimArgs(["--prefix-caching-hash-algo", "xxhash"], {})).toThrow(/xxh3-128/);
    expect(() => parseSimArgs(["--prefix-caching-hash-algo", "md5"], {})).toThrow(/sha256, sha256_cbor/);
  });
});
