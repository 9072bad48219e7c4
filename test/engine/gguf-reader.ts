// Test helper: just enough of a GGUF reader to check what the writer laid out (independent of the writer's code).
import { GGUF_ALIGNMENT } from "../../src/engine/gguf-writer.js";

export interface ReadTensor {
  name: string;
  shape: number[];
  type: number;
  offset: number;
}

export function readGguf(bytes: Buffer): {
  magic: string;
  version: number;
  metadata: Record<string, unknown>;
  tensors: ReadTensor[];
  dataStart: number;
} {
  let at = 0;
  const u32 = (): number => ((at += 4), bytes.readUInt32LE(at - 4));
  const u64 = (): number => ((at += 8), Number(bytes.readBigUInt64LE(at - 8)));
  const str = (): string => {
    const length = u64();
    at += length;
    return bytes.toString("utf8", at - length, at);
  };
  const value = (type: number): unknown => {
    switch (type) {
      case 4:
        return u32();
      case 5:
        return ((at += 4), bytes.readInt32LE(at - 4));
      case 6:
        return ((at += 4), bytes.readFloatLE(at - 4));
      case 7:
        return bytes[at++] === 1;
      case 8:
        return str();
      case 9: {
        const itemType = u32();
        return Array.from({ length: u64() }, () => value(itemType));
      }
      case 10:
        return u64();
      default:
        throw new Error(`type ${type}`);
    }
  };
  const magic = bytes.toString("latin1", 0, 4);
  at = 4;
  const version = u32();
  const tensorCount = u64();
  const kvCount = u64();
  const metadata: Record<string, unknown> = {};
  for (let i = 0; i < kvCount; i++) {
    const key = str();
    metadata[key] = value(u32());
  }
  const tensors = Array.from({ length: tensorCount }, () => {
    const name = str();
    const shape = Array.from({ length: u32() }, () => u64());
    return { name, shape, type: u32(), offset: u64() };
  });
  const dataStart = Math.ceil(at / GGUF_ALIGNMENT) * GGUF_ALIGNMENT;
  return { magic, version, metadata, tensors, dataStart };
}
