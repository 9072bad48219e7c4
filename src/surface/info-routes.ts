// The engine routes that are not generation (health, version, metrics, models), as vLLM answers them;
// shared by the simulated engine and the real llama.cpp engine.
import { randomUUID } from "node:crypto";
import type { ServerResponse } from "node:http";
import { writeJson } from "../core/write-json.js";
import { modelList } from "./openai-shapes.js";

export interface InfoSource {
  version: string;
  model: string;
  maxModelLen: number;
  metrics: { render(): Promise<string>; readonly contentType: string };
  nowSeconds(): number;
}

/** Answers `path` if it is an info route and returns true; false leaves the request to the caller. */
export function answerInfoRoute(
  path: string,
  res: ServerResponse,
  source: InfoSource,
  fail: (err: unknown) => void,
): boolean {
  switch (path) {
    case "/health":
    case "/ping":
      res.writeHead(200, { "content-length": 0 });
      res.end();
      return true;
    case "/version":
      writeJson(res, 200, { version: source.version });
      return true;
    case "/metrics":
      source.metrics.render().then((text) => {
        res.writeHead(200, { "content-type": source.metrics.contentType });
        res.end(text);
      }, fail);
      return true;
    case "/v1/models":
      writeJson(
        res,
        200,
        modelList(
          source.model,
          source.maxModelLen,
          source.nowSeconds(),
          `modelperm-${randomUUID().replaceAll("-", "")}`,
        ),
      );
      return true;
    default:
      return false;
  }
}
