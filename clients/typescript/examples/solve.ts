/**
 * Asks one question and prints each stage as it happens, then the answer.
 *
 *   npm run example -- "Tom has 3 boxes of 12 eggs. He uses 5. How many are left?"
 *   npm run example -- --address 127.0.0.1:50051 --num-drafts 3 --max-new-tokens 96 --timeout-s 300 "…"
 *
 * The address defaults to $DELIBERATE_ADDRESS, else 127.0.0.1:50051 (`deliberate up`'s Scheduler).
 */
import { parseArgs } from "node:util";

import { createClient, DeliberateError, SolveStatus, type SolveRequestInit } from "../src/index.js";

const { values: options, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    address: { type: "string", default: process.env.DELIBERATE_ADDRESS ?? "127.0.0.1:50051" },
    "num-drafts": { type: "string", default: "0" },
    "max-new-tokens": { type: "string" },
    "refine-max-new-tokens": { type: "string" },
    "timeout-s": { type: "string", default: "300" },
  },
});

const prompt = positionals.join(" ");
if (!prompt) {
  console.error('usage: npm run example -- [--address host:port] [--num-drafts N] "question"');
  process.exit(2);
}

const optionalInt = (text: string | undefined) => (text === undefined ? undefined : Number.parseInt(text, 10));
const request: SolveRequestInit = {
  prompt,
  numDrafts: Number.parseInt(options["num-drafts"], 10),
  sampling: { maxNewTokens: optionalInt(options["max-new-tokens"]) },
  refineSampling: { maxNewTokens: optionalInt(options["refine-max-new-tokens"]) },
};

const client = createClient(options.address);
try {
  for await (const event of client.solveStream(request, { timeoutMs: Number(options["timeout-s"]) * 1000 })) {
    switch (event.case) {
      case "roundStarted":
        console.log(`round ${event.value.round}: ${event.value.numDrafts} drafts (${event.value.reason})`);
        break;
      case "draftGenerated":
        console.log(`  draft #${event.value.draft?.index} generated (${event.value.draft?.usage?.completionTokens} tokens)`);
        break;
      case "draftVerified": {
        const verdict = event.value.verdict;
        const failed = verdict?.ruleResults.find((rule) => !rule.passed);
        console.log(`  ${verdict?.draftId} ${verdict?.valid ? "valid" : "invalid"}, score ${verdict?.score.toFixed(2)}${failed ? `: ${failed.message}` : ""}`);
        break;
      }
      case "draftSelected":
        console.log(`  selected ${event.value.draftId} (rank ${event.value.rank})`);
        break;
      case "draftDiscarded":
        console.log(`  discarded ${event.value.draftId}: ${event.value.reason}`);
        break;
      case "thinkingTrace":
        console.log(event.value.text);
        break;
      case "refineChunk":
        process.stdout.write(event.value.text);
        break;
      case "final":
        console.log(`\n\n${SolveStatus[event.value.status]}: ${event.value.statusReason}`);
        console.log(`request ${event.value.requestId}, trace ${event.value.traceId}`);
        break;
    }
  }
} catch (error) {
  if (!(error instanceof DeliberateError)) throw error;
  console.error(`error: ${error.message}${error.field ? ` (field ${error.field})` : ""}`);
  process.exitCode = 1;
} finally {
  client.close();
}
