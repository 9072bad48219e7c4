// Reads sample values out of a Prometheus text exposition (the gateway's and engines' /metrics).

/** The sum of the samples of `name` whose labels include every given pair (0 when none match). */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number {
  const wanted = Object.entries(labels).map(([key, value]) => `${key}="${value}"`);
  let total = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== "{" && rest[0] !== " ") continue;
    if (wanted.every((pair) => rest.includes(pair))) total += Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return total;
}

export async function scrapeMetrics(baseUrl: string): Promise<string> {
  const response = await fetch(`${baseUrl}/metrics`);
  return response.text();
}
