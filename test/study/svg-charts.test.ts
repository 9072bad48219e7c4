// SVG chart output: well-formed, escaped, free of NaN, deterministic, with the expected elements and geometry
import { describe, expect, it } from "vitest";
import { barChart, lineChart, type BarChartSpec, type LineChartSpec } from "../../src/study/svg-charts.js";

/**
 * A small well-formedness check, enough for the XML this module emits: tags balance in order, attributes are
 * `name="value"` without raw `<`, and text holds no raw `<`, `>` or bare `&`.
 */
function assertWellFormed(svg: string): void {
  const stack: string[] = [];
  const tagRe = /<[^<>]*>/g;
  let last = 0;
  let roots = 0;
  const checkText = (chunk: string) => {
    expect(chunk, "raw < or > in text").not.toMatch(/[<>]/);
    expect(chunk, "bare & in text").not.toMatch(/&(?!(amp|lt|gt|quot|apos|#\d+|#x[0-9a-fA-F]+);)/);
  };
  for (const match of svg.matchAll(tagRe)) {
    const raw = match[0];
    checkText(svg.slice(last, match.index));
    last = match.index + raw.length;
    const close = /^<\/([A-Za-z][\w:-]*)\s*>$/.exec(raw);
    if (close) {
      expect(stack.pop(), `closing </${close[1]}>`).toBe(close[1]);
      continue;
    }
    const open = /^<([A-Za-z][\w:-]*)((?:\s+[A-Za-z][\w:-]*="[^"<]*")*)\s*(\/?)>$/.exec(raw);
    expect(open, `malformed tag ${raw}`).not.toBeNull();
    if (stack.length === 0) roots++;
    if (open![3] !== "/") stack.push(open![1]!);
  }
  checkText(svg.slice(last));
  expect(stack, "unclosed tags").toEqual([]);
  expect(roots).toBe(1);
}

function attrsOf(tagText: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of tagText.matchAll(/([A-Za-z][\w:-]*)="([^"]*)"/g)) out[m[1]!] = m[2]!;
  return out;
}

/** The opening tags of `name` elements with the given class. */
function elements(svg: string, name: string, cls: string): Record<string, string>[] {
  return [...svg.matchAll(new RegExp(`<${name}\\b[^>]*>`, "g"))]
    .map((m) => attrsOf(m[0]))
    .filter((a) => a.class === cls);
}

function texts(svg: string, cls: string): string[] {
  return [...svg.matchAll(/<text\b([^>]*)>([^<]*)<\/text>/g)]
    .filter((m) => attrsOf(m[1]!).class === cls)
    .map((m) => m[2]!);
}

function assertSane(svg: string): void {
  expect(svg.startsWith("<svg")).toBe(true);
  expect(svg).toContain('xmlns="http://www.w3.org/2000/svg"');
  expect(svg).not.toMatch(/NaN|Infinity/);
  assertWellFormed(svg);
  // Attribute numbers carry at most 2 decimals.
  expect(svg).not.toMatch(/="[^"]*\d\.\d{3,}/);
}

const BARS: BarChartSpec = {
  title: "Prefix-cache hit rate",
  yLabel: "hit rate (%)",
  series: ["round-robin", "affinity"],
  groups: [
    { label: "2 engines", values: [41.2, 83.3] },
    { label: "4 engines", values: [22.9, 80.1] },
    { label: "8 engines", values: [11.5, 77.0] },
  ],
};

const LINES: LineChartSpec = {
  title: "Latency over time",
  xLabel: "time (s)",
  yLabel: "p95 latency (ms)",
  series: [
    { name: "gateway", points: [0, 1, 2, 3, 4].map((x) => ({ x, y: 100 + x * 7.123 })) },
    { name: "direct", points: [0, 1, 2, 3, 4].map((x) => ({ x, y: 90 + x * 3 })) },
  ],
  markers: [{ x: 2.5, label: "engine stopped" }],
};

describe("barChart", () => {
  it("renders a well-formed document with title, legend, group labels and one bar per value", () => {
    const svg = barChart(BARS);
    assertSane(svg);
    expect(svg).toContain("Prefix-cache hit rate");
    expect(svg).toContain("hit rate (%)");
    expect(texts(svg, "legend-label")).toEqual(["round-robin", "affinity"]);
    expect(texts(svg, "group-label")).toEqual(["2 engines", "4 engines", "8 engines"]);
    expect(elements(svg, "rect", "bar")).toHaveLength(6);
    expect(texts(svg, "value")).toEqual(["41.2", "83.3", "22.9", "80.1", "11.5", "77"]);
  });

  it("picks nice ticks: max 83.3 gives 0..100 by 20", () => {
    expect(texts(barChart(BARS), "ytick")).toEqual(["0", "20", "40", "60", "80", "100"]);
  });

  it("cycles the palette by series index", () => {
    const series = ["a", "b", "c", "d", "e", "f", "g"];
    const svg = barChart({ ...BARS, series, groups: [{ label: "g", values: series.map((_, i) => i + 1) }] });
    const fills = elements(svg, "rect", "bar").map((a) => a.fill);
    expect(new Set(fills.slice(0, 6)).size).toBe(6);
    expect(fills[6]).toBe(fills[0]);
  });

  it("escapes text so labels cannot break the XML", () => {
    const nasty = `a<b & "c" 'd'>`;
    const svg = barChart({
      title: nasty,
      yLabel: nasty,
      series: [nasty],
      groups: [{ label: nasty, values: [1] }],
    });
    assertSane(svg);
    expect(svg).toContain("a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;");
    expect(svg).not.toContain("a<b");
  });

  it("uses valueFormat and an explicit yMax", () => {
    const svg = barChart({ ...BARS, yMax: 100, valueFormat: (v) => `${v.toFixed(0)}%` });
    expect(texts(svg, "value")[0]).toBe("41%");
    expect(texts(svg, "ytick").at(-1)).toBe("100");
  });

  it("handles empty, all-zero, non-finite and negative data", () => {
    const empty = barChart({ title: "t", yLabel: "y", series: [], groups: [] });
    assertSane(empty);
    expect(elements(empty, "rect", "bar")).toHaveLength(0);

    const zeros = barChart({ ...BARS, groups: [{ label: "z", values: [0, 0] }] });
    assertSane(zeros);
    expect(Number(texts(zeros, "ytick").at(-1))).toBe(1);

    const weird = barChart({ ...BARS, groups: [{ label: "w", values: [NaN, Infinity] }] });
    assertSane(weird);
    expect(elements(weird, "rect", "bar")).toHaveLength(2);
    // A missing value is labelled "-", never with a number a reader would take for a measured zero.
    expect(weird.match(/class="value missing"[^>]*>-</g)).toHaveLength(2);
    expect(weird).not.toMatch(/class="value"[^>]*>/);

    const negative = barChart({ ...BARS, groups: [{ label: "n", values: [-30, 50] }] });
    assertSane(negative);
    const ticks = texts(negative, "ytick").map(Number);
    expect(ticks[0]).toBeLessThanOrEqual(-30);
    expect(ticks).toContain(0);
    // Both bars start at the zero baseline: the negative one hangs from it, the positive one stands on it.
    const [neg, pos] = elements(negative, "rect", "bar");
    const baseline = Number(elements(negative, "line", "baseline")[0]!.y1);
    expect(Number(neg!.y)).toBeCloseTo(baseline, 1);
    expect(Number(pos!.y) + Number(pos!.height)).toBeCloseTo(baseline, 1);
  });

  it("is deterministic", () => {
    expect(barChart(BARS)).toBe(barChart(structuredClone(BARS)));
  });
});

describe("lineChart", () => {
  it("renders one polyline per series, circles at points, a dashed line per marker", () => {
    const svg = lineChart(LINES);
    assertSane(svg);
    expect(svg).toContain("Latency over time");
    expect(svg).toContain("time (s)");
    expect(texts(svg, "legend-label")).toEqual(["gateway", "direct"]);
    const lines = elements(svg, "polyline", "series");
    expect(lines).toHaveLength(2);
    expect(lines[0]!.points!.split(" ")).toHaveLength(5);
    expect(elements(svg, "circle", "point")).toHaveLength(10);
    const markers = elements(svg, "line", "marker");
    expect(markers).toHaveLength(1);
    expect(markers[0]!["stroke-dasharray"]).toBeTruthy();
    expect(texts(svg, "marker-label")).toEqual(["engine stopped"]);
  });

  it("has 4-6 nice ticks on both axes", () => {
    const svg = lineChart(LINES);
    for (const cls of ["xtick", "ytick"]) {
      const ticks = texts(svg, cls).map(Number);
      expect(ticks.length).toBeGreaterThanOrEqual(4);
      expect(ticks.length).toBeLessThanOrEqual(6);
      const step = ticks[1]! - ticks[0]!;
      const mantissa = step / 10 ** Math.floor(Math.log10(step));
      expect([1, 2, 5]).toContain(Math.round(mantissa * 1e6) / 1e6);
    }
  });

  it("handles no series, empty series, a single point and yMin == yMax", () => {
    for (const spec of [
      { ...LINES, series: [], markers: [] },
      { ...LINES, series: [{ name: "empty", points: [] }] },
      { ...LINES, series: [{ name: "one", points: [{ x: 3, y: 5 }] }], markers: [] },
      { ...LINES, yMin: 5, yMax: 5 },
      { ...LINES, xMin: 2, xMax: 2 },
      { ...LINES, series: [{ name: "zero", points: [{ x: 0, y: 0 }] }], markers: [] },
      {
        ...LINES,
        series: [
          {
            name: "neg",
            points: [
              { x: 1, y: -4 },
              { x: NaN, y: 1 },
            ],
          },
        ],
      },
      { ...LINES, stacked: true, series: [{ name: "one", points: [{ x: 7, y: 0 }] }] },
    ] satisfies LineChartSpec[]) {
      const svg = lineChart(spec);
      assertSane(svg);
      expect(elements(svg, spec.stacked ? "rect" : "polyline", spec.stacked ? "bar" : "series")).toHaveLength(
        spec.series.length,
      );
    }
  });

  it("labels big ticks in k / M units and tiny ones in exponent form, zero as 0", () => {
    const big = lineChart({ ...LINES, markers: [], series: [{ name: "s", points: [{ x: 0, y: 250_000 }] }] });
    expect(texts(big, "ytick")).toEqual(["0", "50k", "100k", "150k", "200k", "250k"]);
    const tiny = lineChart({ ...LINES, markers: [], series: [{ name: "s", points: [{ x: 0, y: -1e-20 }] }] });
    expect(texts(tiny, "ytick").at(0)).toBe("-1e-20");
    expect(texts(tiny, "ytick").at(-1)).toBe("0");
  });

  it("escapes series names and marker labels", () => {
    const nasty = `a<b & "c"`;
    const svg = lineChart({
      ...LINES,
      series: [{ name: nasty, points: [{ x: 1, y: 1 }] }],
      markers: [{ x: 1, label: nasty }],
    });
    assertSane(svg);
    expect(svg.match(/a&lt;b &amp; &quot;c&quot;/g)).toHaveLength(2);
  });

  it("is deterministic", () => {
    expect(lineChart(LINES)).toBe(lineChart(structuredClone(LINES)));
  });

  it("stacks bars bottom-up so each stack's top is the scaled sum", () => {
    const ok = [3, 5, 4];
    const failed = [1, 0, 2.5];
    const svg = lineChart({
      title: "Requests per second",
      xLabel: "time (s)",
      yLabel: "requests",
      series: [
        { name: "ok", points: ok.map((y, x) => ({ x, y })) },
        { name: "failed", points: failed.map((y, x) => ({ x, y })) },
      ],
      yMin: 0,
      yMax: 10,
      stacked: true,
    });
    assertSane(svg);
    expect(elements(svg, "polyline", "series")).toHaveLength(0);
    const bars = elements(svg, "rect", "bar");
    expect(bars).toHaveLength(6);
    const area = elements(svg, "rect", "plot-area")[0]!;
    const baseline = Number(area.y) + Number(area.height);
    const pxPerUnit = Number(area.height) / 10;
    const byX = new Map<string, Record<string, string>[]>();
    for (const bar of bars) byX.set(bar.x!, [...(byX.get(bar.x!) ?? []), bar]);
    expect(byX.size).toBe(3);
    // The x axis spans the bars (-0.5..2.5), not a rounded-out range with an empty band.
    expect(Number(texts(svg, "xtick")[0])).toBeGreaterThanOrEqual(-0.5);
    [...byX.values()].forEach((stackBars, i) => {
      const [bottom, top] = stackBars;
      // Bottom-up in series order: the first series sits on the baseline, the next directly on top of it.
      expect(Number(bottom!.y) + Number(bottom!.height)).toBeCloseTo(baseline, 1);
      expect(Number(top!.y) + Number(top!.height)).toBeCloseTo(Number(bottom!.y), 5);
      expect(Number(top!.y)).toBeCloseTo(baseline - (ok[i]! + failed[i]!) * pxPerUnit, 1);
      expect(Number(bottom!.height)).toBeCloseTo(ok[i]! * pxPerUnit, 1);
    });
  });
});
