// Dependency-free SVG bar and line charts for load-study reports: pure, deterministic spec -> SVG string.
//
// Reports are committed and diffed, so output is byte-stable for the same input: no randomness, no clocks,
// coordinates rounded to 2 decimals, one element per line. Classes (`bar`, `series`, `marker`, ...) let tests
// and readers find elements; all styling is inline so several charts can share one HTML page without their
// styles or ids colliding.

export interface BarGroup {
  label: string;
  values: number[];
}

export interface BarChartSpec {
  title: string;
  yLabel: string;
  series: string[];
  groups: BarGroup[];
  yMax?: number;
  valueFormat?: (v: number) => string;
}

export interface LineSeries {
  name: string;
  points: { x: number; y: number }[];
}

export interface LineChartSpec {
  title: string;
  xLabel: string;
  yLabel: string;
  series: LineSeries[];
  /** Vertical markers with a short label, e.g. { x: 12.5, label: "engine stopped" }. */
  markers?: { x: number; label: string }[];
  yMin?: number;
  yMax?: number;
  xMin?: number;
  xMax?: number;
  /** Draw series as stacked bars per x instead of lines (for per-second success/failure timelines). */
  stacked?: boolean;
}

const WIDTH = 720;
const HEIGHT = 400;
const FONT_SIZE = 11;
/** Okabe-Ito colours: they stay distinguishable under the common colour-vision deficiencies. */
const PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9"] as const;
const AXIS_COLOUR = "#333333";
const GRID_COLOUR = "#e6e6e6";
const TEXT_COLOUR = "#222222";
const MARKER_COLOUR = "#666666";
/** Beyond this many points circles merge into a thick line and only bloat the file, so they are left out. */
const MAX_POINT_CIRCLES = 200;
/** Slack for float division when deciding whether a value sits on a tick. */
const EPS = 1e-9;

type Attrs = Record<string, string | number | undefined>;

function colour(index: number): string {
  return PALETTE[index % PALETTE.length] ?? PALETTE[0];
}

/** At most 2 decimals keeps files small and stable; a non-finite value (a bug) never reaches output. */
function num(v: number): string {
  if (!Number.isFinite(v)) return "0";
  return String(Math.round(v * 100) / 100);
}

const ENTITIES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&apos;",
};

function escapeXml(s: string): string {
  return (
    String(s)
      // Control characters are not allowed anywhere in XML 1.0, even escaped, so they are dropped.
      // eslint-disable-next-line no-control-regex
      .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/g, "")
      .replace(/[&<>"']/g, (c) => ENTITIES[c] ?? c)
  );
}

function attributes(attrs: Attrs): string {
  let s = "";
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined) continue;
    s += ` ${key}="${typeof value === "number" ? num(value) : escapeXml(value)}"`;
  }
  return s;
}

function tag(name: string, attrs: Attrs, body?: string): string {
  const open = `<${name}${attributes(attrs)}`;
  return body === undefined ? `${open}/>` : `${open}>${body}</${name}>`;
}

function text(x: number, y: number, content: string, attrs: Attrs = {}): string {
  return tag("text", { ...attrs, x, y }, escapeXml(content));
}

/** A rough width for layout only: there is no font metrics API in a pure function. */
function textWidth(s: string, fontSize = FONT_SIZE): number {
  return s.length * fontSize * 0.6;
}

function clamp(v: number, lo: number, hi: number): number {
  return Math.min(hi, Math.max(lo, v));
}

function defaultValueFormat(v: number): string {
  const r = Math.round(v * 10) / 10;
  return String(r === 0 ? 0 : r);
}

// -----------------------------------------------------------------------------------------------------------
// Scales

interface Domain {
  lo: number;
  hi: number;
  fixLo: boolean;
  fixHi: boolean;
}

interface Scale {
  lo: number;
  hi: number;
  ticks: number[];
  /** Exponent k of the tick step m * 10^k, which decides how many decimals tick labels need. */
  exp: number;
}

function finiteOrUndefined(v: number | undefined): number | undefined {
  return v !== undefined && Number.isFinite(v) ? v : undefined;
}

/**
 * Data and bounds are clamped to this magnitude: far beyond any load-study quantity, and it keeps tick
 * arithmetic (which rounds the domain out to the next tick) from overflowing to Infinity.
 */
const MAX_ABS = 1e15;

function clampMagnitude(v: number): number {
  return clamp(v, -MAX_ABS, MAX_ABS);
}

function mapDefined(v: number | undefined, f: (v: number) => number): number | undefined {
  return v === undefined ? undefined : f(v);
}

function padFor(v: number): number {
  return v === 0 ? 1 : Math.abs(v) * 0.1;
}

/**
 * The data range, overridden by fixed bounds, widened when empty (all values equal, or bounds that cross) so
 * the scale never divides by zero.
 */
function resolveDomain(
  values: readonly number[],
  fixedLo: number | undefined,
  fixedHi: number | undefined,
  includeZero: boolean,
): Domain {
  const fLo = mapDefined(finiteOrUndefined(fixedLo), clampMagnitude);
  const fHi = mapDefined(finiteOrUndefined(fixedHi), clampMagnitude);
  let dataLo = Infinity;
  let dataHi = -Infinity;
  for (const raw of values) {
    if (!Number.isFinite(raw)) continue;
    const v = clampMagnitude(raw);
    if (v < dataLo) dataLo = v;
    if (v > dataHi) dataHi = v;
  }
  if (dataLo > dataHi) {
    dataLo = 0;
    dataHi = includeZero ? 0 : 1;
  }
  if (includeZero) {
    dataLo = Math.min(dataLo, 0);
    dataHi = Math.max(dataHi, 0);
  }
  let lo = fLo ?? dataLo;
  let hi = fHi ?? dataHi;
  if (!(hi > lo)) {
    if (fLo === undefined && fHi === undefined) {
      // All-zero data keeps its zero baseline at the bottom; any other single value gets room on both sides.
      if (lo === 0) hi = 1;
      else {
        const pad = padFor(lo);
        lo -= pad;
        hi += pad;
      }
    } else if (fHi === undefined) hi = lo + padFor(lo);
    else if (fLo === undefined) lo = hi - padFor(hi);
    else hi = lo + padFor(lo);
  }
  return { lo, hi, fixLo: fLo !== undefined, fixHi: fHi !== undefined };
}

/** Drops float noise from i * step (0.30000000000000004 -> 0.3) at any magnitude; -0 becomes 0. */
function clean(v: number): number {
  const r = Number(v.toPrecision(12));
  return r === 0 ? 0 : r;
}

/**
 * Ticks at a 1/2/5 x 10^k step: the step giving 4-6 ticks (closest to 5, then the tightest domain).
 * Unfixed domain ends are pushed out to the next tick, so the axis ends on a labelled value.
 */
function niceScale(domain: Domain): Scale {
  const { lo, hi } = domain;
  const span = hi - lo;
  const mag = Math.floor(Math.log10(span));
  if (!Number.isFinite(mag)) return { lo, hi, ticks: [lo, hi], exp: 0 };
  let best: { scale: Scale; score: number; span: number } | undefined;
  for (let k = mag - 1; k <= mag + 1; k++) {
    for (const m of [1, 2, 5]) {
      const step = m * 10 ** k;
      const first = domain.fixLo ? Math.ceil(lo / step - EPS) : Math.floor(lo / step + EPS);
      const last = domain.fixHi ? Math.floor(hi / step + EPS) : Math.ceil(hi / step - EPS);
      const count = last - first + 1;
      const niceLo = domain.fixLo ? lo : clean(first * step);
      const niceHi = domain.fixHi ? hi : clean(last * step);
      const score = (count >= 4 && count <= 6 ? 0 : 100) + Math.abs(count - 5);
      const niceSpan = niceHi - niceLo;
      if (best !== undefined && (score > best.score || (score === best.score && niceSpan >= best.span)))
        continue;
      const ticks: number[] = [];
      for (let i = first; i <= last; i++) ticks.push(clean(i * step));
      best = { scale: { lo: niceLo, hi: niceHi, ticks, exp: k }, score, span: niceSpan };
    }
  }
  return best?.scale ?? { lo, hi, ticks: [lo, hi], exp: 0 };
}

/** Tick labels: plain decimals, or k / M units for big values so labels stay narrow. */
function tickFormatter(scale: Scale): (v: number) => string {
  const maxAbs = Math.max(...scale.ticks.map((t) => Math.abs(t)), 0);
  const k = scale.exp;
  const zero = (f: (v: number) => string) => (v: number) => (v === 0 ? "0" : f(v));
  if (maxAbs >= 1e6 && k >= 5) return zero((v) => `${(v / 1e6).toFixed(Math.max(0, 6 - k))}M`);
  if (maxAbs >= 1e4 && k >= 2) return zero((v) => `${(v / 1e3).toFixed(Math.max(0, 3 - k))}k`);
  // Past 6 decimals fixed-point labels are unreadable; toPrecision first drops float noise (2.0000000001e-9).
  if (k < -6) return zero((v) => Number(v.toPrecision(6)).toExponential());
  const decimals = Math.max(0, -k);
  return (v) => v.toFixed(decimals);
}

function linear(d0: number, d1: number, r0: number, r1: number): (v: number) => number {
  const factor = (r1 - r0) / (d1 - d0);
  return (v) => r0 + (v - d0) * factor;
}

// -----------------------------------------------------------------------------------------------------------
// Frame: background, title, legend, axes

interface Plot {
  left: number;
  top: number;
  right: number;
  bottom: number;
}

const TITLE_Y = 22;
const LEGEND_TOP = 38;
const LEGEND_ROW = 16;

function legend(names: readonly string[], swatch: "box" | "line", left: number, right: number) {
  const parts: string[] = [];
  let x = left;
  let row = 0;
  names.forEach((name, i) => {
    const itemWidth = 16 + textWidth(name) + 14;
    if (x > left && x + itemWidth > right) {
      row++;
      x = left;
    }
    const cy = LEGEND_TOP + row * LEGEND_ROW + 6;
    parts.push(
      swatch === "box"
        ? tag("rect", { class: "legend-swatch", x, y: cy - 5, width: 10, height: 10, fill: colour(i) })
        : tag("line", {
            class: "legend-swatch",
            x1: x,
            y1: cy,
            x2: x + 12,
            y2: cy,
            stroke: colour(i),
            "stroke-width": 2.5,
          }),
    );
    parts.push(text(x + 16, cy + 4, name, { class: "legend-label", fill: TEXT_COLOUR }));
    x += itemWidth;
  });
  return { svg: parts, rows: names.length === 0 ? 0 : row + 1 };
}

/** The left margin must fit the widest y tick label plus the rotated axis label. */
function leftMargin(tickLabels: readonly string[]): number {
  const widest = Math.max(0, ...tickLabels.map((l) => textWidth(l)));
  return Math.max(56, Math.ceil(widest) + 34);
}

function plotTop(legendRows: number, gap: number): number {
  return legendRows === 0 ? LEGEND_TOP + gap : LEGEND_TOP + legendRows * LEGEND_ROW + gap;
}

function yAxis(plot: Plot, scale: Scale, y: (v: number) => number, label: string): string[] {
  const fmt = tickFormatter(scale);
  const parts: string[] = [];
  for (const t of scale.ticks) {
    const ty = y(t);
    parts.push(
      tag("line", { class: "grid", x1: plot.left, y1: ty, x2: plot.right, y2: ty, stroke: GRID_COLOUR }),
    );
    parts.push(tag("line", { x1: plot.left - 4, y1: ty, x2: plot.left, y2: ty, stroke: AXIS_COLOUR }));
    parts.push(
      text(plot.left - 7, ty + 4, fmt(t), { class: "ytick", "text-anchor": "end", fill: TEXT_COLOUR }),
    );
  }
  const cy = (plot.top + plot.bottom) / 2;
  parts.push(
    text(14, cy, label, {
      class: "axis-label",
      "text-anchor": "middle",
      transform: `rotate(-90 14 ${num(cy)})`,
      fill: TEXT_COLOUR,
    }),
  );
  return parts;
}

/** Left and bottom axis lines, plus a zero line when the axis goes below zero so bars have a visible base. */
function axisLines(plot: Plot, scale: Scale, y: (v: number) => number): string[] {
  const parts = [
    tag("line", {
      class: "axis",
      x1: plot.left,
      y1: plot.top,
      x2: plot.left,
      y2: plot.bottom,
      stroke: AXIS_COLOUR,
    }),
    tag("line", {
      class: "axis",
      x1: plot.left,
      y1: plot.bottom,
      x2: plot.right,
      y2: plot.bottom,
      stroke: AXIS_COLOUR,
    }),
  ];
  if (scale.lo < 0 && scale.hi > 0) {
    const zy = y(0);
    parts.push(
      tag("line", { class: "baseline", x1: plot.left, y1: zy, x2: plot.right, y2: zy, stroke: AXIS_COLOUR }),
    );
  }
  return parts;
}

function svgDocument(title: string, body: readonly string[]): string {
  const open = `<svg${attributes({
    xmlns: "http://www.w3.org/2000/svg",
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    width: WIDTH,
    height: HEIGHT,
    "font-family": "system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif",
    "font-size": FONT_SIZE,
    role: "img",
  })}>`;
  return [
    open,
    tag("title", {}, escapeXml(title)),
    tag("rect", { class: "background", x: 0, y: 0, width: WIDTH, height: HEIGHT, fill: "#ffffff" }),
    text(WIDTH / 2, TITLE_Y, title, {
      class: "title",
      "text-anchor": "middle",
      "font-size": 15,
      "font-weight": 600,
      fill: TEXT_COLOUR,
    }),
    ...body,
    "</svg>",
    "",
  ].join("\n");
}

function emptyNote(plot: Plot): string {
  return text((plot.left + plot.right) / 2, (plot.top + plot.bottom) / 2, "no data", {
    class: "empty",
    "text-anchor": "middle",
    fill: MARKER_COLOUR,
  });
}

// -----------------------------------------------------------------------------------------------------------
// Bar chart

export function barChart(spec: BarChartSpec): string {
  const format = spec.valueFormat ?? defaultValueFormat;
  const groups = spec.groups;
  const slots = Math.max(1, spec.series.length, ...groups.map((g) => g.values.length));
  const values = groups.flatMap((g) => g.values.filter((v) => Number.isFinite(v)));
  // The 1 keeps an all-zero or empty chart from collapsing to a zero-height axis (the spec's ">= 1").
  const yMax = finiteOrUndefined(spec.yMax);
  const scale = niceScale(resolveDomain(yMax === undefined ? [...values, 1] : values, undefined, yMax, true));
  const fmtTick = tickFormatter(scale);

  const left = leftMargin(scale.ticks.map(fmtTick));
  const right = WIDTH - 16;
  const leg = legend(spec.series, "box", left, right);
  const groupWidth = groups.length > 0 ? (right - left) / groups.length : right - left;
  // Long group labels are slanted to avoid overlapping neighbours; that needs a deeper bottom margin.
  const slant = groups.some((g) => textWidth(g.label) > groupWidth - 4);
  // The extra top gap leaves room for the value label above the tallest bar.
  const plot: Plot = { left, right, top: plotTop(leg.rows, 18), bottom: HEIGHT - (slant ? 84 : 36) };
  const y = linear(scale.lo, scale.hi, plot.bottom, plot.top);
  const clampY = (v: number) => clamp(y(v), plot.top, plot.bottom);

  const bars: string[] = [];
  const labels: string[] = [];
  const barSlot = (groupWidth * 0.8) / slots;
  const gap = Math.min(2, barSlot * 0.2);
  groups.forEach((group, gi) => {
    const gx = left + gi * groupWidth;
    group.values.forEach((raw, si) => {
      // A missing (non-finite) value still gets its zero-height bar so every (group, series) slot is present.
      const v = Number.isFinite(raw) ? raw : 0;
      const x = gx + groupWidth * 0.1 + si * barSlot + gap / 2;
      const width = barSlot - gap;
      const top = Number(num(clampY(Math.max(v, 0))));
      const bottom = Number(num(clampY(Math.min(v, 0))));
      bars.push(tag("rect", { class: "bar", x, y: top, width, height: bottom - top, fill: colour(si) }));
      const cx = x + width / 2;
      if (!Number.isFinite(raw)) {
        // No value is not a zero: "-" where the bar would stand, as a report's table shows it.
        labels.push(
          text(cx, top - 4, "-", {
            class: "value missing",
            "font-size": 10,
            "text-anchor": "middle",
            fill: TEXT_COLOUR,
          }),
        );
        return;
      }
      const label = format(v);
      const ly = v < 0 ? bottom + 11 : top - 4;
      if (textWidth(label, 10) > barSlot + 2) {
        // Too wide to sit above a narrow bar: run it upward (downward for negatives) along the bar instead.
        const vy = v < 0 ? bottom + 3 : top - 3;
        labels.push(
          text(cx + 3, vy, label, {
            class: "value",
            "font-size": 10,
            "text-anchor": v < 0 ? "end" : "start",
            transform: `rotate(-90 ${num(cx + 3)} ${num(vy)})`,
            fill: TEXT_COLOUR,
          }),
        );
      } else {
        labels.push(
          text(cx, ly, label, {
            class: "value",
            "font-size": 10,
            "text-anchor": "middle",
            fill: TEXT_COLOUR,
          }),
        );
      }
    });
    const lx = gx + groupWidth / 2;
    const ly = plot.bottom + 15;
    labels.push(
      slant
        ? text(lx, ly, group.label, {
            class: "group-label",
            "text-anchor": "end",
            transform: `rotate(-30 ${num(lx)} ${num(ly)})`,
            fill: TEXT_COLOUR,
          })
        : text(lx, ly, group.label, { class: "group-label", "text-anchor": "middle", fill: TEXT_COLOUR }),
    );
  });

  return svgDocument(spec.title, [
    ...leg.svg,
    tag("rect", {
      class: "plot-area",
      x: plot.left,
      y: plot.top,
      width: plot.right - plot.left,
      height: plot.bottom - plot.top,
      fill: "none",
    }),
    ...yAxis(plot, scale, y, spec.yLabel),
    ...bars,
    ...axisLines(plot, scale, y),
    ...labels,
    ...(groups.length === 0 ? [emptyNote(plot)] : []),
  ]);
}

// -----------------------------------------------------------------------------------------------------------
// Line chart (and stacked bars over x)

type Point = { x: number; y: number };

function cleanPoints(points: readonly Point[]): Point[] {
  // Array.prototype.sort is stable, so points sharing an x keep their input order.
  return points.filter((p) => Number.isFinite(p.x) && Number.isFinite(p.y)).sort((a, b) => a.x - b.x);
}

/** FNV-1a, for a clip-path id that is stable for the same chart yet unlikely to clash with another's. */
function hash(s: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0).toString(16).padStart(8, "0");
}

interface Stack {
  xs: number[];
  /** values[series].get(x): that series' y at x (duplicates summed); absent if it has no point there. */
  values: Map<number, number>[];
  barUnits: number;
}

function stackSeries(series: readonly Point[][]): Stack {
  const values = series.map((points) => {
    const byX = new Map<number, number>();
    for (const p of points) byX.set(p.x, (byX.get(p.x) ?? 0) + p.y);
    return byX;
  });
  const xs = [...new Set(series.flatMap((points) => points.map((p) => p.x)))].sort((a, b) => a - b);
  let minGap = Infinity;
  for (let i = 1; i < xs.length; i++) minGap = Math.min(minGap, (xs[i] ?? 0) - (xs[i - 1] ?? 0));
  return { xs, values, barUnits: Number.isFinite(minGap) && minGap > 0 ? minGap : 1 };
}

export function lineChart(spec: LineChartSpec): string {
  const stacked = spec.stacked === true;
  const series = spec.series.map((s) => cleanPoints(s.points));
  const markers = (spec.markers ?? []).filter((m) => Number.isFinite(m.x));
  const stack = stacked ? stackSeries(series) : undefined;

  const xValues: number[] = markers.map((m) => m.x);
  const yValues: number[] = [];
  if (stack !== undefined) {
    // Bars are centred on their x, so the domain needs half a bar of room on either end.
    const half = stack.barUnits / 2;
    for (const x of stack.xs) {
      xValues.push(x - half, x + half);
      let up = 0;
      let down = 0;
      for (const byX of stack.values) {
        const v = byX.get(x) ?? 0;
        if (v >= 0) up += v;
        else down += v;
      }
      yValues.push(up, down);
    }
  } else {
    for (const points of series) {
      for (const p of points) {
        xValues.push(p.x);
        yValues.push(p.y);
      }
    }
  }
  const xDomain = resolveDomain(xValues, spec.xMin, spec.xMax, false);
  // Stacked bars already carry half a bar of room on each side; rounding the ends out to a tick would add a
  // wide empty band (e.g. -10..30 for bars at 0..29), so the ends stay put and ticks fall inside.
  const xScale = niceScale(stack !== undefined ? { ...xDomain, fixLo: true, fixHi: true } : xDomain);
  // Zero is kept on the y axis: rates, counts and latencies read honestly only from a zero baseline.
  const yScale = niceScale(resolveDomain(yValues, spec.yMin, spec.yMax, true));
  const fmtX = tickFormatter(xScale);
  const fmtY = tickFormatter(yScale);

  const left = leftMargin(yScale.ticks.map(fmtY));
  const right = WIDTH - 20;
  const leg = legend(
    spec.series.map((s) => s.name),
    stacked ? "box" : "line",
    left,
    right,
  );
  const plot: Plot = { left, right, top: plotTop(leg.rows, 8), bottom: HEIGHT - 44 };
  const x = linear(xScale.lo, xScale.hi, plot.left, plot.right);
  const y = linear(yScale.lo, yScale.hi, plot.bottom, plot.top);

  const xAxis: string[] = [];
  for (const t of xScale.ticks) {
    const tx = x(t);
    xAxis.push(tag("line", { x1: tx, y1: plot.bottom, x2: tx, y2: plot.bottom + 4, stroke: AXIS_COLOUR }));
    xAxis.push(
      text(tx, plot.bottom + 16, fmtX(t), { class: "xtick", "text-anchor": "middle", fill: TEXT_COLOUR }),
    );
  }
  xAxis.push(
    text((plot.left + plot.right) / 2, HEIGHT - 8, spec.xLabel, {
      class: "axis-label",
      "text-anchor": "middle",
      fill: TEXT_COLOUR,
    }),
  );

  const data: string[] = [];
  if (stack !== undefined) {
    const barWidth = Math.max(1, (x(stack.barUnits) - x(0)) * 0.8);
    for (const sx of stack.xs) {
      let up = 0;
      let down = 0;
      stack.values.forEach((byX, si) => {
        const v = byX.get(sx);
        if (v === undefined) return;
        const from = v >= 0 ? up : down;
        const to = from + v;
        if (v >= 0) up = to;
        else down = to;
        // Edges are rounded before taking the height so adjacent segments meet exactly and the stack's top is
        // exactly the scaled sum.
        const top = Number(num(y(Math.max(from, to))));
        const bottom = Number(num(y(Math.min(from, to))));
        data.push(
          tag("rect", {
            class: "bar",
            x: x(sx) - barWidth / 2,
            y: top,
            width: barWidth,
            height: Number(num(bottom - top)),
            fill: colour(si),
          }),
        );
      });
    }
  } else {
    series.forEach((points, si) => {
      const stroke = colour(si);
      data.push(
        tag("polyline", {
          class: "series",
          points: points.map((p) => `${num(x(p.x))},${num(y(p.y))}`).join(" "),
          fill: "none",
          stroke,
          "stroke-width": 2,
          "stroke-linejoin": "round",
          "stroke-linecap": "round",
        }),
      );
      if (points.length > MAX_POINT_CIRCLES) return;
      for (const p of points) {
        data.push(tag("circle", { class: "point", cx: x(p.x), cy: y(p.y), r: 2.5, fill: stroke }));
      }
    });
  }

  // Markers outside a fixed x range are dropped: a line pinned to the edge would place the event wrongly.
  const shown = markers
    .filter((m) => m.x >= xScale.lo - EPS && m.x <= xScale.hi + EPS)
    .sort((a, b) => a.x - b.x);
  const markerParts: string[] = [];
  shown.forEach((m, i) => {
    const mx = x(m.x);
    markerParts.push(
      tag("line", {
        class: "marker",
        x1: mx,
        y1: plot.top,
        x2: mx,
        y2: plot.bottom,
        stroke: MARKER_COLOUR,
        "stroke-width": 1.5,
        "stroke-dasharray": "5 4",
      }),
    );
    // Labels of nearby markers are staggered vertically so they do not overprint each other; labels near the
    // right edge are flipped to the left of their line so they stay inside the plot.
    const ly = plot.top + 12 + (i % 3) * 13;
    const flip = mx + 4 + textWidth(m.label, 10) > plot.right;
    markerParts.push(
      text(flip ? mx - 4 : mx + 4, ly, m.label, {
        class: "marker-label",
        "font-size": 10,
        "text-anchor": flip ? "end" : "start",
        fill: MARKER_COLOUR,
        // A white halo painted under the glyphs keeps the label legible over bars and lines.
        stroke: "#ffffff",
        "stroke-width": 3,
        "paint-order": "stroke",
      }),
    );
  });

  const clipId = `svg-chart-clip-${hash(JSON.stringify(spec))}`;
  const hasData = stack !== undefined ? stack.xs.length > 0 : series.some((points) => points.length > 0);
  return svgDocument(spec.title, [
    ...leg.svg,
    tag(
      "clipPath",
      { id: clipId },
      tag("rect", {
        x: plot.left,
        y: plot.top,
        width: plot.right - plot.left,
        height: plot.bottom - plot.top,
      }),
    ),
    tag("rect", {
      class: "plot-area",
      x: plot.left,
      y: plot.top,
      width: plot.right - plot.left,
      height: plot.bottom - plot.top,
      fill: "none",
    }),
    ...yAxis(plot, yScale, y, spec.yLabel),
    ...xAxis,
    tag("g", { "clip-path": `url(#${clipId})` }, data.length > 0 ? `\n${data.join("\n")}\n` : ""),
    ...axisLines(plot, yScale, y),
    ...markerParts,
    ...(hasData ? [] : [emptyNote(plot)]),
  ]);
}
