// docs/clients.md's TypeScript example (test.sh type-checks it; test/clients-doc.test.ts keeps the page equal to it): npx tsx examples/usage.ts
import { createClient, DeliberateError, SolveStatus } from "../src/index.js";

const client = createClient(process.env.DELIBERATE_ADDRESS ?? "127.0.0.1:50051");
const request = { prompt: "What is 12 + 30?", numDrafts: 2, sampling: { maxNewTokens: 48 } };
const response = await client.solve(request, { timeoutMs: 120_000 }); // the gRPC deadline
console.log(response.answer);
await client.submitFeedback(response.requestId, true); // the selection weights learn from it

for await (const event of client.solveStream(request)) {
  // event.case: roundStarted | draftGenerated | draftVerified | draftSelected | draftDiscarded | thinkingTrace |
  //   consensusPrefix | refineChunk | final
  if (event.case === "refineChunk") process.stdout.write(event.value.text);
  if (event.case === "final") console.log(`\n${event.value.status === SolveStatus.VERIFIED ? "verified" : "not verified"}`);
}

try {
  await client.solve({ ...request, numDrafts: 99 });
} catch (error) {
  if (!(error instanceof DeliberateError)) throw error;
  console.log(error.status, error.field); // INVALID_ARGUMENT num_drafts
}
client.close();
