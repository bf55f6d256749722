// The error mapping alone: no server needed.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Code, ConnectError } from "@connectrpc/connect";

import { DeliberateError, fieldPath } from "../src/index.js";

test("fieldPath reads the field the server's message begins with", () => {
  assert.equal(fieldPath("num_drafts: must be in [0, 8], got 99"), "num_drafts");
  assert.equal(fieldPath("sampling.temperature: must be in [0, 2], got 9.0"), "sampling.temperature");
  assert.equal(fieldPath("constraints[0].cel_expression: Failed to parse expression"), "constraints[0].cel_expression");
  assert.equal(fieldPath("strategy_hints[]: at most 500 characters"), "strategy_hints[]");
  assert.equal(fieldPath("no field here"), undefined);
  assert.equal(fieldPath("two words: are not a path"), undefined);
});

test("an INVALID_ARGUMENT error names its field and gRPC status", () => {
  const error = new DeliberateError(new ConnectError("num_drafts: must be in [0, 8], got 99", Code.InvalidArgument));
  assert.equal(error.code, Code.InvalidArgument);
  assert.equal(error.code, 3, "numerically gRPC's code");
  assert.equal(error.status, "INVALID_ARGUMENT");
  assert.equal(error.field, "num_drafts");
  assert.equal(error.detail, "num_drafts: must be in [0, 8], got 99");
  assert.equal(error.message, "INVALID_ARGUMENT: num_drafts: must be in [0, 8], got 99");
});

test("other statuses carry no field, even when the message looks like one", () => {
  const error = new DeliberateError(new ConnectError("drafter unavailable: connection refused", Code.Unavailable));
  assert.equal(error.status, "UNAVAILABLE");
  assert.equal(error.field, undefined);
  assert.equal(new DeliberateError(new ConnectError("late", Code.DeadlineExceeded)).status, "DEADLINE_EXCEEDED");
});
