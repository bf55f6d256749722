/**
 * A thin client over deliberate's SchedulerService (deliberate.scheduler.v1), speaking the gRPC protocol over
 * HTTP/2 (@connectrpc/connect-node). The messages are the generated ones in ./gen; requests may be plain objects.
 *
 *   const client = createClient("127.0.0.1:50051");
 *   const response = await client.solve({ prompt: "How many eggs are left?", numDrafts: 3 }, { timeoutMs: 60_000 });
 *   for await (const event of client.solveStream({ prompt: "…" })) if (event.case === "refineChunk") …
 */
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient as createConnectClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";

import {
  Outcome,
  SchedulerService,
  SolveRequestSchema,
  type GetStateResponse,
  type SolveResponse,
  type SolveStreamResponse,
  type SubmitFeedbackResponse,
} from "./gen/deliberate/scheduler/v1/scheduler_service_pb.js";

export * from "./gen/deliberate/scheduler/v1/scheduler_service_pb.js";
export * from "./gen/deliberate/common/v1/common_pb.js";
export { Code } from "@connectrpc/connect";

/** A SolveRequest as a plain object (camelCase fields, all optional but `prompt`) or a built message. */
export type SolveRequestInit = MessageInitShape<typeof SolveRequestSchema>;

/**
 * One stage event of SolveStream: the proto's `event` oneof, discriminated by `case`. In the documented order
 * (docs/scheduler.md, "SolveStream event order"): roundStarted, then draftGenerated / draftVerified interleaved,
 * then draftSelected / draftDiscarded, then thinkingTrace, then consensusPrefix (when drafts share an opening), then
 * refineChunk, and last exactly one final.
 */
export type SolveEvent = Exclude<SolveStreamResponse["event"], { case: undefined }>;

export interface CallOptions {
  /** The gRPC deadline, relative to the call's start; the server bounds every stage by it. */
  timeoutMs?: number;
  /** Cancels the call (the Scheduler then stops drafting and refining). */
  signal?: AbortSignal;
}

export interface ClientOptions {
  /** The deadline of calls that give none (the server's own default is 300 s). */
  defaultTimeoutMs?: number;
}

/** A failed call: the gRPC status, and for INVALID_ARGUMENT the request field the server named. */
export class DeliberateError extends Error {
  /** The gRPC status code (numerically the same as gRPC's). */
  readonly code: Code;
  /** The gRPC status name, e.g. "INVALID_ARGUMENT" or "DEADLINE_EXCEEDED". */
  readonly status: string;
  /** The server's message as sent, e.g. "num_drafts: must be in [0, 8], got 99". */
  readonly detail: string;
  /** For INVALID_ARGUMENT: the field path the message begins with, e.g. "num_drafts" or "constraints[0].cel_expression". */
  readonly field: string | undefined;

  constructor(cause: ConnectError) {
    const status = statusName(cause.code);
    super(`${status}: ${cause.rawMessage}`, { cause });
    this.name = "DeliberateError";
    this.code = cause.code;
    this.status = status;
    this.detail = cause.rawMessage;
    this.field = cause.code === Code.InvalidArgument ? fieldPath(cause.rawMessage) : undefined;
  }
}

/** "num_drafts: must be …" → "num_drafts"; the server's INVALID_ARGUMENT messages begin with the field path. */
const FIELD_PATH = /^([A-Za-z_]\w*(?:\[\d*\])?(?:\.[A-Za-z_]\w*(?:\[\d*\])?)*): /;

export function fieldPath(message: string): string | undefined {
  return FIELD_PATH.exec(message)?.[1];
}

/** Code.DeadlineExceeded → "DEADLINE_EXCEEDED", gRPC's spelling. */
function statusName(code: Code): string {
  return Code[code].replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
}

function wrapped(error: unknown): unknown {
  return error instanceof ConnectError ? new DeliberateError(error) : error;
}

export class DeliberateClient {
  private readonly scheduler: Client<typeof SchedulerService>;

  private readonly sessions: Http2SessionManager;

  /** A client of the Scheduler at `address`: "host:port" (plaintext), or an http:// or https:// URL. */
  constructor(address: string, options: ClientOptions = {}) {
    const baseUrl = /^https?:\/\//.test(address) ? address : `http://${address}`;
    this.sessions = new Http2SessionManager(baseUrl);
    const transport = createGrpcTransport({
      baseUrl,
      sessionManager: this.sessions,
      defaultTimeoutMs: options.defaultTimeoutMs,
    });
    this.scheduler = createConnectClient(SchedulerService, transport);
  }

  /** Solves one problem and returns the whole result. */
  async solve(request: SolveRequestInit, options: CallOptions = {}): Promise<SolveResponse> {
    try {
      return await this.scheduler.solve(request, options);
    } catch (error) {
      throw wrapped(error);
    }
  }

  /** Solves one problem, yielding its stage events as they happen; the last one is `final`. */
  async *solveStream(request: SolveRequestInit, options: CallOptions = {}): AsyncGenerator<SolveEvent> {
    try {
      for await (const response of this.scheduler.solveStream({ request: create(SolveRequestSchema, request) }, options)) {
        if (response.event.case !== undefined) {
          yield response.event; // an event this client does not know (a newer server's) has no case: skipped
        }
      }
    } catch (error) {
      throw wrapped(error);
    }
  }

  /** Records whether the answer of a request was accepted; the selection weights learn from it. */
  async submitFeedback(requestId: string, accepted: boolean, options: CallOptions = {}): Promise<SubmitFeedbackResponse> {
    const outcome = accepted ? Outcome.ACCEPTED : Outcome.REJECTED;
    try {
      return await this.scheduler.submitFeedback({ requestId, outcome }, options);
    } catch (error) {
      throw wrapped(error);
    }
  }

  /** The Scheduler's weights, draft count and why, load, Verifier health and feedback counts. */
  async getState(options: CallOptions = {}): Promise<GetStateResponse> {
    try {
      return await this.scheduler.getState({}, options);
    } catch (error) {
      throw wrapped(error);
    }
  }

  /** Closes the HTTP/2 connection; calls in flight fail. An idle client does not keep Node running anyway. */
  close(): void {
    this.sessions.abort();
  }
}

/** A client of the Scheduler at `address`: "host:port" (plaintext), or an http:// or https:// URL. */
export function createClient(address: string, options: ClientOptions = {}): DeliberateClient {
  return new DeliberateClient(address, options);
}
