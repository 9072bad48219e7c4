// Corpus search over the bundled articles: real matches, ranked, with snippets; fuzzy and prefix terms.
import { beforeAll, describe, expect, it } from "vitest";
import { CORPUS_DIR } from "../../src/agent/assets.js";
import { CorpusIndex, searchCorpusTool } from "../../src/agent/tools/search-corpus.js";

const signal = new AbortController().signal;

describe("search_corpus", () => {
  let index: CorpusIndex;
  beforeAll(async () => {
    index = await CorpusIndex.fromDirectory(CORPUS_DIR);
  });

  it("indexes every article of the corpus", () => {
    expect(index.size).toBe(8);
  });

  it("ranks the article about the query first, with a snippet holding the term", () => {
    const hits = index.search("rendezvous hashing");
    expect(hits[0]).toMatchObject({ id: "rendezvous-hashing.md", title: "Rendezvous hashing" });
    expect(hits[0]!.snippet.toLowerCase()).toContain("rendezvous");
    expect(index.search("iteration-level scheduling")[0]!.id).toBe("continuous-batching.md");
    expect(index.search("draft model proposes tokens")[0]!.id).toBe("speculative-decoding.md");
  });

  it("matches a misspelling and a prefix", () => {
    expect(index.search("rendevous")[0]!.id).toBe("rendezvous-hashing.md");
    expect(index.search("quantiz")[0]!.id).toBe("quantization.md");
  });

  it("finds nothing for words the corpus does not have", () => {
    expect(index.search("xylophone zeppelin")).toEqual([]);
  });

  it("as a tool: ranked matches, an honest empty answer, refusals", async () => {
    const tool = searchCorpusTool(index);
    const found = await tool.run({ query: "prefix caching prefill" }, signal);
    expect(found.ok).toBe(true);
    expect(found.output.split("\n")[0]).toMatch(/^1\. Prefix caching \(prefix-caching\.md, score [\d.]+\)$/);
    expect(await tool.run({ query: "xylophone" }, signal)).toEqual({
      ok: true,
      output: "no matches for 'xylophone'",
    });
    expect(await tool.run({ query: "  " }, signal)).toEqual({
      ok: false,
      output: "error: the query is empty",
    });
    expect((await tool.run({ query: "a".repeat(201) }, signal)).ok).toBe(false);
  });

  it("refuses a corpus larger than its memory limit", async () => {
    await expect(CorpusIndex.fromDirectory(CORPUS_DIR, 1000)).rejects.toThrow(/more than 1000/);
  });
});
