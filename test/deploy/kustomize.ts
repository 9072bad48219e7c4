// Test fixture: a small kustomize renderer (resources and namespace only) that refuses every kustomization field it does not implement.
import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { parseAllDocuments } from "yaml";

/** One rendered Kubernetes object, as plain JSON-like data. */
export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> } & Record<string, unknown>;
  [key: string]: unknown;
}

/*
 * kustomize itself is not a dependency (`kubectl kustomize`, which embeds it, is on some machines only;
 * the test compares with it where it is). What this renderer does is what kustomize does for these two
 * fields: `resources` are files (every YAML document of each) or directories holding a kustomization,
 * in order; `namespace` is set on every namespaced object, replacing any namespace it had. Two objects
 * with the same kind, namespace and name are an error, as in kustomize. Any other field would change
 * the output in ways this renderer does not model, so it is refused rather than ignored.
 */
const SUPPORTED_FIELDS = new Set(["apiVersion", "kind", "namespace", "resources"]);

/** Kinds without a namespace that a deployment might plausibly include (kustomize leaves them alone). */
const CLUSTER_SCOPED_KINDS = new Set([
  "Namespace",
  "ClusterRole",
  "ClusterRoleBinding",
  "CustomResourceDefinition",
  "PersistentVolume",
  "StorageClass",
  "PriorityClass",
  "IngressClass",
  "RuntimeClass",
  "ValidatingWebhookConfiguration",
  "MutatingWebhookConfiguration",
]);

export class KustomizeError extends Error {
  override name = "KustomizeError";
}

function kustomizationFile(dir: string): string {
  for (const name of ["kustomization.yaml", "kustomization.yml", "Kustomization"]) {
    const path = join(dir, name);
    if (existsSync(path)) return path;
  }
  throw new KustomizeError(`${dir}: no kustomization.yaml`);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function asManifest(value: unknown, source: string): Manifest {
  if (!isRecord(value)) throw new KustomizeError(`${source}: a document that is not a mapping`);
  const metadata = value["metadata"];
  if (
    typeof value["apiVersion"] !== "string" ||
    typeof value["kind"] !== "string" ||
    !isRecord(metadata) ||
    typeof metadata["name"] !== "string"
  ) {
    throw new KustomizeError(`${source}: every object needs apiVersion, kind and metadata.name`);
  }
  return value as Manifest;
}

/** Every YAML document of a text (empty documents, such as a trailing `---`, are skipped). */
export function parseManifests(text: string, source: string): Manifest[] {
  const docs = parseAllDocuments(text, { uniqueKeys: true });
  const out: Manifest[] = [];
  docs.forEach((doc, index) => {
    if (doc.errors.length > 0) throw new KustomizeError(`${source}: ${doc.errors[0]!.message}`);
    const value: unknown = doc.toJS();
    if (value === null || value === undefined) return;
    out.push(asManifest(value, `${source} (document ${index + 1})`));
  });
  return out;
}

export function readManifests(path: string): Manifest[] {
  return parseManifests(readFileSync(path, "utf8"), path);
}

function renderDir(dir: string, seen: Set<string>): Manifest[] {
  const file = kustomizationFile(dir);
  const absolute = resolve(file);
  if (seen.has(absolute)) throw new KustomizeError(`${file}: included twice (a cycle?)`);
  seen.add(absolute);
  const doc: unknown = parseAllDocuments(readFileSync(file, "utf8"))[0]?.toJS();
  if (!isRecord(doc)) throw new KustomizeError(`${file}: not a mapping`);
  for (const key of Object.keys(doc)) {
    if (!SUPPORTED_FIELDS.has(key))
      throw new KustomizeError(`${file}: field '${key}' is not implemented by this renderer`);
  }
  if (doc["kind"] !== "Kustomization") throw new KustomizeError(`${file}: kind must be Kustomization`);
  const resources = doc["resources"] ?? [];
  if (!Array.isArray(resources)) throw new KustomizeError(`${file}: resources must be a list`);
  const out: Manifest[] = [];
  for (const entry of resources) {
    if (typeof entry !== "string" || /^[a-z]+:\/\//.test(entry))
      throw new KustomizeError(`${file}: resource ${JSON.stringify(entry)} must be a local path`);
    const path = join(dirname(file), entry);
    if (!existsSync(path)) throw new KustomizeError(`${file}: resource '${entry}' does not exist`);
    out.push(...(statSync(path).isDirectory() ? renderDir(path, seen) : readManifests(path)));
  }
  const namespace = doc["namespace"];
  if (namespace !== undefined) {
    if (typeof namespace !== "string") throw new KustomizeError(`${file}: namespace must be a string`);
    for (const m of out) if (!CLUSTER_SCOPED_KINDS.has(m.kind)) m.metadata.namespace = namespace;
  }
  return out;
}

/** The id kustomize keys objects by: group, kind, namespace, name. */
export function manifestId(m: Manifest): string {
  const group = m.apiVersion.includes("/") ? m.apiVersion.split("/")[0] : "";
  return `${group}|${m.kind}|${m.metadata.namespace ?? ""}|${m.metadata.name}`;
}

/** Renders the kustomization in `dir`, as `kustomize build dir` would for the fields it supports. */
export function renderKustomization(dir: string): Manifest[] {
  const out = renderDir(dir, new Set());
  const ids = new Set<string>();
  for (const m of out) {
    const id = manifestId(m);
    if (ids.has(id)) throw new KustomizeError(`two objects with the same id ${id}`);
    ids.add(id);
  }
  return out;
}
