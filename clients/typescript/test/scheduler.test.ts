// Against a real running stack: the Scheduler at $DELIBERATE_ADDRESS (`make test-clients` starts one).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, describe, test } from "node:test";

import {
  Code,
  createClient,
  DeliberateError,
  SolveStatus,
  type SolveEvent,
  type SolveRequestInit,
} from "../src/index.js";

const ADDRESS = process.env.DELIBERATE_ADDRESS;
const SKIP = ADDRESS ? false : "DELIBERATE_ADDRESS is not set: no stack to test against (make test-clients starts one)";
const TIMEOUT_MS = 240_000;

/** Small budgets: the tests check the contract, not the answer. */
function shortRequest(prompt: string, { numDrafts = 2, maxNewTokens = 24, temperature = undefined as number | undefined } = {}): SolveRequestInit {
  return {
    prompt,
    numDrafts,
    sampling: { maxNewTokens, temperature, seed: 7n },
    refineSampling: { maxNewTokens: 16 },
  };
}

async function rejection(call: () => Promise<unknown>): Promise<DeliberateError> {
  try {
    await call();
  } catch (error) {
    assert.ok(error instanceof DeliberateError, `expected a DeliberateError, got ${error}`);
    return error;
  }
  assert.fail("the call succeeded");
}

describe("SchedulerService through the TypeScript client", { skip: SKIP }, () => {
  const client = createClient(ADDRESS ?? "");
  after(() => client.close());

  test("solve returns an answer with its drafts, and feedback is taken once", { timeout: TIMEOUT_MS }, async () => {
    const requestId = `ts-${randomUUID()}`;
    const response = await client.solve({ ...shortRequest("What is 12 + 30?"), requestId }, { timeoutMs: TIMEOUT_MS });

    assert.equal(response.requestId, requestId);
    assert.ok(response.answer.length > 0);
    assert.notEqual(response.status, SolveStatus.UNSPECIFIED);
    assert.notEqual(response.status, SolveStatus.FAILED, response.statusReason);
    assert.equal(response.numDrafts, 2);
    assert.equal(response.drafts.length, 2 * response.rounds);
    const draftIds = new Set(response.drafts.map((report) => report.draft?.id));
    assert.ok(response.selectedDraftIds.length >= 1);
    assert.ok(response.selectedDraftIds.every((id) => draftIds.has(id)), "selected drafts are among the drafts");
    assert.ok((response.usage?.completionTokens ?? 0) > 0);
    assert.match(response.traceId, /^[0-9a-f]{32}$/);

    const feedback = await client.submitFeedback(requestId, true);
    assert.ok(feedback.outcomesUntilRefit >= 0);
    const again = await rejection(() => client.submitFeedback(requestId, true));
    assert.equal(again.code, Code.NotFound, "a decision takes feedback once");
    assert.equal(again.status, "NOT_FOUND");
  });

  test("solveStream events follow the documented order", { timeout: TIMEOUT_MS }, async () => {
    const events: SolveEvent[] = [];
    for await (const event of client.solveStream(shortRequest("Tom has 3 boxes of 12 eggs. He uses 5. How many are left?"), {
      timeoutMs: TIMEOUT_MS,
    })) {
      events.push(event);
    }
    const kinds = events.map((event) => event.case);
    const final = events.at(-1);
    assert.ok(final?.case === "final", `the last event is final: ${kinds}`);
    assert.equal(kinds.filter((kind) => kind === "final").length, 1);

    // Each round: round started, then its drafts generated and verified, interleaved (a draft after its generation).
    const rounds = kinds.filter((kind) => kind === "roundStarted").length;
    assert.equal(kinds[0], "roundStarted");
    assert.equal(rounds, final.value.rounds);
    const generated = new Map<string, number>();
    let round = -1;
    events.forEach((event, at) => {
      if (event.case === "roundStarted") {
        assert.equal(event.value.round, round + 1, "rounds count up from 0");
        assert.equal(event.value.numDrafts, 2);
        round = event.value.round;
      } else if (event.case === "draftGenerated") {
        generated.set(event.value.draft?.id ?? "", at);
      } else if (event.case === "draftVerified") {
        const id = event.value.verdict?.draftId ?? "";
        assert.ok((generated.get(id) ?? Infinity) < at, `draft ${id} verified after it was generated`);
      }
    });
    assert.equal(generated.size, 2 * rounds);
    assert.equal(kinds.filter((kind) => kind === "draftVerified").length, 2 * rounds);

    // Then every draft once, selected or discarded; the thinking trace; then the answer in chunks; then final.
    const lastVerified = kinds.lastIndexOf("draftVerified");
    const firstChunk = kinds.indexOf("refineChunk");
    assert.ok(firstChunk > lastVerified, "refinement streams after verification");
    // The drafts' consensus prefix, when they share an opening, comes last before refinement.
    const consensusAt = kinds.indexOf("consensusPrefix");
    assert.ok(consensusAt === -1 || consensusAt === firstChunk - 1, `${kinds}`);
    // The thinking trace right after selection, beside the answer: never one of its chunks.
    const traceAt = kinds.indexOf("thinkingTrace");
    assert.equal(traceAt, (consensusAt === -1 ? firstChunk : consensusAt) - 1, `${kinds}`);
    assert.ok(final.value.thinkingTrace.startsWith("[THINKING_TRACE:") && !final.value.answer.includes("THINKING_TRACE"));
    const verdicts = events.slice(lastVerified + 1, traceAt);
    assert.ok(verdicts.every((event) => event.case === "draftSelected" || event.case === "draftDiscarded"), `${kinds}`);
    const decided = verdicts.map((event) => (event.case === "draftSelected" || event.case === "draftDiscarded" ? event.value.draftId : ""));
    assert.deepEqual(new Set(decided), new Set(generated.keys()), "every draft is selected or discarded, once");
    assert.equal(decided.length, generated.size);
    // Decisions stream in draft order; each selected one carries its rank (0 = best), the order of selectedDraftIds.
    const selected = verdicts
      .flatMap((event) => (event.case === "draftSelected" ? [event.value] : []))
      .sort((a, b) => a.rank - b.rank)
      .map((choice) => choice.draftId);
    assert.deepEqual(selected, final.value.selectedDraftIds);
    assert.ok(kinds.slice(firstChunk, -1).every((kind) => kind === "refineChunk"), `${kinds}`);

    const streamed = events.map((event) => (event.case === "refineChunk" ? event.value.text : "")).join("");
    if (!final.value.statusReason.includes("refinement rejected")) {
      assert.equal(streamed, final.value.answer); // else the safety net answered with the best verified draft
    }
  });

  test("an expired deadline is DEADLINE_EXCEEDED", { timeout: TIMEOUT_MS }, async () => {
    const request = shortRequest("Write the first 50 prime numbers, one per line.", { numDrafts: 3, maxNewTokens: 200 });
    const error = await rejection(() => client.solve(request, { timeoutMs: 1500 }));
    assert.equal(error.code, Code.DeadlineExceeded);
    assert.equal(error.status, "DEADLINE_EXCEEDED");
  });

  test("INVALID_ARGUMENT names the field, for solve and for the stream", { timeout: 60_000 }, async () => {
    const tooMany = await rejection(() => client.solve(shortRequest("What is 2 + 2?", { numDrafts: 99 }), { timeoutMs: 30_000 }));
    assert.equal(tooMany.code, Code.InvalidArgument);
    assert.equal(tooMany.field, "num_drafts");
    assert.match(tooMany.detail, /^num_drafts: /);

    const hot = shortRequest("What is 2 + 2?", { temperature: 9 });
    assert.equal((await rejection(() => client.solve(hot, { timeoutMs: 30_000 }))).field, "sampling.temperature");

    const streamed = await rejection(async () => {
      for await (const _ of client.solveStream({ prompt: "" }, { timeoutMs: 30_000 })) {
        // no event comes: the request is refused before any work
      }
    });
    assert.equal(streamed.code, Code.InvalidArgument);
    assert.equal(streamed.field, "prompt");
  });
});
