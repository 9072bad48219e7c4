// Writes a small JSON response with its length (gateway admin and errors, engines' bodies and errors).
import type { ServerResponse } from "node:http";

export function writeJson(
  res: ServerResponse,
  status: number,
  payload: unknown,
  headers: Record<string, string> = {},
): void {
  const body = Buffer.from(JSON.stringify(payload));
  res.writeHead(status, { ...headers, "content-type": "application/json", "content-length": body.length });
  res.end(body);
}
