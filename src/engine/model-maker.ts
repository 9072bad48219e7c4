// Makes a LLaMA-architecture GGUF model with seeded random weights and GPT-2's real BPE vocabulary.
//
// No registry package ships LLM weights, so the real-engine check runs on a generated model: its output text is
// meaningless, but llama.cpp's compute and its prefix KV cache are real. The same size and seed always give the
// same bytes. Lessons from trying it: the output layer has weights of its own (tied to the embeddings, greedy
// decoding repeated one token), and the output rows of tokens that are not whole UTF-8 characters (and of the
// control tokens) are zero, so greedy decoding only ever emits printable text.
import { GatewayError } from "../core/errors.js";
import { mkdir, rename, rm, stat } from "node:fs/promises";
import { homedir, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { SeededRandom } from "../core/random.js";
import { encodeF32, FILE_TYPE_MOSTLY_Q8_0, quantizeQ8_0 } from "./ggml-types.js";
import { writeGguf, type GgufTensor, type GgufValue } from "./gguf-writer.js";
import { CHATML_TOKENS, loadGpt2Vocabulary } from "./gpt2-vocab.js";

export interface ModelSize {
  embedding: number;
  layers: number;
  heads: number;
  kvHeads: number;
  feedForward: number;
  /** `llama.context_length`: the longest context the model claims to handle. */
  trainContext: number;
}

/**
 * `small` (about 80M parameters, 85 MB) is sized so that prefill dominates a cold turn the way it does on a GPU
 * serving a 7B model: a 3 KB prompt takes a few hundred ms cold and tens of ms warm on two CPU cores. `tiny` is for
 * quick protocol checks.
 */
export const MODEL_SIZES: Record<string, ModelSize> = {
  tiny: { embedding: 128, layers: 2, heads: 4, kvHeads: 4, feedForward: 352, trainContext: 8192 },
  small: { embedding: 512, layers: 8, heads: 8, kvHeads: 8, feedForward: 1408, trainContext: 8192 },
};
export const MODEL_SIZE_NAMES = Object.keys(MODEL_SIZES);
export const DEFAULT_MODEL_SIZE = "small";
export const DEFAULT_MODEL_SEED = 0;
/** Bumped whenever the bytes for a given size and seed change, so cached files are never stale. */
const GENERATOR_VERSION = 1;

const WEIGHT_STD = 0.02;
const RMS_NORM_EPSILON = 1e-5;
const ROPE_FREQ_BASE = 10_000;
const CHATML_TEMPLATE =
  "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}" +
  "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/** Deterministic per-tensor stream: the same (seed, name) always gives the same weights, in any order. */
function tensorRandom(seed: number, name: string): SeededRandom {
  let h = (0x811c9dc5 ^ seed) >>> 0;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  return new SeededRandom(h >>> 0);
}

/** Uniform weights with standard deviation `std` (a uniform on [-a, a] has std a / sqrt(3)). */
function randomWeights(seed: number, name: string, count: number, std: number): Float32Array {
  const random = tensorRandom(seed, name);
  const a = std * Math.sqrt(3);
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) out[i] = (random.next() * 2 - 1) * a;
  return out;
}

export interface MadeModel {
  path: string;
  bytes: number;
  parameters: number;
  seconds: number;
}

/** Writes the model to `path` (through a temporary file and a rename, so readers never see half a file). */
export async function makeModel(
  path: string,
  sizeName: string = DEFAULT_MODEL_SIZE,
  seed: number = DEFAULT_MODEL_SEED,
): Promise<MadeModel> {
  const size = MODEL_SIZES[sizeName];
  if (size === undefined)
    throw new GatewayError("usage_error", `unknown model size '${sizeName}' (known: ${MODEL_SIZE_NAMES})`);
  const started = performance.now();
  const vocab = loadGpt2Vocabulary();
  const nVocab = vocab.tokens.length;
  const nEmbd = size.embedding;
  const headDim = nEmbd / size.heads;
  const nKv = headDim * size.kvHeads;
  const imEnd = vocab.tokens.indexOf(CHATML_TOKENS[1]);

  const metadata: Record<string, GgufValue> = {
    "general.architecture": { type: "string", value: "llama" },
    "general.name": { type: "string", value: `agent-serve random llama ${sizeName} (seed ${seed})` },
    "general.file_type": { type: "uint32", value: FILE_TYPE_MOSTLY_Q8_0 },
    "general.quantization_version": { type: "uint32", value: 2 },
    "llama.context_length": { type: "uint32", value: size.trainContext },
    "llama.embedding_length": { type: "uint32", value: nEmbd },
    "llama.block_count": { type: "uint32", value: size.layers },
    "llama.feed_forward_length": { type: "uint32", value: size.feedForward },
    "llama.attention.head_count": { type: "uint32", value: size.heads },
    "llama.attention.head_count_kv": { type: "uint32", value: size.kvHeads },
    "llama.attention.layer_norm_rms_epsilon": { type: "float32", value: RMS_NORM_EPSILON },
    "llama.rope.dimension_count": { type: "uint32", value: headDim },
    "llama.rope.freq_base": { type: "float32", value: ROPE_FREQ_BASE },
    "llama.vocab_size": { type: "uint32", value: nVocab },
    "tokenizer.ggml.model": { type: "string", value: "gpt2" },
    "tokenizer.ggml.pre": { type: "string", value: "gpt-2" },
    "tokenizer.ggml.tokens": { type: "string[]", value: vocab.tokens },
    "tokenizer.ggml.token_type": { type: "int32[]", value: vocab.tokenTypes },
    "tokenizer.ggml.merges": { type: "string[]", value: vocab.merges },
    "tokenizer.ggml.bos_token_id": { type: "uint32", value: vocab.endOfTextId },
    "tokenizer.ggml.eos_token_id": { type: "uint32", value: imEnd },
    "tokenizer.ggml.add_bos_token": { type: "bool", value: false },
    "tokenizer.chat_template": { type: "string", value: CHATML_TEMPLATE },
  };

  let parameters = 0;
  const matrix = (name: string, rowLength: number, rows: number, prepare?: (w: Float32Array) => void) => {
    parameters += rowLength * rows;
    return {
      name,
      shape: [rowLength, rows],
      type: "q8_0",
      data: () => {
        const weights = randomWeights(seed, name, rowLength * rows, WEIGHT_STD);
        prepare?.(weights);
        return quantizeQ8_0(weights);
      },
    } satisfies GgufTensor;
  };
  const norm = (name: string): GgufTensor => {
    parameters += nEmbd;
    return { name, shape: [nEmbd], type: "f32", data: () => encodeF32(new Float32Array(nEmbd).fill(1)) };
  };

  const tensors: GgufTensor[] = [matrix("token_embd.weight", nEmbd, nVocab)];
  for (let layer = 0; layer < size.layers; layer++) {
    const blk = `blk.${layer}`;
    tensors.push(
      norm(`${blk}.attn_norm.weight`),
      matrix(`${blk}.attn_q.weight`, nEmbd, nEmbd),
      matrix(`${blk}.attn_k.weight`, nEmbd, nKv),
      matrix(`${blk}.attn_v.weight`, nEmbd, nKv),
      matrix(`${blk}.attn_output.weight`, nEmbd, nEmbd),
      norm(`${blk}.ffn_norm.weight`),
      matrix(`${blk}.ffn_gate.weight`, nEmbd, size.feedForward),
      matrix(`${blk}.ffn_up.weight`, nEmbd, size.feedForward),
      matrix(`${blk}.ffn_down.weight`, size.feedForward, nEmbd),
    );
  }
  tensors.push(
    norm("output_norm.weight"),
    matrix("output.weight", nEmbd, nVocab, (weights) => {
      for (const id of vocab.unprintableIds) weights.fill(0, id * nEmbd, (id + 1) * nEmbd);
    }),
  );

  await mkdir(dirname(path), { recursive: true });
  const partial = `${path}.${process.pid}.partial`;
  try {
    const bytes = await writeGguf(partial, { metadata, tensors });
    await rename(partial, path);
    return { path, bytes, parameters, seconds: (performance.now() - started) / 1000 };
  } catch (err) {
    await rm(partial, { force: true });
    throw err;
  }
}

/** Where generated models are kept: `$AGENT_SERVE_CACHE_DIR`, else the XDG cache dir, else the temp dir. */
export function modelCacheDir(): string {
  const explicit = process.env["AGENT_SERVE_CACHE_DIR"];
  if (explicit) return explicit;
  const xdg = process.env["XDG_CACHE_HOME"];
  if (xdg) return join(xdg, "agent-serve");
  const home = homedir();
  return home ? join(home, ".cache", "agent-serve") : join(tmpdir(), "agent-serve");
}

export function defaultModelPath(sizeName: string = DEFAULT_MODEL_SIZE, seed = DEFAULT_MODEL_SEED): string {
  return join(modelCacheDir(), `random-llama-${sizeName}-s${seed}-v${GENERATOR_VERSION}.gguf`);
}

/** The cached model of this size and seed, made first if it is not there yet (a few seconds). */
export async function ensureModel(
  sizeName: string = DEFAULT_MODEL_SIZE,
  seed = DEFAULT_MODEL_SEED,
): Promise<string> {
  const path = defaultModelPath(sizeName, seed);
  const existing = await stat(path).catch(() => undefined);
  if (existing?.isFile()) return path;
  await makeModel(path, sizeName, seed);
  return path;
}
