// Suggestions for an unknown config key: the known key at the same place it most likely meant.
import type { z } from "zod";

/** What this module reads of a zod schema's definition (zod 4's `_zod.def`), without zod's internal types. */
interface SchemaDef {
  type?: string;
  shape?: Record<string, unknown>;
  innerType?: unknown;
  in?: unknown;
  out?: unknown;
  element?: unknown;
  valueType?: unknown;
  options?: unknown[];
}

function defOf(schema: unknown): SchemaDef | undefined {
  return (schema as { _zod?: { def?: SchemaDef } } | undefined)?._zod?.def;
}

/** The schemas a wrapper stands for: a default's or optional's inner type, both ends of a pipe (preprocess). */
function wrapped(def: SchemaDef): unknown[] {
  return [def.innerType, def.in, def.out].filter((s) => s !== undefined);
}

/** The object schemas a value at this schema may be (through defaults, optionals, pipes and unions). */
function objectsOf(schema: unknown, depth = 0): SchemaDef[] {
  const def = defOf(schema);
  if (def === undefined || depth > 16) return [];
  if (def.shape !== undefined) return [def];
  if (def.options !== undefined) return def.options.flatMap((o) => objectsOf(o, depth + 1));
  return wrapped(def).flatMap((inner) => objectsOf(inner, depth + 1));
}

/** The schema of the value at `key` (a property name or an array index) inside `schema`. */
function childOf(schema: unknown, key: PropertyKey, depth = 0): unknown[] {
  const def = defOf(schema);
  if (def === undefined || depth > 16) return [];
  if (def.shape !== undefined) return typeof key === "string" && key in def.shape ? [def.shape[key]] : [];
  if (def.element !== undefined) return [def.element];
  if (def.valueType !== undefined) return [def.valueType];
  if (def.options !== undefined) return def.options.flatMap((o) => childOf(o, key, depth + 1));
  return wrapped(def).flatMap((inner) => childOf(inner, key, depth + 1));
}

/** Every key the schema knows at `path` (the object an unrecognized key was found in). */
export function knownKeysAt(schema: z.ZodType, path: readonly PropertyKey[]): string[] {
  let here: unknown[] = [schema];
  for (const key of path) here = here.flatMap((s) => childOf(s, key));
  return [...new Set(here.flatMap((s) => objectsOf(s)).flatMap((d) => Object.keys(d.shape ?? {})))];
}

/** Edit distance (insertions, deletions, substitutions, and swaps of neighbours: "sticky_ttl_secnods"). */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        best = Math.min(best, d[i - 2]![j - 2]! + 1);
      d[i]![j] = best;
    }
  }
  return d[a.length]![b.length]!;
}

/**
 * The known key `key` most likely meant: one that differs only in case or `-` for `_`, the only one that
 * extends it by whole words (`timeout` -> `timeout_ms`), else the nearest by edit distance when that is at most
 * a third of its length (at least 2). undefined when none is close.
 */
export function closestKey(key: string, known: readonly string[]): string | undefined {
  const normal = (s: string): string => s.toLowerCase().replace(/-/g, "_");
  // In a union (a store of kind memory or redis) the key may belong to another member: nothing to suggest.
  if (known.includes(key)) return undefined;
  const exact = known.find((k) => normal(k) === normal(key));
  if (exact !== undefined) return exact;
  // A key without its unit or with a word left off: `timeout` for `timeout_ms`.
  const extended = known.filter((k) => normal(k).startsWith(`${normal(key)}_`));
  if (extended.length === 1) return extended[0];
  let best: { key: string; distance: number } | undefined;
  for (const candidate of known) {
    const distance = editDistance(normal(key), normal(candidate));
    if (best === undefined || distance < best.distance) best = { key: candidate, distance };
  }
  return best !== undefined && best.distance <= Math.max(2, Math.floor(key.length / 3))
    ? best.key
    : undefined;
}
