// Finds a short byte string in a buffer by one of its rare bytes: the relays' searches of every engine read.
//
// Why not `Buffer#indexOf(needle)`: Node's search for a needle of several bytes (V8's string search) scans a 4 KB
// read of SSE events in 1.5-2.7 µs when the needle starts with a byte as common as `"` or `d` in JSON, and a
// stream's relay searched each read for about ten of them. `Buffer#indexOf(byte)` is a memchr of about 20 ns a
// call, so a needle found by a byte that occurs a few times per event (`{`, `]`, a line end) costs a fraction.

export class ByteNeedle {
  readonly bytes: Buffer;
  readonly length: number;
  private readonly anchor: number;
  /** Where the anchor byte sits in the needle. */
  private readonly offset: number;

  /** @param rare a character of `text` (its first occurrence) that is rare in what is searched */
  constructor(text: string, rare: string) {
    this.bytes = Buffer.from(text, "latin1");
    this.length = this.bytes.length;
    this.offset = text.indexOf(rare);
    this.anchor = this.bytes[this.offset]!;
  }

  /** Where the first occurrence that starts in chunk[from, before) starts (it may end past `before`), or -1. */
  in(chunk: Buffer, from: number, before: number): number {
    const { anchor, offset, length } = this;
    const last = chunk.length - length; // the last start a whole needle fits at
    for (let at = chunk.indexOf(anchor, from + offset); at >= 0; at = chunk.indexOf(anchor, at + 1)) {
      const start = at - offset;
      if (start >= before || start > last) return -1;
      if (this.at(chunk, start)) return start;
    }
    return -1;
  }

  /** True when the needle is at chunk[start]. */
  at(chunk: Buffer, start: number): boolean {
    const bytes = this.bytes;
    if (start < 0 || start + this.length > chunk.length) return false;
    for (let i = 0; i < this.length; i++) if (chunk[start + i] !== bytes[i]) return false;
    return true;
  }
}
