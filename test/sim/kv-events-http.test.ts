// The simulated engine publishes vLLM's KV events over real ZMQ sockets on loopback: frames, both encodings,
// block hashes as vLLM computes them, session ids, evictions, resets and the replay socket.
import { afterEach, describe, expect, it } from "vitest";
import { Subscriber } from "zeromq";
import { fetchReplay } from "../../src/kv-events/replay-client.js";
import { decodeKvEventBatch, decodeSeq, type BlockStored, type KvEvent } from "../../src/kv-events/wire.js";
import { renderChat } from "../../src/sim/chat-template.js";
import { startSimEngine, type SimEngineHandle, type SimEngineOptions } from "../../src/sim/index.js";
import { parseKvEventsConfig } from "../../src/sim/kv-events-config.js";
import { externalBlockHash, VllmBlockHasher } from "../../src/sim/vllm-block-hash.js";

const engines: SimEngineHandle[] = [];
const sockets: Subscriber[] = [];

afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.close();
  await Promise.all(engines.splice(0).map((engine) => engine.close()));
});

async function start(kvEvents: Partial<NonNullable<SimEngineOptions["kvEvents"]>> = {}, kvBlocks = 4096) {
  const config = parseKvEventsConfig(
    JSON.stringify({
      enable_kv_cache_events: true,
      publisher: "zmq",
      endpoint: "tcp://127.0.0.1:0",
      replay_endpoint: "tcp://127.0.0.1:0",
      topic: "kv-events",
    }),
  );
  if (config === undefined) throw new Error("events should be on");
  const engine = await startSimEngine({
    profile: "instant",
    kvCapacityBlocks: kvBlocks,
    kvEvents: { config, pythonHashSeed: "0", ...kvEvents },
  });
  engines.push(engine);
  return engine;
}

const LONG_USER = "Explain the following code in detail, line by line, please. ".repeat(20);

async function chat(engine: SimEngineHandle, content: string, sessionId?: string): Promise<void> {
  const response = await fetch(`${engine.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(sessionId ? { "x-session-id": sessionId } : {}) },
    body: JSON.stringify({ model: engine.model, messages: [{ role: "user", content }], max_tokens: 4 }),
  });
  expect(response.status).toBe(200);
  await response.json();
}

/** Every batch the engine still keeps, via its replay socket. */
async function replayedEvents(engine: SimEngineHandle): Promise<KvEvent[]> {
  const replay = engine.kvEvents?.replayEndpoint;
  if (replay === undefined) throw new Error("no replay endpoint");
  const batches = await fetchReplay(replay, 0n, 10_000);
  batches.forEach((batch, index) => expect(batch.seq).toBe(BigInt(index)));
  return batches.flatMap((batch) => decodeKvEventBatch(batch.payload).events);
}

describe("simulated engine KV events", () => {
  it("stores each full prompt block under vLLM's sha256 hash, chained, with the session id", async () => {
    const engine = await start();
    await chat(engine, LONG_USER, "session-a");
    const events = await replayedEvents(engine);
    const stored = events.filter((e): e is BlockStored => e.type === "BlockStored");
    expect(stored.length).toBeGreaterThan(0);
    const first = stored[0] as BlockStored;
    expect(first.parentBlockHash).toBeNull();
    expect(first.sessionId).toBe("session-a");
    expect(first.medium).toBe("GPU");
    expect(first.blockSize).toBe(16);
    expect(first.kvCacheSpecKind).toBe("full_attention");

    const prompt = renderChat([{ role: "user", content: LONG_USER }]);
    const hasher = new VllmBlockHasher({ algo: "sha256", pythonHashSeed: "0" });
    const expected: bigint[] = [];
    let parent: Uint8Array | undefined;
    for (let start = 0; start + 16 <= prompt.length - 1; start += 16) {
      parent = hasher.hashBlock(parent, prompt, start, 16);
      expected.push(externalBlockHash(parent));
    }
    const hashes = stored.flatMap((event) => event.blockHashes);
    expect(hashes.slice(0, expected.length)).toEqual(expected);
    expect(stored.flatMap((event) => event.tokenIds).slice(0, expected.length * 16)).toEqual(
      prompt.slice(0, expected.length * 16),
    );
    // Each later event's parent is the previous event's last block.
    for (let i = 1; i < stored.length; i++) {
      expect(stored[i]?.parentBlockHash).toBe(stored[i - 1]?.blockHashes.at(-1));
    }
  });

  it("publishes live over PUB with [topic, seq, payload] frames", async () => {
    const engine = await start();
    const sub = new Subscriber({ linger: 0 });
    sockets.push(sub);
    sub.connect(engine.kvEvents?.endpoint ?? "");
    sub.subscribe("kv-events");
    const first = sub.receive();
    // PUB drops what it sends before the subscription arrives, so keep asking until a batch comes.
    let received: Buffer[] | undefined;
    first.then((frames) => (received = frames)).catch(() => undefined);
    for (let attempt = 0; received === undefined && attempt < 200; attempt++) {
      await chat(engine, `${LONG_USER} attempt ${attempt}`);
      await new Promise((resolve) => setImmediate(resolve));
    }
    const frames = received ?? (await first);
    expect(frames).toHaveLength(3);
    expect(frames[0]?.toString()).toBe("kv-events");
    expect(decodeSeq(frames[1] as Buffer)).toBeGreaterThanOrEqual(0n);
    const batch = decodeKvEventBatch(frames[2] as Buffer);
    expect(batch.dataParallelRank).toBe(0);
    expect(batch.ts).toBeGreaterThan(1_600_000_000);
    expect(batch.events.length).toBeGreaterThan(0);
  });

  it("uses vLLM's older positional encoding when asked", async () => {
    const engine = await start({ encoding: "array" });
    await chat(engine, LONG_USER, "session-b");
    const batches = await fetchReplay(engine.kvEvents?.replayEndpoint ?? "", 0n, 10_000);
    const { decode } = await import("@msgpack/msgpack");
    const raw = decode(batches[0]?.payload ?? new Uint8Array(), { useBigInt64: true }) as unknown[];
    const event = (raw[1] as unknown[])[0] as unknown[];
    expect(event[0]).toBe("BlockStored");
    expect(Array.isArray(event[1])).toBe(true);
    // No session id in the positional encoding (vLLM added it after the switch to maps).
    const decoded = decodeKvEventBatch(batches[0]?.payload ?? new Uint8Array()).events[0] as BlockStored;
    expect(decoded.sessionId).toBeNull();
    expect(decoded.blockHashes.length).toBeGreaterThan(0);
  });

  it("removes evicted blocks and clears everything on a prefix-cache reset", async () => {
    // 64 blocks: each request's ~110-token prompt takes 7, so a few dozen distinct prompts evict.
    const engine = await start({}, 64);
    for (let i = 0; i < 20; i++) await chat(engine, `${i} ${LONG_USER}`);
    const reset = await fetch(`${engine.url}/reset_prefix_cache`, { method: "POST" });
    expect(reset.status).toBe(200);
    const events = await replayedEvents(engine);
    const removed = events.filter((e) => e.type === "BlockRemoved");
    expect(removed.length).toBeGreaterThan(0);
    const storedHashes = new Set(
      events.flatMap((e) => (e.type === "BlockStored" ? e.blockHashes : [])).map(String),
    );
    for (const event of removed) {
      if (event.type === "BlockRemoved") expect(storedHashes.has(String(event.blockHashes[0]))).toBe(true);
    }
    expect(events.at(-1)).toEqual({ type: "AllBlocksCleared" });
    expect(engine.stats().evictedBlocks).toBe(removed.length);
  });

  it("replays from a sequence number and ends with -1", async () => {
    const engine = await start();
    await chat(engine, LONG_USER);
    await chat(engine, `${LONG_USER} and another one`);
    const all = await fetchReplay(engine.kvEvents?.replayEndpoint ?? "", 0n, 10_000);
    expect(all.length).toBeGreaterThanOrEqual(2);
    const tail = await fetchReplay(engine.kvEvents?.replayEndpoint ?? "", 1n, 10_000);
    expect(tail.map((b) => b.seq)).toEqual(all.slice(1).map((b) => b.seq));
  });

  it("announces where it publishes on GET /sim/kv-events", async () => {
    const engine = await start();
    const info = (await (await fetch(`${engine.url}/sim/kv-events`)).json()) as Record<string, unknown>;
    expect(info["endpoint"]).toBe(engine.kvEvents?.endpoint);
    expect(info["endpoint"]).toMatch(/^tcp:\/\/127\.0\.0\.1:\d+$/);
    expect(info["encoding"]).toBe("map");
    expect(info["hashAlgo"]).toBe("sha256");
  });
});

describe("parseKvEventsConfig", () => {
  it("follows vLLM's defaults and refuses unknown keys", () => {
    expect(parseKvEventsConfig('{"enable_kv_cache_events":false}')).toBeUndefined();
    expect(parseKvEventsConfig('{"enable_kv_cache_events":true}')).toMatchObject({
      endpoint: "tcp://*:5557",
      bufferSteps: 10_000,
      hwm: 100_000,
      topic: "",
      replayEndpoint: undefined,
    });
    expect(() => parseKvEventsConfig('{"enable_kv_cache_events":true,"endpont":"x"}')).toThrow(/endpont/);
    expect(() => parseKvEventsConfig("{")).toThrow(/not JSON/);
  });
});
