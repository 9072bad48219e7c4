// The one error family: every error the project throws on purpose is a GatewayError with a stable code.
import { describe, expect, it } from "vitest";
import { SlotUnavailableError } from "../../src/admission/backend-slots.js";
import { UsageError } from "../../src/cli/command.js";
import { ConfigError } from "../../src/config/load.js";
import { GatewayError, toGatewayError } from "../../src/core/errors.js";
import { EngineUnavailableError } from "../../src/engine/llama-binding.js";
import { ClientClosedError } from "../../src/gateway/server.js";
import { AttemptFailure } from "../../src/gateway/upstream-failure.js";

describe("the error family", () => {
  const cases: [GatewayError, string, number][] = [
    [new ClientClosedError("gone"), "client_closed", 499],
    [new SlotUnavailableError("backend marked down"), "backend_unavailable", 503],
    [new AttemptFailure("upstream_timeout", "late", true), "upstream_timeout", 504],
    [new AttemptFailure("upstream_error", "reset", false), "upstream_error", 502],
    [new ConfigError("gateway.yaml", ["backends[0].id: required"]), "invalid_config", 400],
    [new UsageError("unknown flag --x"), "usage_error", 400],
    [new EngineUnavailableError("no binary"), "engine_unavailable", 503],
  ];

  it.each(cases)("%s has its code, status and the envelope", (error, code, status) => {
    expect(error).toBeInstanceOf(GatewayError);
    expect(error.code).toBe(code);
    expect(error.status).toBe(status);
    expect(toGatewayError(error)).toBe(error);
    expect(error.toJSON().error).toMatchObject({ code, message: error.message });
  });

  it("keeps each subclass's own facts and name", () => {
    const config = new ConfigError("f.yaml", ["a: bad", "b: bad"]);
    expect(config.name).toBe("ConfigError");
    expect(config.problems).toEqual(["a: bad", "b: bad"]);
    expect(config.message).toContain("  a: bad\n  b: bad");
    expect(new AttemptFailure("upstream_error", "x", true).healthSignal).toBe(true);
  });

  it("turns anything else into an internal error that leaks nothing", () => {
    const error = toGatewayError(new TypeError("secret detail"));
    expect(error.code).toBe("internal_error");
    expect(error.message).not.toContain("secret");
  });
});
