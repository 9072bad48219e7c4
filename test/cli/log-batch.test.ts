// The JSON log's batches (src/cli/log-batch.ts): lines in order, one write per batch, nothing left behind by a flush.
import { describe, expect, it } from "vitest";
import { LogLineBatch, type LineSink } from "../../src/cli/log-batch.js";

function recordingSink(): LineSink & { writes: string[]; flushes: string[] } {
  const writes: string[] = [];
  const flushes: string[] = [];
  return {
    writes,
    flushes,
    write: (text) => writes.push(text) > 0,
    flush: (callback) => {
      flushes.push("flush");
      callback?.();
    },
    flushSync: () => void flushes.push("flushSync"),
  };
}

describe("LogLineBatch", () => {
  it("hands lines on in order, one write per batch, once the batch holds enough characters", () => {
    const sink = recordingSink();
    const batch = new LogLineBatch(sink, 10, 60_000);
    batch.write("aaaa\n");
    expect(sink.writes).toEqual([]);
    batch.write("bbbb\n");
    expect(sink.writes).toEqual(["aaaa\nbbbb\n"]);
    batch.write("cc\n");
    expect(sink.writes).toEqual(["aaaa\nbbbb\n"]);
    batch.flushSync();
    expect(sink.writes).toEqual(["aaaa\nbbbb\n", "cc\n"]);
    expect(sink.flushes).toEqual(["flushSync"]);
  });

  it("a flush hands on what is gathered before the destination's own flush", async () => {
    const sink = recordingSink();
    const batch = new LogLineBatch(sink, 1000, 60_000);
    batch.write("one\n");
    batch.write("two\n");
    await new Promise<void>((done) => batch.flush(() => done()));
    expect(sink.writes).toEqual(["one\ntwo\n"]);
    expect(sink.flushes).toEqual(["flush"]);
    batch.flush();
    expect(sink.writes).toHaveLength(1);
  });
});
