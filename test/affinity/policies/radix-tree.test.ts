// The approximate radix tree of SGLang's cache-aware router, on small hand-worked cases.
import { describe, expect, it } from "vitest";
import { RadixTree } from "../../../src/affinity/policies/radix-tree.js";

describe("RadixTree", () => {
  it("shares the common edge and counts each tenant's characters once", () => {
    const tree = new RadixTree();
    tree.insert("hello world", "A", 1);
    tree.insert("hello there", "B", 2);
    // A: "hello world" (11). B: "hello " is new to B (6) + "there" (5).
    expect(tree.sizeOf("A")).toBe(11);
    expect(tree.sizeOf("B")).toBe(11);
    // A again on a text diverging inside "world": the split part is already A's, only "ide" is new.
    tree.insert("hello wide", "A", 3);
    expect(tree.sizeOf("A")).toBe(11 + 3);
  });

  it("matches the longest stored prefix, a partial edge included, and names the tenant that holds it", () => {
    const tree = new RadixTree();
    tree.insert("hello world", "A", 1);
    tree.insert("hello there", "B", 2);
    // "hello " (6) then "wo" of "world": 8 characters, and only A holds that edge.
    expect(tree.prefixMatch("hello wonder", 3)).toEqual({ matchedChars: 8, tenant: "A" });
    expect(tree.prefixMatch("hello there, again", 4)).toEqual({ matchedChars: 11, tenant: "B" });
    // Ends on the shared edge: the tenant most recently seen there (B, refreshed at 4).
    expect(tree.prefixMatch("hello ", 5)).toEqual({ matchedChars: 6, tenant: "B" });
    expect(tree.prefixMatch("xyz", 6).matchedChars).toBe(0);
    expect(new RadixTree().prefixMatch("abc", 0)).toEqual({ matchedChars: 0, tenant: undefined });
  });

  it("names the smallest tenant among those asked about, the first on ties", () => {
    const tree = new RadixTree();
    for (const t of ["A", "B", "C"]) tree.insert("", t, 0);
    expect(tree.smallestTenant(["A", "B", "C"])).toBe("A");
    tree.insert("aaaa", "A", 1);
    tree.insert("bb", "B", 1);
    expect(tree.smallestTenant(["A", "B", "C"])).toBe("C");
    expect(tree.smallestTenant(["A", "B"])).toBe("B");
    expect(tree.smallestTenant(["unknown"])).toBeUndefined();
  });

  it("evicts a tenant's least recently used leaves down to the size bound, leaving other tenants alone", () => {
    const tree = new RadixTree();
    tree.insert("aaaa", "A", 1);
    tree.insert("bbbb", "A", 2);
    tree.insert("aaaa", "B", 3);
    tree.evictToSize(4);
    expect(tree.sizeOf("A")).toBe(4);
    // A's older leaf went; B still holds "aaaa", A still holds "bbbb".
    expect(tree.prefixMatch("aaaa", 4)).toEqual({ matchedChars: 4, tenant: "B" });
    expect(tree.prefixMatch("bbbb", 5)).toEqual({ matchedChars: 4, tenant: "A" });
    expect(tree.sizeOf("B")).toBe(4);
  });

  it("forgets a removed tenant", () => {
    const tree = new RadixTree();
    tree.insert("abc", "A", 1);
    tree.insert("abd", "B", 2);
    tree.removeTenant("B");
    expect(tree.hasTenant("B")).toBe(false);
    expect(tree.prefixMatch("abd", 3)).toEqual({ matchedChars: 2, tenant: "A" });
  });
});
