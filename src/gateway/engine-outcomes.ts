// The one place where what real requests did on an engine feeds its health (the passive signal).
import type { Backend } from "../backends/backend.js";
import type { BackendRegistry } from "../backends/registry.js";

export class EngineOutcomes {
  constructor(
    private readonly registry: BackendRegistry,
    /** Asks the health checker for an early probe, so a dead engine is confirmed without waiting a period. */
    private readonly probeSoon: (backendId: string) => void,
  ) {}

  succeeded(backend: Backend): void {
    this.registry.recordOutcome(backend, true, "request");
  }

  failed(backend: Backend): void {
    this.registry.recordOutcome(backend, false, "request");
    this.probeSoon(backend.id);
  }
}
