// Shared pieces of the affinity benchmarks: realistic session ids, engines, medians, machine description.
import { randomUUID } from "node:crypto";
import { arch, cpus } from "node:os";
import { Backend } from "../../src/backends/backend.js";

/**
 * A new flat string object with the same content, whose hash V8 has not computed yet: how the HTTP parser
 * hands over a header value (reusing one string object would let Map lookups skip hashing, compare pointers).
 */
export function freshCopy(id: string): string {
  return Buffer.from(id, "latin1").toString("latin1");
}

/**
 * A new 36-character session id as a flat 56-byte string. (crypto.randomUUID() itself returns a rope of
 * concatenated pieces, ~480 bytes until flattened: neither what a header value is nor what a table keeps.)
 */
export function newSessionId(): string {
  return freshCopy(randomUUID());
}

/** `count` engines of one tier, as the registry builds them (state getter over the health machine). */
export function engines(count: number): Backend[] {
  return Array.from(
    { length: count },
    (_, i) =>
      new Backend(
        {
          id: `small-${i}`,
          tier: "small",
          base_url: `http://10.0.0.${i}:8000`,
          model: "m",
          max_inflight: 64,
          weight: 1,
        },
        { failuresToMarkDown: 3, successesToMarkUp: 2 },
      ),
  );
}

/** The sticky table's hash key (the gateway draws a random one per process; any key costs the same). */
export const BENCH_HASH_KEY: readonly [number, number] = [0x13198a2e, 0x03707344];

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function gc(): void {
  const collect = (globalThis as { gc?: () => void }).gc;
  if (collect === undefined) throw new Error("run with node --expose-gc");
  collect();
  collect();
}

export function machine(): string {
  const cpu = cpus()[0]?.model.trim() ?? "unknown cpu";
  return `${cpus().length} cores (${cpu}), node ${process.version}, ${arch()}`;
}
