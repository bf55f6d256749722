from __future__ import annotations

from functools import cached_property
from typing import Literal

from pydantic import Field, field_validator

from ..core.balancing import grpc_target
from ..core.config import CommonSettings, DownstreamTlsSettings, DraftLimits, GenerationLimits, PromptLimits
from ..core.ports import DRAFTER_PORTS, LOCALHOST, REFINER_PORTS, SCHEDULER_PORTS, VERIFIER_PORTS
from ..selection import get_policy
from ..selection.adaptive import AdaptivePolicy
from ..selection.confidence import parse_floors


class SchedulerSettings(DraftLimits, GenerationLimits, PromptLimits, DownstreamTlsSettings, CommonSettings):
    """Scheduler: the client-facing service; draft → verify → select → refine."""

    port: int = Field(SCHEDULER_PORTS.grpc, description="gRPC port (the one clients call).")
    metrics_port: int = Field(
        SCHEDULER_PORTS.metrics, ge=0, description="Port of the Prometheus GET /metrics endpoint; 0 = none."
    )
    max_in_flight: int = Field(
        8,
        ge=1,
        description="Solve and SolveStream calls in flight at once; one beyond is refused at once with "
        "RESOURCE_EXHAUSTED and a retry hint (docs/reliability.md). Past 8 solves the Drafter's 8 engine slots "
        "only queue more drafts and every solve slows.",
    )
    admit_by_deadline: bool = Field(
        True,
        description="Refuse a Solve at once (RESOURCE_EXHAUSTED with a retry hint) when the solves in flight make "
        "its deadline out of reach: (solves in flight + 1) × the recent work of one solve alone, each solve's "
        "duration over the solves it shared the cores with (docs/scaling.md). Off: only --max-in-flight refuses.",
    )
    drafter_address: str = Field(
        DRAFTER_PORTS.local_address,
        description="The Drafter: host:port (one connection), or its replicas, balanced round_robin with health "
        f"checking: a comma list of IP:port, or a gRPC target such as dns:///drafter-headless:{DRAFTER_PORTS.grpc} "
        "(docs/deploy.md#load-balancing).",
    )
    verifier_address: str = Field(
        VERIFIER_PORTS.local_address, description="The Verifier: host:port, or its replicas as for --drafter-address."
    )
    refiner_address: str = Field(
        REFINER_PORTS.local_address, description="The Refiner: host:port, or its replicas as for --drafter-address."
    )
    auth_tokens_file: str = Field(
        "",
        description="File of accepted bearer tokens, one per line: `TOKEN` (every permission) or "
        "`TOKEN solve,feedback,state`; calls without a listed token get UNAUTHENTICATED. Empty: no authentication.",
    )
    default_num_drafts: int = Field(5, description="Drafts per request when no load monitor decides (tests).")
    max_selected: int = Field(2, description="How many of the best drafts go to the Refiner.")
    selection_policy: str = Field(
        "weighted",
        description="How drafts are ranked when the request names no policy (docs/selection.md): `weighted` (the "
        "risk-adjusted formula with learned weights), `best_of` (verifier score) or `majority` (a plain vote).",
    )
    program_drafts: int = Field(
        2,
        ge=0,
        description="How many of each round's drafts are programs (a short Python program printing the answer) "
        "when the request does not say (SolveRequest.program_drafts): the round's last ones, at most N - 1 (one "
        "draft stays prose). 0: prose only. Requests with an output schema: --decision-program-drafts. The default "
        "2 is the mix of 5 chosen on the tuning problems' replay (make bench-early-stop-bound: the cheapest within "
        "1 point).",
    )
    decision_program_drafts: int = Field(
        1,
        ge=0,
        description="How many of each round's drafts are decision programs (a program that reads the request's data "
        "as `ctx` and prints the JSON plan) for a request with an output schema that does not say "
        "(SolveRequest.program_drafts): the round's last ones, at most N - 1. A re-draft round of a decision moves "
        "half its prose drafts to programs, unless its programs all failed to run to a plan. 0: prose only. The "
        "default 1 is the rule's choice on the tuning instances of make eval-business (programs were not more often "
        "feasible than prose: docs/business-cases.md).",
    )
    bounded_decision_program_drafts: int = Field(
        4,
        ge=0,
        description="--decision-program-drafts for a decision whose rule pack solves the question exactly (its "
        "plans are scored against the optimum: the ad pack): a selection that decision programs hand to the exact "
        "engine they call (best_rows). At most N - 1. The default 4 (N - 1 of the default 5) is the same rule's "
        "choice on the ad tuning instances (one program feasible on 20 of 20, one prose draft on 2 of 4: "
        "docs/business-cases.md).",
    )
    cross_modal_quorum: bool = Field(
        True,
        description="With early stopping, a valid prose draft and a valid program that agree end the round too, "
        "besides the default quorum of ceil(N/2) agreeing drafts (a request that sets its quorum gets exactly "
        "that). On by default: chosen on the tuning problems' replay (make bench-early-stop-bound).",
    )
    confidence_stop: bool = Field(
        False,
        description="Stop a draft once the model's token confidence over its last 16 tokens falls below its kind's "
        "floor (DeepConf's stop) when the request does not say (SolveRequest.confidence_stop; docs/scheduler.md, "
        '"The confidence stop"). Off by default: on the tuning problems\' replay (make bench-early-stop-bound) '
        "the default mix with it lost more than the 1 point allowed. Only drafts whose model has floors stop: the "
        "Drafter sends those of its model's profile (the default model's are calibrated; others have none) "
        "unless --confidence-floors sets them.",
    )
    confidence_floors: str = Field(
        "",
        description="The confidence stop's floor per kind of draft, kind=value (e.g. prose=6.351,program=6.397: "
        "the default model's, the 5th percentile of the lowest 16-token window of the right drafts on the tuning "
        "problems, make bench-adaptive-stop's confidence_limits), for every draft whatever its model; a kind not "
        "listed is never stopped. Empty: the floors of the Drafter's model profile.",
    )
    draft_count: Literal["cascade", "all_at_once", "adaptive"] = Field(
        "cascade",
        description="How a round starts its drafts when the request does not say (SolveRequest.draft_count): "
        "`cascade` (a greedy program and prose draft first, more drafts a few at a time only while they disagree or "
        'fail: --cascade-policy; docs/scheduler.md, "The cascade"), `all_at_once` (N drafts together, early '
        "stopping), or `adaptive`: a few first, then one at a time until valid drafts agree (--adaptive-policy). "
        "Rounds on several Drafter replicas start all at once.",
    )
    cascade_policy: str = Field(
        "cscscscs/start1/q2+x/trust7.8/greedy",
        description="The cascade's kinds in order (s prose, c program), its first stage (start), the drafts each "
        "later stage adds (step), what settles it (q: valid drafts agreeing; +x: a prose draft and a program "
        "agreeing; trust: one valid draft whose weakest 16-token window of token confidence reaches the level) and "
        "greedy: the first stage at temperature 0. The default — a greedy program alone, trusted at confidence 7.8, "
        "else a prose draft, a program, … one at a time until two agree — is the one chosen on the 1.5B model's "
        "recorded tuning drafts (make bench-cascade); its trust level is that model's confidence scale.",
    )
    decision_cascade_policy: str = Field(
        "cscscscs/start1/step2/q2/greedy",
        description="The cascade of a request with an output schema (a decision): a greedy decision program first, "
        "alone — it ends the round when its plan passes every rule (at the pack's bound where the pack has one) — "
        "then prose drafts and programs two at a time. Its quorum is unused: a decision settles on a plan.",
    )
    cascade_max_drafts: int = Field(
        4,
        ge=1,
        description="The most drafts a cascade starts (its first stage always runs; under saturation it is the "
        "only stage); a request's num_drafts lowers it. The default 4 is the replay's choice (make bench-cascade).",
    )
    cascade_selection_policy: str = Field(
        "majority",
        description="How a free-text cascade's drafts are ranked when the request names no policy: `majority` "
        "(the answer its drafts agree on) — on the tuning replay the weighted formula lost 8.5 points to it on the "
        "same drafts (make bench-cascade). Decisions and rounds all at once keep --selection-policy.",
    )
    adaptive_policy: str = Field(
        "csscc/start1/q2+x",
        description="The order and stop of adaptive rounds: kinds in order (s prose, c program), drafts started at "
        "once, the quorum of agreeing valid drafts, +x: a prose draft and a program agreeing settle too.",
    )
    final_text: Literal["pass_through", "refine", "prefix"] = Field(
        "pass_through",
        description="How the selected drafts become the answer a person reads, unless the request says "
        "(SolveRequest.final_text): `pass_through` (the best draft, its final line in plain text, no Refiner "
        "call), `refine` (the Refiner writes a short worked solution) or `prefix` (the Refiner continues the "
        "drafts' consensus prefix, streamed right after selection). The default is the way `make refine-ways` "
        'chose on tuning problems (docs/refiner.md, "Three ways to the final text").',
    )
    consensus_min_support: int = Field(
        3, description="Drafts that must agree (lines or computations) for a consensus prefix (clamped to N)."
    )
    default_deadline_s: float = Field(300.0, description="Deadline applied when the client sets none.")
    verify_timeout_s: float = Field(0.8, description="Verification timeout per draft; a later verdict is dropped.")
    max_redrafts: int = Field(2, description="Re-drafting rounds (K) when no draft passes the hard rules.")
    redraft_temperature_step: float = Field(0.2, description="Temperature added per re-drafting round.")
    unavailable_margin_s: float = Field(
        0.25, description="How long before the deadline a request waiting for the Verifier gives up (UNAVAILABLE)."
    )
    load_interval_s: float = Field(
        5.0, description="Seconds between load reports asked of the Drafter, from which N is chosen."
    )
    weights_path: str = Field(
        ".deliberate/scheduler-state.json", description="Where weights and feedback persist when --state-url is empty."
    )
    state_url: str = Field(
        "",
        description="redis://host:port/db: learned weights, feedback counters and pending decisions live in Redis, "
        "shared by every Scheduler replica (and one watchdog acts at a time); empty: the local file --weights-path.",
    )
    state_timeout_s: float = Field(
        0.5, description="Redis connect and reply timeout; a dead Redis fails a call after about twice this."
    )
    pending_ttl_s: float = Field(
        86400.0, description="With --state-url: how long a decision awaits its feedback before it expires."
    )
    verifier_health_url: str = Field(
        f"http://{LOCALHOST}:{VERIFIER_PORTS.http}/health", description="The Verifier's HTTP health."
    )
    watchdog_interval_s: float = Field(30.0, description="Seconds between Verifier heartbeats.")
    watchdog_failures: int = Field(3, description="Consecutive failed heartbeats before a restart.")
    watchdog_lease_s: float = Field(
        90.0,
        description="With --state-url: expiry of the watchdog lease in Redis; only its holder restarts the Verifier, "
        "and another replica takes over this long after the holder stops renewing it.",
    )
    restarter: str = Field(
        "none", description="How the watchdog restarts the Verifier: process, command, container, kubernetes, none."
    )
    restart_command: str = Field(
        "", description="restarter=command: a command that restarts the Verifier, run by the acting watchdog."
    )
    verifier_command: str = Field(
        "", description="restarter=process: the command that starts the Verifier (the Scheduler supervises it)."
    )
    verifier_container: str = Field("deliberate-verifier", description="restarter=container: the container's name.")
    container_socket: str = Field("/run/podman/podman.sock", description="restarter=container: the engine API socket.")
    kubernetes_namespace: str = Field("deliberate", description="restarter=kubernetes: the Verifier's namespace.")
    kubernetes_selector: str = Field(
        "app.kubernetes.io/name=verifier", description="restarter=kubernetes: label selector of the Verifier's pods."
    )

    @field_validator("drafter_address", "verifier_address", "refiner_address")
    @classmethod
    def _resolvable_target(cls, address: str) -> str:
        grpc_target(address)  # a list with a name in it, or an empty entry, fails at start-up
        return address.strip()

    @cached_property
    def confidence_floors_of_kind(self) -> dict[str, float]:
        return parse_floors(self.confidence_floors)

    @field_validator("confidence_floors")
    @classmethod
    def _confidence_floors(cls, floors: str) -> str:
        parse_floors(floors)  # fails fast at start-up, saying the format
        return floors

    @field_validator("adaptive_policy", "cascade_policy", "decision_cascade_policy")
    @classmethod
    def _adaptive_policy(cls, name: str) -> str:
        return AdaptivePolicy.parse(name).name  # fails fast at start-up, saying the format

    @field_validator("selection_policy", "cascade_selection_policy")
    @classmethod
    def _registered_policy(cls, name: str) -> str:
        get_policy(name)  # fails fast at start-up, naming the registered policies
        return name
