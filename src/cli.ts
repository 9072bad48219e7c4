#!/usr/bin/env node
// The agent-serve command. Sets one V8 flag before any other module loads, then runs the command line.
import { setFlagsFromString } from "node:v8";

// V8 gives a function its type-feedback vector only after it has run a few times. The gateway's first
// health probe and engine-metrics read run at start, before traffic, so they would leave no trace in the
// feedback of the undici and stream code they share with the request path; that code is then optimised for
// the request path's objects alone, and the next probe (5-10 s later) deoptimises some 40 hot functions,
// which take thousands of requests to recover. With feedback from the first call, the probes' objects are
// known before anything is optimised (bench/README.md, "Gateway overhead": the deopts, counted).
setFlagsFromString("--no-lazy-feedback-allocation");

await import("./cli/main.js");
