// The search_corpus tool: full-text search (BM25 ranking, prefix and fuzzy terms) over the bundled corpus.
import { GatewayError } from "../../core/errors.js";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import MiniSearch from "minisearch";
import { listWorkspace } from "./read-file.js";
import { capOutput, failure, stringArg, type AgentTool, type ToolLimits } from "./tool.js";

export const SEARCH_LIMITS: ToolLimits = { timeoutMs: 1000, memoryBytes: 4 * 1024 * 1024, outputChars: 3000 };
const MAX_QUERY_CHARS = 200;
const MAX_RESULTS = 4;
const SNIPPET_CHARS = 240;

export interface CorpusDocument {
  id: string;
  title: string;
  text: string;
}

export interface SearchHit {
  id: string;
  title: string;
  score: number;
  snippet: string;
}

/** A markdown file's first heading is its title; the rest is its text. */
function parseDocument(id: string, source: string): CorpusDocument {
  const heading = /^#\s+(.+)$/m.exec(source);
  return { id, title: heading?.[1]?.trim() ?? id, text: heading ? source.replace(heading[0], "") : source };
}

/** The sentence-ish window of the text around the first query term found, for the model to read. */
function snippet(text: string, terms: readonly string[]): string {
  const flat = text.replace(/\s+/g, " ").trim();
  const lower = flat.toLowerCase();
  const at = Math.min(...terms.map((t) => lower.indexOf(t.toLowerCase())).filter((i) => i >= 0), flat.length);
  const start = at >= flat.length ? 0 : Math.max(0, at - SNIPPET_CHARS / 3);
  const piece = flat.slice(start, start + SNIPPET_CHARS);
  return `${start > 0 ? "..." : ""}${piece}${start + SNIPPET_CHARS < flat.length ? "..." : ""}`;
}

export class CorpusIndex {
  private constructor(
    private readonly index: MiniSearch<CorpusDocument>,
    private readonly documents: Map<string, CorpusDocument>,
  ) {}

  static fromDocuments(documents: readonly CorpusDocument[]): CorpusIndex {
    const index = new MiniSearch<CorpusDocument>({
      fields: ["title", "text"],
      storeFields: ["title"],
      searchOptions: { boost: { title: 2 }, prefix: true, fuzzy: 0.2, combineWith: "OR" },
    });
    index.addAll(documents);
    return new CorpusIndex(index, new Map(documents.map((d) => [d.id, d])));
  }

  /** Indexes every `.md` file under `dir` (ids: paths relative to it); refuses a corpus over `maxBytes`. */
  static async fromDirectory(dir: string, maxBytes = SEARCH_LIMITS.memoryBytes): Promise<CorpusIndex> {
    const files = (await listWorkspace(dir)).filter((f) => f.endsWith(".md"));
    const sources = await Promise.all(files.map((file) => readFile(join(dir, file), "utf8")));
    const bytes = sources.reduce((sum, source) => sum + Buffer.byteLength(source), 0);
    if (bytes > maxBytes)
      throw new GatewayError(
        "body_too_large",
        `the corpus in ${dir} has ${bytes} bytes, more than ${maxBytes}`,
      );
    return CorpusIndex.fromDocuments(files.map((file, i) => parseDocument(file, sources[i]!)));
  }

  get size(): number {
    return this.documents.size;
  }

  search(query: string, limit = MAX_RESULTS): SearchHit[] {
    return this.index
      .search(query)
      .slice(0, limit)
      .map((result) => ({
        id: String(result.id),
        title: this.documents.get(String(result.id))!.title,
        score: Math.round(result.score * 100) / 100,
        snippet: snippet(this.documents.get(String(result.id))!.text, result.terms),
      }));
  }
}

export function searchCorpusTool(index: CorpusIndex, limits: ToolLimits = SEARCH_LIMITS): AgentTool {
  return {
    name: "search_corpus",
    description:
      `Full-text search over a corpus of ${index.size} short articles on LLM serving (KV caches, batching, ` +
      `routing, quantization, ...). Returns up to ${MAX_RESULTS} ranked matches with a snippet each.`,
    parameters: {
      type: "object",
      properties: {
        query: { type: "string", description: `search words, at most ${MAX_QUERY_CHARS} characters` },
      },
      required: ["query"],
      additionalProperties: false,
    },
    // The index is built once at start and held in memory (memoryBytes bounds the corpus it may hold);
    // a query's cost is bounded by its length.
    limits,
    run(args) {
      const query = stringArg(args, "query");
      if (typeof query !== "string") return Promise.resolve(query);
      if (query.trim() === "") return Promise.resolve(failure("the query is empty"));
      if (query.length > MAX_QUERY_CHARS)
        return Promise.resolve(failure(`the query is longer than ${MAX_QUERY_CHARS} characters`));
      const hits = index.search(query);
      if (hits.length === 0) return Promise.resolve({ ok: true, output: `no matches for '${query}'` });
      const text = hits
        .map((hit, i) => `${i + 1}. ${hit.title} (${hit.id}, score ${hit.score})\n   ${hit.snippet}`)
        .join("\n");
      return Promise.resolve({ ok: true, output: capOutput(text, limits.outputChars) });
    },
  };
}
