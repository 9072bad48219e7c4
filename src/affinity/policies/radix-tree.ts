// An approximate multi-tenant radix tree of routed text (SGLang's cache-aware router keeps one per model).

/** One edge label and the tenants (backends) whose routed text ran through it, with when they last did. */
interface RadixNode {
  text: string;
  readonly children: Map<string, RadixNode>;
  /** tenant -> last access (clock ms). */
  readonly tenants: Map<string, number>;
  parent: RadixNode | undefined;
}

function node(text: string, parent: RadixNode | undefined): RadixNode {
  return { text, children: new Map(), tenants: new Map(), parent };
}

function sharedPrefixLength(a: string, b: string): number {
  const limit = Math.min(a.length, b.length);
  let i = 0;
  while (i < limit && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}

export interface PrefixMatch {
  /** Characters of the text found in the tree (a partial match of the last edge included, as SGLang counts). */
  readonly matchedChars: number;
  /** The tenant the match is attributed to; undefined when the tree has no tenant at all. */
  readonly tenant: string | undefined;
}

/**
 * One tree shared by every tenant: a node records which tenants' text passed through it, and each tenant's
 * character count is the size of its share (what SGLang's `tenant_char_count` counts). Lengths are UTF-16
 * code units (SGLang counts Unicode scalar values; the two agree on the ASCII prompts of the studies).
 * Time is passed in: the tree never reads a clock.
 */
export class RadixTree {
  private readonly root = node("", undefined);
  private readonly chars = new Map<string, number>();

  hasTenant(tenant: string): boolean {
    return this.chars.has(tenant);
  }

  /** Characters of the tree attributed to `tenant` (0 for an unknown one). */
  sizeOf(tenant: string): number {
    return this.chars.get(tenant) ?? 0;
  }

  tenants(): string[] {
    return [...this.chars.keys()];
  }

  /** Adds `text` as routed to `tenant`: splits edges where it diverges, counts only characters new to the tenant. */
  insert(text: string, tenant: string, nowMs: number): void {
    this.root.tenants.set(tenant, nowMs);
    if (!this.chars.has(tenant)) this.chars.set(tenant, 0);
    let at = this.root;
    let index = 0;
    while (index < text.length) {
      const rest = text.slice(index);
      const child = at.children.get(rest[0]!);
      if (child === undefined) {
        const leaf = node(rest, at);
        leaf.tenants.set(tenant, nowMs);
        at.children.set(rest[0]!, leaf);
        this.add(tenant, rest.length);
        return;
      }
      const shared = sharedPrefixLength(child.text, rest);
      let next = child;
      if (shared < child.text.length) {
        // Split the edge: [at] -> [shared part, same tenants] -> [the child's remainder].
        const middle = node(child.text.slice(0, shared), at);
        for (const [t, ms] of child.tenants) middle.tenants.set(t, ms);
        child.text = child.text.slice(shared);
        child.parent = middle;
        middle.children.set(child.text[0]!, child);
        at.children.set(middle.text[0]!, middle);
        next = middle;
      }
      if (!next.tenants.has(tenant)) this.add(tenant, next.text.length);
      next.tenants.set(tenant, nowMs);
      at = next;
      index += shared;
    }
  }

  /**
   * The longest stored prefix of `text`, attributed to one tenant of the node where the walk stopped: the
   * most recently used one (SGLang takes the first in its concurrent map's order, in effect arbitrary; this
   * keeps runs reproducible). That tenant's access times are refreshed up to the root.
   */
  prefixMatch(text: string, nowMs: number): PrefixMatch {
    let at = this.root;
    let index = 0;
    while (index < text.length) {
      const child = at.children.get(text[index]!);
      if (child === undefined) break;
      const shared = sharedPrefixLength(child.text, text.slice(index, index + child.text.length));
      index += shared;
      at = child;
      if (shared < child.text.length) break;
    }
    let tenant: string | undefined;
    let latest = -Infinity;
    for (const [t, ms] of at.tenants) {
      if (ms > latest || (ms === latest && tenant !== undefined && t < tenant)) {
        tenant = t;
        latest = ms;
      }
    }
    if (tenant !== undefined) {
      for (let n: RadixNode | undefined = at; n !== undefined; n = n.parent) n.tenants.set(tenant, nowMs);
    }
    return { matchedChars: index, tenant };
  }

  /** The tenant with the fewest characters in the tree (ties: the one first added), of those given. */
  smallestTenant(among: readonly string[]): string | undefined {
    let best: string | undefined;
    for (const tenant of among) {
      if (!this.chars.has(tenant)) continue;
      if (best === undefined || this.sizeOf(tenant) < this.sizeOf(best)) best = tenant;
    }
    return best;
  }

  /**
   * SGLang's periodic eviction: every tenant above `maxChars` loses its least recently used leaves (nodes
   * of its text that no deeper node of its text hangs from) until it is within the bound.
   */
  evictToSize(maxChars: number): void {
    for (const [tenant, size] of this.chars) {
      if (size <= maxChars) continue;
      const heap = new LeafHeap(tenant);
      this.collectLeaves(this.root, tenant, heap);
      let remaining = size;
      while (remaining > maxChars) {
        const leaf = heap.pop();
        if (leaf === undefined) break;
        if (!leaf.tenants.has(tenant)) continue; // pushed twice (as a parent, then again)
        leaf.tenants.delete(tenant);
        remaining -= leaf.text.length;
        const parent = leaf.parent;
        if (leaf.tenants.size === 0 && leaf.children.size === 0 && parent !== undefined) {
          parent.children.delete(leaf.text[0]!);
        }
        if (parent !== undefined && parent !== this.root && isLeafOf(parent, tenant)) heap.push(parent);
      }
      this.chars.set(tenant, Math.max(0, remaining));
    }
  }

  /** Forgets a tenant (a backend that left): its marks go, and nodes no tenant holds any more. */
  removeTenant(tenant: string): void {
    const visit = (n: RadixNode): void => {
      for (const child of [...n.children.values()]) visit(child);
      n.tenants.delete(tenant);
      if (n !== this.root && n.tenants.size === 0 && n.children.size === 0)
        n.parent?.children.delete(n.text[0]!);
    };
    visit(this.root);
    this.chars.delete(tenant);
  }

  private add(tenant: string, count: number): void {
    this.chars.set(tenant, (this.chars.get(tenant) ?? 0) + count);
  }

  private collectLeaves(n: RadixNode, tenant: string, heap: LeafHeap): void {
    for (const child of n.children.values()) this.collectLeaves(child, tenant, heap);
    if (n !== this.root && isLeafOf(n, tenant)) heap.push(n);
  }
}

function isLeafOf(n: RadixNode, tenant: string): boolean {
  if (!n.tenants.has(tenant)) return false;
  for (const child of n.children.values()) if (child.tenants.has(tenant)) return false;
  return true;
}

/** A binary min-heap of nodes by one tenant's last access. */
class LeafHeap {
  private readonly items: RadixNode[] = [];

  constructor(private readonly tenant: string) {}

  private key(i: number): number {
    return this.items[i]!.tenants.get(this.tenant) ?? -Infinity;
  }

  push(n: RadixNode): void {
    const items = this.items;
    items.push(n);
    let i = items.length - 1;
    while (i > 0) {
      const up = (i - 1) >> 1;
      if (this.key(up) <= this.key(i)) break;
      [items[up], items[i]] = [items[i]!, items[up]!];
      i = up;
    }
  }

  pop(): RadixNode | undefined {
    const items = this.items;
    if (items.length === 0) return undefined;
    const top = items[0]!;
    const last = items.pop()!;
    if (items.length > 0) {
      items[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < items.length && this.key(l) < this.key(m)) m = l;
        if (r < items.length && this.key(r) < this.key(m)) m = r;
        if (m === i) break;
        [items[m], items[i]] = [items[i]!, items[m]!];
        i = m;
      }
    }
    return top;
  }
}
