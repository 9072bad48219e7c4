// Reads a request body as JSON, with a size cap, turning malformed input into vLLM-style 400 errors.
import type { IncomingHttpHeaders, IncomingMessage } from "node:http";
import { badRequest } from "./errors.js";

export function readJsonBody(req: IncomingMessage, maxBytes: number): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    req.on("data", (chunk: Buffer) => {
      if (failed) return;
      size += chunk.length;
      if (size > maxBytes) {
        failed = true;
        reject(badRequest(`Request body is larger than ${maxBytes} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => {
      if (failed) return;
      const text =
        chunks.length === 1 ? (chunks[0] as Buffer).toString("utf8") : Buffer.concat(chunks).toString("utf8");
      try {
        resolve(JSON.parse(text) as unknown);
      } catch (err) {
        reject(badRequest(`JSON decode error: ${err instanceof Error ? err.message : String(err)}`));
      }
    });
    req.on("error", (err) => {
      if (failed) return;
      failed = true;
      reject(err);
    });
  });
}

/**
 * The session a request carries, as vLLM reads it: the body's `session_id`, else the X-Session-ID header. It is
 * echoed on the request's KV events and never changes placement or caching.
 */
export function requestSessionId(headers: IncomingHttpHeaders, body: unknown): string | undefined {
  if (typeof body === "object" && body !== null) {
    const value = (body as Record<string, unknown>)["session_id"];
    if (typeof value === "string" && value.length > 0) return value;
  }
  const header = headers["x-session-id"];
  const value = Array.isArray(header) ? header[0] : header;
  return value === undefined || value.length === 0 ? undefined : value;
}
