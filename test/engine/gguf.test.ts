// The GGUF writer and the ggml encodings: read back with an independent minimal reader.
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  dequantizeQ8_0,
  encodeF16,
  encodeF32,
  fromFloat16Bits,
  quantizeQ8_0,
  tensorBytes,
  toFloat16Bits,
} from "../../src/engine/ggml-types.js";
import { GGUF_ALIGNMENT, writeGguf } from "../../src/engine/gguf-writer.js";
import { readGguf } from "./gguf-reader.js";

describe("ggml encodings", () => {
  it("round-trips f16 exactly for representable values and rounds to nearest even", () => {
    for (const v of [0, 1, -2, 0.5, 65504, 2 ** -24, -(2 ** -14), 0.333251953125]) {
      expect(fromFloat16Bits(toFloat16Bits(v))).toBe(v);
    }
    expect(toFloat16Bits(1 + 2 ** -11)).toBe(0x3c00); // halfway between 1 and its successor: even wins
    expect(toFloat16Bits(1e6)).toBe(0x7c00);
    expect(Number.isNaN(fromFloat16Bits(toFloat16Bits(NaN)))).toBe(true);
    expect(fromFloat16Bits(toFloat16Bits(2 ** -30))).toBe(0);
  });

  it("quantizes q8_0 blocks within half a step of the block's scale", () => {
    const values = Float32Array.from({ length: 96 }, (_, i) => Math.sin(i) * (i < 32 ? 0.01 : 3));
    values.fill(0, 64); // an all-zero block has scale 0
    const bytes = quantizeQ8_0(values);
    expect(bytes.byteLength).toBe(tensorBytes("q8_0", [32, 3]));
    const back = dequantizeQ8_0(bytes);
    for (let block = 0; block < 3; block++) {
      const slice = values.subarray(block * 32, block * 32 + 32);
      const step = Math.max(...slice.map(Math.abs)) / 127;
      for (let i = 0; i < 32; i++) {
        expect(Math.abs(back[block * 32 + i]! - slice[i]!)).toBeLessThanOrEqual(step * 0.51 + 1e-6);
      }
    }
    expect(() => tensorBytes("q8_0", [48, 2])).toThrow(/multiple of 32/);
  });
});

describe("writeGguf", () => {
  let dir: string | undefined;
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("writes the header, typed metadata, tensor infos and aligned data", async () => {
    dir = await mkdtemp(join(tmpdir(), "gguf-"));
    const path = join(dir, "t.gguf");
    const norm = Float32Array.from([1, 2, 3]);
    const matrix = Float32Array.from({ length: 64 }, (_, i) => i / 64 - 0.5);
    const half = Float32Array.from([0.5, -1.25]);
    const size = await writeGguf(path, {
      metadata: {
        "general.architecture": { type: "string", value: "llama" },
        "llama.block_count": { type: "uint32", value: 8 },
        "test.eps": { type: "float32", value: 0.5 },
        "test.flag": { type: "bool", value: true },
        "test.big": { type: "uint64", value: 2n ** 40n },
        "test.words": { type: "string[]", value: ["a", "Ġb", "<|im_end|>"] },
        "test.ints": { type: "int32[]", value: Int32Array.from([1, -3]) },
      },
      tensors: [
        { name: "norm", shape: [3], type: "f32", data: () => encodeF32(norm) },
        { name: "matrix", shape: [32, 2], type: "q8_0", data: () => quantizeQ8_0(matrix) },
        { name: "half", shape: [2], type: "f16", data: () => encodeF16(half) },
      ],
    });
    const bytes = await readFile(path);
    expect(bytes.length).toBe(size);
    const file = readGguf(bytes);
    expect(file).toMatchObject({ magic: "GGUF", version: 3 });
    expect(file.metadata).toEqual({
      "general.architecture": "llama",
      "llama.block_count": 8,
      "test.eps": 0.5,
      "test.flag": true,
      "test.big": 2 ** 40,
      "test.words": ["a", "Ġb", "<|im_end|>"],
      "test.ints": [1, -3],
      "general.alignment": GGUF_ALIGNMENT,
    });
    expect(file.tensors).toEqual([
      { name: "norm", shape: [3], type: 0, offset: 0 },
      { name: "matrix", shape: [32, 2], type: 8, offset: 32 },
      { name: "half", shape: [2], type: 1, offset: 32 + 96 },
    ]);
    const at = (offset: number): number => file.dataStart + offset;
    expect(new Float32Array(bytes.buffer.slice(at(0), at(12)))).toEqual(norm);
    expect(dequantizeQ8_0(bytes.subarray(at(32), at(32 + 68)))).toEqual(dequantizeQ8_0(quantizeQ8_0(matrix)));
    expect(fromFloat16Bits(bytes.readUInt16LE(at(128) + 2))).toBe(-1.25);
    expect(size % GGUF_ALIGNMENT).toBe(0);
  });

  it("refuses tensor data that does not match the shape", async () => {
    dir = await mkdtemp(join(tmpdir(), "gguf-"));
    await expect(
      writeGguf(join(dir, "bad.gguf"), {
        metadata: {},
        tensors: [{ name: "x", shape: [4], type: "f32", data: () => new Uint8Array(8) }],
      }),
    ).rejects.toThrow(/x: 8 bytes of data, its shape needs 16/);
  });
});
