// Makes the policy named in config (admission.scheduling.policy) for one priority band; no registry.
import type { AttainedService } from "./attained-service.js";
import { FairPolicy } from "./fair-policy.js";
import { FifoPolicy } from "./fifo-policy.js";
import { LeastAttainedPolicy } from "./least-attained-policy.js";
import type { FlowItem, FlowPolicy, FlowPolicyName } from "./types.js";

export function createFlowPolicy<T extends FlowItem>(
  name: FlowPolicyName,
  service: AttainedService,
): FlowPolicy<T> {
  switch (name) {
    case "fifo":
      return new FifoPolicy<T>();
    case "fair":
      return new FairPolicy<T>();
    case "least-attained":
      return new LeastAttainedPolicy<T>(service);
  }
}
