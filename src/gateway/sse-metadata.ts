// Splices the gateway's metadata chunk into an engine's SSE stream just before `data: [DONE]`.

const DONE = Buffer.from("data: [DONE]");

/**
 * Passes chunks through as they arrive. Only when a chunk ends with a partial `data: [DONE]` are those
 * few bytes held back until the next chunk tells whether the marker is complete.
 */
export class SseMetadataSplicer {
  private held: Buffer | undefined;
  private spliced = false;

  constructor(private readonly metadataEvent: Buffer) {}

  /** True once the metadata went out (the engine sent its `[DONE]`). */
  get sawDone(): boolean {
    return this.spliced;
  }

  /** Returns what to write to the client now (possibly nothing). */
  push(input: Buffer): Buffer[] {
    let chunk = input;
    if (this.held !== undefined) {
      chunk = Buffer.concat([this.held, input]);
      this.held = undefined;
    }
    if (this.spliced) return [chunk];
    const at = chunk.indexOf(DONE);
    if (at >= 0 && (at === 0 || chunk[at - 1] === 0x0a)) {
      this.spliced = true;
      return at === 0
        ? [this.metadataEvent, chunk]
        : [chunk.subarray(0, at), this.metadataEvent, chunk.subarray(at)];
    }
    const partial = partialMarkerSuffix(chunk);
    if (partial === 0) return [chunk];
    this.held = chunk.subarray(chunk.length - partial);
    return partial === chunk.length ? [] : [chunk.subarray(0, chunk.length - partial)];
  }

  /** The engine's stream ended: whatever was held back. */
  flush(): Buffer[] {
    const rest = this.held;
    this.held = undefined;
    return rest === undefined ? [] : [rest];
  }
}

/** Length of the longest suffix of `chunk` that is a proper prefix of `data: [DONE]` at a line start. */
function partialMarkerSuffix(chunk: Buffer): number {
  const max = Math.min(DONE.length - 1, chunk.length);
  for (let length = max; length > 0; length--) {
    const start = chunk.length - length;
    if (start > 0 && chunk[start - 1] !== 0x0a) continue;
    if (chunk.compare(DONE, 0, length, start, chunk.length) === 0) return length;
  }
  return 0;
}

/** One SSE event carrying a JSON payload. */
export function sseEvent(payload: unknown): Buffer {
  return Buffer.from(`data: ${JSON.stringify(payload)}\n\n`);
}
