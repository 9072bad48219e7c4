// Reads a request body into one Buffer, refusing more than the configured size before buffering it.
import type { IncomingMessage } from "node:http";
import { GatewayError } from "../core/errors.js";

export async function readBody(req: IncomingMessage, maxBytes: number): Promise<Buffer> {
  const declared = req.headers["content-length"];
  if (declared !== undefined && Number(declared) > maxBytes) {
    throw new GatewayError(
      "body_too_large",
      `request body of ${declared} bytes exceeds the ${maxBytes}-byte limit`,
    );
  }
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > maxBytes) {
      throw new GatewayError("body_too_large", `request body exceeds the ${maxBytes}-byte limit`);
    }
    chunks.push(chunk);
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total);
}
