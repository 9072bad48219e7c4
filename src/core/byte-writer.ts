// A byte buffer that grows as it is written: the GGUF header writer's and the vLLM block-hash serialisers' sink.

export class ByteWriter {
  private buffer: Buffer;
  private length = 0;

  constructor(initialBytes = 256) {
    this.buffer = Buffer.alloc(initialBytes);
  }

  private reserve(bytes: number): void {
    if (this.length + bytes <= this.buffer.length) return;
    const next = Buffer.alloc(Math.max(this.buffer.length * 2, this.length + bytes));
    this.buffer.copy(next, 0, 0, this.length);
    this.buffer = next;
  }

  u8(value: number): void {
    this.reserve(1);
    this.buffer[this.length++] = value;
  }

  /** Little-endian from here on, unless the name says be. */
  u16(value: number): void {
    this.reserve(2);
    this.buffer.writeUInt16LE(value, this.length);
    this.length += 2;
  }

  u32(value: number): void {
    this.reserve(4);
    this.buffer.writeUInt32LE(value, this.length);
    this.length += 4;
  }

  u32be(value: number): void {
    this.reserve(4);
    this.buffer.writeUInt32BE(value, this.length);
    this.length += 4;
  }

  i32(value: number): void {
    this.reserve(4);
    this.buffer.writeInt32LE(value, this.length);
    this.length += 4;
  }

  f32(value: number): void {
    this.reserve(4);
    this.buffer.writeFloatLE(value, this.length);
    this.length += 4;
  }

  u64(value: bigint | number): void {
    this.reserve(8);
    this.buffer.writeBigUInt64LE(BigInt(value), this.length);
    this.length += 8;
  }

  /** Overwrites 8 bytes written earlier (a length known only afterwards). */
  u64At(offset: number, value: bigint | number): void {
    this.buffer.writeBigUInt64LE(BigInt(value), offset);
  }

  append(data: Uint8Array): void {
    this.reserve(data.length);
    this.buffer.set(data, this.length);
    this.length += data.length;
  }

  padTo(alignment: number): void {
    while (this.length % alignment !== 0) this.u8(0);
  }

  get size(): number {
    return this.length;
  }

  /** The bytes written so far (a view: copy it before writing more if it must be kept). */
  bytes(): Buffer {
    return this.buffer.subarray(0, this.length);
  }
}
