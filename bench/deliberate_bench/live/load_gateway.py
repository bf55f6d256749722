"""The load benchmark's `gateway` row: the default round asked through the OpenAI-compatible gateway (HTTP), as a
client in another language would ask it. The gateway's own deadline is the load's (`DELIBERATE_REQUEST_TIMEOUT_S`),
so a request past it ends 504 as a gRPC one ends DEADLINE_EXCEEDED; a refusal is a 429 whose `retry-after-ms` the
client waits before its one retry (the gateway passes no retry ticket: the retry queues afresh)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

# HTTP statuses as the gRPC codes the other rows count (gateway/errors.py maps the other way).
STATUS_CODES = {429: "RESOURCE_EXHAUSTED", 504: "DEADLINE_EXCEEDED", 503: "UNAVAILABLE"}


def through_gateway(url: str, call, item, max_new_tokens: int, timeout: float) -> None:
    """One chat completion of `item` (load_items.Item, its schema, context and constraints as the gateway takes
    them); fills `call` (load.Call) as `Sender.solve` does."""
    body = {"model": "deliberate", "messages": [{"role": "user", "content": item.prompt}],
            "request_id": call.request_id, "max_draft_tokens": max_new_tokens, **item.gateway}  # fmt: skip
    request = urllib.request.Request(f"{url}/v1/chat/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            answer = json.load(reply)
    except urllib.error.HTTPError as error:
        call.code = STATUS_CODES.get(error.code, f"HTTP_{error.code}")
        if error.code == 429:
            hint = error.headers.get("retry-after-ms")
            call.refused, call.hinted = True, hint is not None
            if hint is not None:
                time.sleep(int(hint) / 1000)
        return
    except TimeoutError:
        call.code = "DEADLINE_EXCEEDED"  # the client's own deadline: the gateway did not answer in time
        return
    except urllib.error.URLError as error:
        call.code = "DEADLINE_EXCEEDED" if isinstance(error.reason, TimeoutError) else "UNAVAILABLE"
        return
    call.code = "OK"
    call.right = item.right(answer["choices"][0]["message"]["content"])
    said = answer.get("deliberate") or {}  # drafts started, as the gRPC rows count them; the maximum is num_drafts
    call.drafts = (said.get("round_plan") or {}).get("drafts_started") or said.get("num_drafts", 0)
