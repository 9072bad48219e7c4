// The generated model: deterministic bytes, LLaMA metadata llama.cpp needs, GPT-2's vocabulary, printable output.
import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dequantizeQ8_0, tensorBytes } from "../../src/engine/ggml-types.js";
import { loadGpt2Vocabulary } from "../../src/engine/gpt2-vocab.js";
import { makeModel, MODEL_SIZES } from "../../src/engine/model-maker.js";
import { readGguf } from "./gguf-reader.js";

let dir: string;
let bytes: Buffer;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "model-maker-"));
  await makeModel(join(dir, "a.gguf"), "tiny", 3);
  bytes = await readFile(join(dir, "a.gguf"));
}, 60_000);

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("makeModel", () => {
  it("writes the same bytes for the same size and seed, and other bytes for another seed", async () => {
    await makeModel(join(dir, "b.gguf"), "tiny", 3);
    await makeModel(join(dir, "c.gguf"), "tiny", 4);
    const hash = (b: Buffer): string => createHash("sha256").update(b).digest("hex");
    expect(hash(await readFile(join(dir, "b.gguf")))).toBe(hash(bytes));
    expect(hash(await readFile(join(dir, "c.gguf")))).not.toBe(hash(bytes));
  }, 60_000);

  it("describes a LLaMA model with GPT-2's BPE vocabulary plus ChatML's markers", () => {
    const { metadata, tensors } = readGguf(bytes);
    const size = MODEL_SIZES["tiny"]!;
    expect(metadata).toMatchObject({
      "general.architecture": "llama",
      "llama.embedding_length": size.embedding,
      "llama.block_count": size.layers,
      "llama.attention.head_count": size.heads,
      "tokenizer.ggml.model": "gpt2",
      "tokenizer.ggml.pre": "gpt-2",
      "tokenizer.ggml.eos_token_id": 50258,
    });
    const tokens = metadata["tokenizer.ggml.tokens"] as string[];
    expect(tokens).toHaveLength(50259);
    expect(tokens.slice(50256)).toEqual(["<|endoftext|>", "<|im_start|>", "<|im_end|>"]);
    expect(tokens[262]).toBe("Ġthe");
    expect((metadata["tokenizer.ggml.merges"] as string[])[0]).toBe("Ġ t");
    expect(tensors.map((t) => t.name)).toEqual([
      "token_embd.weight",
      ...Array.from({ length: size.layers }, (_, i) =>
        [
          "attn_norm",
          "attn_q",
          "attn_k",
          "attn_v",
          "attn_output",
          "ffn_norm",
          "ffn_gate",
          "ffn_up",
          "ffn_down",
        ].map((part) => `blk.${i}.${part}.weight`),
      ).flat(),
      "output_norm.weight",
      "output.weight",
    ]);
  });

  it("zeroes the output rows of tokens that are not whole UTF-8 characters, and only those", () => {
    const { tensors, dataStart } = readGguf(bytes);
    const output = tensors.find((t) => t.name === "output.weight")!;
    const [rowLength, rows] = output.shape as [number, number];
    const start = dataStart + output.offset;
    const weights = dequantizeQ8_0(bytes.subarray(start, start + tensorBytes("q8_0", output.shape)));
    const zero = (id: number): boolean =>
      weights.subarray(id * rowLength, (id + 1) * rowLength).every((w) => w === 0);
    const { unprintableIds, tokens } = loadGpt2Vocabulary();
    expect(rows).toBe(tokens.length);
    // Byte 0xE2 alone (GPT-2 spells it "â") starts a 3-byte character: never emitted on its own.
    expect(unprintableIds).toContain(tokens.indexOf("â"));
    expect(unprintableIds).toEqual(expect.arrayContaining([50256, 50257, 50258]));
    expect(unprintableIds.every(zero)).toBe(true);
    const printable = new Set(unprintableIds);
    expect([262, 11, 13, 1000, 30000].filter((id) => !printable.has(id)).every((id) => !zero(id))).toBe(true);
  });
});
