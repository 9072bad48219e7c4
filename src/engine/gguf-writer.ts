// Writes GGUF (v3) files: header, typed key-value metadata, tensor infos, then the aligned tensor data.
//
// Tensors are written one at a time, each produced by its `data` callback only when its turn comes, so a model
// of any size is written with one tensor in memory at a time.
import { ByteWriter } from "../core/byte-writer.js";
import { GatewayError } from "../core/errors.js";
import { open } from "node:fs/promises";
import { GGML_TYPE, tensorBytes, type GgmlType } from "./ggml-types.js";

const MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
const VERSION = 3;
/** llama.cpp's default; written into `general.alignment` as well, so readers never have to guess. */
export const GGUF_ALIGNMENT = 32;

/** GGUF metadata value types (the `gguf_type` enum). */
const VALUE_TYPE = {
  uint32: 4,
  int32: 5,
  float32: 6,
  bool: 7,
  string: 8,
  array: 9,
  uint64: 10,
} as const;

/** One metadata value with its GGUF type made explicit (JS numbers alone cannot say u32 vs f32). */
export type GgufValue =
  | { type: "uint32"; value: number }
  | { type: "int32"; value: number }
  | { type: "float32"; value: number }
  | { type: "uint64"; value: bigint }
  | { type: "bool"; value: boolean }
  | { type: "string"; value: string }
  | { type: "string[]"; value: readonly string[] }
  | { type: "int32[]"; value: readonly number[] | Int32Array };

export interface GgufTensor {
  name: string;
  /** ggml order: shape[0] is the contiguous (row) dimension, e.g. [n_embd, n_vocab] for token_embd. */
  shape: readonly number[];
  type: GgmlType;
  /** The tensor's bytes, already encoded in `type` (see ggml-types.ts); called once, when it is written. */
  data: () => Uint8Array;
}

export interface GgufFile {
  metadata: ReadonlyMap<string, GgufValue> | Record<string, GgufValue>;
  tensors: readonly GgufTensor[];
}

/** A GGUF string: its UTF-8 length as a u64, then the bytes. */
function writeString(out: ByteWriter, value: string): void {
  const bytes = Buffer.from(value, "utf8");
  out.u64(bytes.length);
  out.append(bytes);
}

function writeValue(out: ByteWriter, key: string, entry: GgufValue): void {
  writeString(out, key);
  switch (entry.type) {
    case "uint32":
      out.u32(VALUE_TYPE.uint32);
      out.u32(entry.value);
      return;
    case "int32":
      out.u32(VALUE_TYPE.int32);
      out.i32(entry.value);
      return;
    case "float32":
      out.u32(VALUE_TYPE.float32);
      out.f32(entry.value);
      return;
    case "uint64":
      out.u32(VALUE_TYPE.uint64);
      out.u64(entry.value);
      return;
    case "bool":
      out.u32(VALUE_TYPE.bool);
      out.u8(entry.value ? 1 : 0);
      return;
    case "string":
      out.u32(VALUE_TYPE.string);
      writeString(out, entry.value);
      return;
    case "string[]":
      out.u32(VALUE_TYPE.array);
      out.u32(VALUE_TYPE.string);
      out.u64(entry.value.length);
      for (const item of entry.value) writeString(out, item);
      return;
    case "int32[]":
      out.u32(VALUE_TYPE.array);
      out.u32(VALUE_TYPE.int32);
      out.u64(entry.value.length);
      for (const item of entry.value) out.i32(item);
      return;
  }
}

function alignUp(offset: number, alignment: number): number {
  return Math.ceil(offset / alignment) * alignment;
}

/** The header and tensor-info block, plus where each tensor's data goes relative to the data section. */
export function encodeGgufHeader(file: GgufFile): { header: Buffer; offsets: number[]; dataBytes: number } {
  const entries = file.metadata instanceof Map ? [...file.metadata] : Object.entries(file.metadata);
  const metadata = new Map<string, GgufValue>(entries);
  metadata.set("general.alignment", { type: "uint32", value: GGUF_ALIGNMENT });

  const out = new ByteWriter(1 << 16);
  out.u32(MAGIC);
  out.u32(VERSION);
  out.u64(file.tensors.length);
  out.u64(metadata.size);
  for (const [key, value] of metadata) writeValue(out, key, value);

  const offsets: number[] = [];
  let offset = 0;
  for (const tensor of file.tensors) {
    writeString(out, tensor.name);
    out.u32(tensor.shape.length);
    for (const dim of tensor.shape) out.u64(dim);
    out.u32(GGML_TYPE[tensor.type]);
    offsets.push(offset);
    out.u64(offset);
    offset = alignUp(offset + tensorBytes(tensor.type, tensor.shape), GGUF_ALIGNMENT);
  }
  out.padTo(GGUF_ALIGNMENT);
  return { header: Buffer.from(out.bytes()), offsets, dataBytes: offset };
}

/** Writes the file at `path` (replacing it); resolves to its size in bytes. */
export async function writeGguf(path: string, file: GgufFile): Promise<number> {
  const { header, offsets, dataBytes } = encodeGgufHeader(file);
  const handle = await open(path, "w");
  try {
    await handle.write(header, 0, header.length, 0);
    for (const [index, tensor] of file.tensors.entries()) {
      const data = tensor.data();
      const expected = tensorBytes(tensor.type, tensor.shape);
      if (data.byteLength !== expected) {
        throw new GatewayError(
          "internal_error",
          `tensor ${tensor.name}: ${data.byteLength} bytes of data, its shape needs ${expected}`,
        );
      }
      await handle.write(data, 0, data.byteLength, header.length + offsets[index]!);
    }
    // The last tensor's padding, so the file ends on the alignment like llama.cpp's own writer leaves it.
    await handle.truncate(header.length + dataBytes);
  } finally {
    await handle.close();
  }
  return header.length + dataBytes;
}
