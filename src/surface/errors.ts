// Request errors and the one place they become HTTP responses in vLLM's error envelope.
//
// Older vLLM releases answered `{"object":"error","message","type","param","code"}`; recent ones answer
// `{"error":{"message","type","param","code"}}`. The simulator sends both shapes in one object, so clients written
// against either (including the official openai SDK, which reads `error`) see what they expect.
import type { ServerResponse } from "node:http";

export type SimErrorType =
  "BadRequestError" | "NotFoundError" | "InternalServerError" | "ServiceUnavailableError";

/** A request the engine refuses: thrown by validation, mapped to HTTP by sendError. */
export class SimRequestError extends Error {
  override name = "SimRequestError";

  constructor(
    message: string,
    readonly status: number = 400,
    readonly type: SimErrorType = "BadRequestError",
    readonly param: string | null = null,
  ) {
    super(message);
  }
}

export function badRequest(message: string, param: string | null = null): SimRequestError {
  return new SimRequestError(message, 400, "BadRequestError", param);
}

/** vLLM's answer to a request naming a model this engine does not serve. */
export function checkServedModel(requested: string | undefined, served: string): void {
  if (requested !== undefined && requested !== served) {
    throw new SimRequestError(`The model \`${requested}\` does not exist.`, 404, "NotFoundError", "model");
  }
}

export function errorTypeForStatus(status: number): SimErrorType {
  if (status === 404) return "NotFoundError";
  if (status === 503) return "ServiceUnavailableError";
  return status >= 500 ? "InternalServerError" : "BadRequestError";
}

export interface ErrorEnvelope {
  object: "error";
  message: string;
  type: string;
  param: string | null;
  code: number;
  error: { message: string; type: string; param: string | null; code: number };
}

export function errorEnvelope(error: SimRequestError): ErrorEnvelope {
  const info = { message: error.message, type: error.type, param: error.param, code: error.status };
  return { object: "error", ...info, error: info };
}

/** Writes the error as a JSON response (or, if headers already went out, just ends the response). */
export function sendError(res: ServerResponse, error: SimRequestError): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  const body = JSON.stringify(errorEnvelope(error));
  res.writeHead(error.status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
  });
  res.end(body);
}

/** FastAPI's answers for unknown routes and wrong methods, which vLLM serves unchanged. */
export function sendRouteError(res: ServerResponse, status: 404 | 405): void {
  const body = JSON.stringify({ detail: status === 404 ? "Not Found" : "Method Not Allowed" });
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}
