// The ggml tensor encodings the model maker writes: f32, f16 and q8_0 (blocks of 32 int8 with an f16 scale).
import { GatewayError } from "../core/errors.js";

/** ggml's `ggml_type` ids of the encodings used here. */
export const GGML_TYPE = { f32: 0, f16: 1, q8_0: 8 } as const;
export type GgmlType = keyof typeof GGML_TYPE;

/** q8_0: 32 weights share one f16 scale `d`; each weight is round(x / d) as int8. */
export const Q8_0_BLOCK = 32;
const Q8_0_BLOCK_BYTES = 2 + Q8_0_BLOCK;

/** `general.file_type` of a model whose large tensors are q8_0 (llama.cpp's LLAMA_FTYPE_MOSTLY_Q8_0). */
export const FILE_TYPE_MOSTLY_Q8_0 = 7;

export function tensorBytes(type: GgmlType, shape: readonly number[]): number {
  const elements = shape.reduce((product, dim) => product * dim, 1);
  switch (type) {
    case "f32":
      return elements * 4;
    case "f16":
      return elements * 2;
    case "q8_0":
      if (shape[0]! % Q8_0_BLOCK !== 0)
        throw new GatewayError(
          "internal_error",
          `q8_0 needs rows that are a multiple of ${Q8_0_BLOCK} (got ${shape[0]})`,
        );
      return (elements / Q8_0_BLOCK) * Q8_0_BLOCK_BYTES;
  }
}

const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);

/** IEEE half precision bits of `value`, rounded to nearest even (subnormals included, overflow to infinity). */
export function toFloat16Bits(value: number): number {
  f32Scratch[0] = value;
  const bits = u32Scratch[0]!;
  const sign = (bits >>> 16) & 0x8000;
  const exponent = (bits >>> 23) & 0xff;
  let mantissa = bits & 0x7fffff;
  if (exponent === 0xff) return sign | 0x7c00 | (mantissa !== 0 ? 0x200 : 0); // inf / nan
  let halfExponent = exponent - 127 + 15;
  if (halfExponent >= 0x1f) return sign | 0x7c00;
  if (halfExponent <= 0) {
    if (halfExponent < -10) return sign; // too small even for a subnormal
    mantissa |= 0x800000;
    const shift = 14 - halfExponent;
    let half = mantissa >>> shift;
    const rest = mantissa & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (rest > halfway || (rest === halfway && (half & 1) === 1)) half += 1;
    return sign | half;
  }
  let half = (halfExponent << 10) | (mantissa >>> 13);
  const rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (half & 1) === 1)) half += 1; // may carry into the exponent: fine
  halfExponent = half >>> 10;
  return sign | (halfExponent >= 0x1f ? 0x7c00 : half);
}

export function fromFloat16Bits(half: number): number {
  const sign = half & 0x8000 ? -1 : 1;
  const exponent = (half >>> 10) & 0x1f;
  const mantissa = half & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 0x1f) return mantissa === 0 ? sign * Infinity : NaN;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

export function encodeF32(values: Float32Array): Uint8Array {
  return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
}

export function encodeF16(values: Float32Array): Uint8Array {
  const out = new Uint8Array(values.length * 2);
  const view = new DataView(out.buffer);
  for (let i = 0; i < values.length; i++) view.setUint16(i * 2, toFloat16Bits(values[i]!), true);
  return out;
}

/** ggml's reference q8_0 quantizer: d = max|x| / 127 per block, q = round(x / d). */
export function quantizeQ8_0(values: Float32Array): Uint8Array {
  if (values.length % Q8_0_BLOCK !== 0)
    throw new GatewayError("internal_error", `q8_0 needs a multiple of ${Q8_0_BLOCK} values`);
  const blocks = values.length / Q8_0_BLOCK;
  const out = new Uint8Array(blocks * Q8_0_BLOCK_BYTES);
  const view = new DataView(out.buffer);
  for (let b = 0; b < blocks; b++) {
    const start = b * Q8_0_BLOCK;
    let amax = 0;
    for (let i = 0; i < Q8_0_BLOCK; i++) amax = Math.max(amax, Math.abs(values[start + i]!));
    const d = amax / 127;
    const inverse = d === 0 ? 0 : 1 / d;
    const base = b * Q8_0_BLOCK_BYTES;
    view.setUint16(base, toFloat16Bits(d), true);
    for (let i = 0; i < Q8_0_BLOCK; i++) view.setInt8(base + 2 + i, Math.round(values[start + i]! * inverse));
  }
  return out;
}

export function dequantizeQ8_0(bytes: Uint8Array): Float32Array {
  const blocks = bytes.byteLength / Q8_0_BLOCK_BYTES;
  const out = new Float32Array(blocks * Q8_0_BLOCK);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let b = 0; b < blocks; b++) {
    const base = b * Q8_0_BLOCK_BYTES;
    const d = fromFloat16Bits(view.getUint16(base, true));
    for (let i = 0; i < Q8_0_BLOCK; i++) out[b * Q8_0_BLOCK + i] = d * view.getInt8(base + 2 + i);
  }
  return out;
}
