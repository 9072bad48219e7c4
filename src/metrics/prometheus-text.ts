// Reads sample values out of a Prometheus text exposition (the gateway's own /metrics and the engines').

/** The sum of the samples of `name` whose labels include every given pair (0 when none match). */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number {
  return metricSample(text, name, labels) ?? 0;
}

/** Like metricValue, but undefined when no sample matches (an engine that does not export the metric). */
export function metricSample(
  text: string,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  const wanted = Object.entries(labels).map(([key, value]) => `${key}="${value}"`);
  let total: number | undefined;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== "{" && rest[0] !== " ") continue;
    if (!wanted.every((pair) => rest.includes(pair))) continue;
    const value = Number(line.slice(line.lastIndexOf(" ") + 1));
    if (Number.isFinite(value)) total = (total ?? 0) + value;
  }
  return total;
}

export async function scrapeMetrics(baseUrl: string): Promise<string> {
  const response = await fetch(`${baseUrl}/metrics`);
  return response.text();
}
