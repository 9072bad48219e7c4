// The engine core: vLLM-style continuous batching over the paged KV cache, one step at a time, on an injected clock.
//
// schedule() plans a step (running sequences first, then FCFS admissions, under a token budget and max_num_seqs,
// preempting the newest running sequence when the cache is full), caches the full blocks the step will compute
// (as vLLM's allocate_slots does) and prices it with the cost model; the driver lets that much simulated time pass
// and calls commit(), which applies the step: computed tokens, one sampled token per sequence whose known tokens
// are all computed, finished requests.
import { GatewayError } from "../core/errors.js";
import type { Clock } from "../core/clock.js";
import { addDecode, addPrefillChunk, emptyStepWork, stepDurationMs, type StepWork } from "./cost-model.js";
import { KvCacheManager } from "./kv-cache-manager.js";
import type { KvEventRecorder } from "./kv-event-recorder.js";
import type { CostModel } from "./profiles.js";
import type { EngineRequest } from "./request.js";

export interface SchedulerConfig {
  maxNumSeqs: number;
  maxNumBatchedTokens: number;
  kvCapacityBlocks: number;
  blockSizeTokens: number;
  cost: CostModel;
}

export interface ScheduledSequence {
  request: EngineRequest;
  numNewTokens: number;
}

export interface StepPlan {
  readonly sequences: readonly ScheduledSequence[];
  readonly work: StepWork;
  readonly durationMs: number;
  readonly startedMs: number;
}

/** What a committed step did to one request. */
export interface StepOutput {
  request: EngineRequest;
  /** Index of the reply token sampled in this step, or -1 when the step only advanced a prefill chunk. */
  tokenIndex: number;
  finished: boolean;
}

/** Running totals since the engine started; the metrics layer turns them into vLLM's counters. */
export interface SchedulerTotals {
  prefixCacheQueries: number;
  prefixCacheHits: number;
  promptTokens: number;
  generationTokens: number;
  preemptions: number;
  finishedStop: number;
  finishedLength: number;
  finishedAbort: number;
  steps: number;
}

export class Scheduler {
  readonly kv: KvCacheManager;
  /** FCFS queue; entries before `waitingHead` were already admitted (a deque without O(n) shifts). */
  private waiting: (EngineRequest | undefined)[] = [];
  private waitingHead = 0;
  private running: EngineRequest[] = [];
  private readonly byId = new Map<string, EngineRequest>();
  private inFlight: StepPlan | undefined;
  readonly totals: SchedulerTotals = {
    prefixCacheQueries: 0,
    prefixCacheHits: 0,
    promptTokens: 0,
    generationTokens: 0,
    preemptions: 0,
    finishedStop: 0,
    finishedLength: 0,
    finishedAbort: 0,
    steps: 0,
  };

  constructor(
    readonly config: SchedulerConfig,
    private readonly clock: Clock,
    kvEvents?: KvEventRecorder,
  ) {
    if (config.maxNumSeqs < 1) throw new RangeError("maxNumSeqs must be at least 1");
    if (config.maxNumBatchedTokens < 1) throw new RangeError("maxNumBatchedTokens must be at least 1");
    this.kv = new KvCacheManager(config.kvCapacityBlocks, config.blockSizeTokens, kvEvents);
  }

  get numRunning(): number {
    return this.running.length;
  }

  get numWaiting(): number {
    return this.waiting.length - this.waitingHead;
  }

  get hasWork(): boolean {
    return this.running.length > 0 || this.numWaiting > 0;
  }

  get kvCacheUsage(): number {
    return this.kv.pool.usage;
  }

  /** Queues a request (FCFS) and stamps its arrival. */
  add(request: EngineRequest): void {
    if (this.byId.has(request.id)) throw new RangeError(`duplicate request id '${request.id}'`);
    if (request.status !== "waiting") throw new RangeError(`request '${request.id}' was already submitted`);
    request.arrivalMs = this.clock.nowMs();
    this.byId.set(request.id, request);
    this.waiting.push(request);
  }

  /** Drops a request wherever it is and frees its blocks; false if it is unknown or already finished. */
  abort(requestId: string): boolean {
    const request = this.byId.get(requestId);
    if (!request) return false;
    if (request.status === "running") this.removeRunning(request);
    else this.removeWaiting(request);
    this.finish(request, "abort");
    return true;
  }

  /** Plans the next step, or returns undefined when there is nothing to compute. */
  schedule(): StepPlan | undefined {
    if (this.inFlight)
      throw new GatewayError("internal_error", "commit() the previous step before scheduling another");
    const sequences: ScheduledSequence[] = [];
    let budget = this.config.maxNumBatchedTokens;
    let preempted = false;

    for (let index = 0; index < this.running.length && budget > 0;) {
      const request = this.running[index] as EngineRequest;
      const numNew = Math.min(request.tokens.length - request.numComputedTokens, budget);
      let scheduled = true;
      while (!this.kv.allocateSlots(request, numNew)) {
        const victim = this.running.pop() as EngineRequest;
        this.preempt(victim);
        preempted = true;
        if (victim === request) {
          scheduled = false;
          break;
        }
      }
      if (!scheduled) break;
      this.kv.cacheBlocks(request, request.numComputedTokens + numNew);
      sequences.push({ request, numNewTokens: numNew });
      budget -= numNew;
      index += 1;
    }

    // As in vLLM, a step that had to preempt admits nobody new.
    while (!preempted && budget > 0 && this.numWaiting > 0 && this.running.length < this.config.maxNumSeqs) {
      const request = this.waiting[this.waitingHead] as EngineRequest;
      const cachedPrefix = this.kv.findCachedPrefix(request);
      const cachedTokens = cachedPrefix.length * this.config.blockSizeTokens;
      const numNew = Math.min(request.tokens.length - cachedTokens, budget);
      // Head-of-line blocking: FCFS never lets a later request overtake one that does not fit.
      if (!this.kv.allocateSlots(request, numNew, cachedPrefix)) break;
      this.popWaiting();
      request.numComputedTokens = cachedTokens;
      this.kv.cacheBlocks(request, cachedTokens + numNew);
      request.status = "running";
      if (request.numCachedTokens === undefined) {
        request.numCachedTokens = cachedTokens;
        request.firstScheduledMs = this.clock.nowMs();
        this.totals.prefixCacheQueries += request.tokens.length;
        this.totals.prefixCacheHits += cachedTokens;
      }
      this.running.push(request);
      sequences.push({ request, numNewTokens: numNew });
      budget -= numNew;
    }

    if (sequences.length === 0) return undefined;
    const work = emptyStepWork();
    for (const { request, numNewTokens } of sequences) {
      const isDecode = numNewTokens === 1 && request.numOutputTokens > 0 && !this.isRecomputing(request);
      if (isDecode) addDecode(work, request.numComputedTokens + 1);
      else addPrefillChunk(work, request.numComputedTokens, numNewTokens);
    }
    const plan: StepPlan = {
      sequences,
      work,
      durationMs: stepDurationMs(this.config.cost, work),
      startedMs: this.clock.nowMs(),
    };
    this.inFlight = plan;
    return plan;
  }

  /** Applies a planned step; the clock should now read the step's end. */
  commit(plan: StepPlan): StepOutput[] {
    if (plan !== this.inFlight)
      throw new GatewayError("internal_error", "commit() must receive the step schedule() returned last");
    this.inFlight = undefined;
    this.totals.steps += 1;
    const now = this.clock.nowMs();
    const outputs: StepOutput[] = [];
    let finishedAny = false;
    for (const { request, numNewTokens } of plan.sequences) {
      // Aborted or preempted while the step ran: its work is discarded.
      if (request.status !== "running") continue;
      // Its blocks were cached when the step was scheduled (cacheBlocks), as vLLM caches them.
      request.numComputedTokens += numNewTokens;
      if (request.numComputedTokens < request.tokens.length) {
        outputs.push({ request, tokenIndex: -1, finished: false });
        continue;
      }
      const done = request.appendNextToken();
      const tokenIndex = request.numOutputTokens - 1;
      this.totals.generationTokens += 1;
      if (request.firstTokenMs === undefined) {
        request.firstTokenMs = now;
        this.totals.promptTokens += request.promptLength;
      }
      if (done) {
        request.status = "finished";
        finishedAny = true;
        this.finish(request, request.plannedFinishReason);
      }
      outputs.push({ request, tokenIndex, finished: done });
    }
    if (finishedAny) this.running = this.running.filter((request) => request.status === "running");
    return outputs;
  }

  /** True while a preempted request is recomputing KV it had before (output tokens included). */
  private isRecomputing(request: EngineRequest): boolean {
    return request.numComputedTokens < request.tokens.length - 1;
  }

  private preempt(request: EngineRequest): void {
    this.kv.free(request);
    request.numComputedTokens = 0;
    request.status = "waiting";
    request.numPreemptions += 1;
    this.totals.preemptions += 1;
    // Back to the front of the queue: it keeps its FCFS position.
    if (this.waitingHead > 0) {
      this.waitingHead -= 1;
      this.waiting[this.waitingHead] = request;
    } else {
      this.waiting.unshift(request);
    }
  }

  private finish(request: EngineRequest, reason: "stop" | "length" | "abort"): void {
    this.kv.free(request);
    request.status = "finished";
    request.finishReason = reason;
    request.finishedMs = this.clock.nowMs();
    this.byId.delete(request.id);
    if (reason === "stop") this.totals.finishedStop += 1;
    else if (reason === "length") this.totals.finishedLength += 1;
    else this.totals.finishedAbort += 1;
  }

  private popWaiting(): void {
    this.waiting[this.waitingHead] = undefined;
    this.waitingHead += 1;
    // Compact now and then so the array does not grow without bound.
    if (this.waitingHead > 1024 && this.waitingHead * 2 > this.waiting.length) {
      this.waiting = this.waiting.slice(this.waitingHead);
      this.waitingHead = 0;
    }
  }

  private removeWaiting(request: EngineRequest): void {
    const index = this.waiting.indexOf(request, this.waitingHead);
    if (index >= 0) this.waiting.splice(index, 1);
  }

  private removeRunning(request: EngineRequest): void {
    const index = this.running.indexOf(request);
    if (index >= 0) this.running.splice(index, 1);
  }
}
