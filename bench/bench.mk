# The lab's targets (bench/, docs/eval.md): each calls `deliberate bench <name>` or `deliberate bench eval`; included by the
# Makefile, so `make <target>` runs them from the repository's root. `make help` lists them with the Makefile's.

.PHONY: cascade-tuning bench-cascade eval-cascade bench bench-engines bench-prompt-budget bench-fanout bench-e2e bench-verifier bench-confidence bench-confidence-stop bench-overhead bench-consensus bench-stream-prefix refine-drafts refine-ways bench-early-stop bench-adaptive bench-early-stop-bound bench-adaptive-stop bench-scale bench-index soak soak-quick bench-load bench-load-quick eval eval-quick eval-tuning eval-tuning-2 eval-tuning-3 eval-200 eval-headline eval-default eval-business eval-business-varied eval-business-quick frontier-runs frontier learned-policy replay dataset train-judge eval-judges judge-signal eval-lm-harness

##@ the lab: benchmarks (each writes <name>.json into the folder of its study, bench/studies/<study>/)

## The quick benchmarks; each prints its figures and writes <name>.json into its study's folder.
bench: bench-engines bench-fanout bench-e2e bench-verifier bench-overhead bench-consensus

## The Drafter over gRPC against xllamacpp called directly: same prompts, sampling, N=5, 128 tokens, threads,
## default model; throughput_ratio (target >= 0.9). --with-transformers adds the retired transformers comparison.
bench-engines: install
	$(VENV)/bin/deliberate bench engines

## How long the default model's drafts are under the old and the brief prompt (tuning problems only).
bench-prompt-budget: install
	$(VENV)/bin/deliberate bench prompt-budget

## Fan-out: one engine call with N prompts against N calls one after the other (bench/studies/speed/fanout.json).
bench-fanout: install
	$(VENV)/bin/deliberate bench fanout

## One Solve end to end on the local stack: median latency and seconds per stage (bench/studies/speed/e2e.json).
bench-e2e: install
	$(VENV)/bin/deliberate bench e2e

## What token confidence costs (docs/selection.md#token-confidence): llama.cpp's decoding speed with and without the
## top-k log-probabilities, side by side (bench/studies/speed/confidence_cost.json).
bench-confidence: install
	$(VENV)/bin/deliberate bench confidence-cost $(ARGS)

## Stopping drafts on token confidence, replayed on recorded drafts (issue 25; thresholds from the tuning block's
## right drafts, scored on the 200-problem evaluation's): confidence_stop.json (no study keeps it: bench/studies/unfiled/).
bench-confidence-stop: install
	$(VENV)/bin/deliberate bench confidence-stop $(ARGS)

## The Verifier's throughput and p99 per draft, in process and over gRPC (docs/verifier.md#speed).
bench-verifier: install
	$(VENV)/bin/deliberate bench verifier

## The pipeline's orchestration overhead against the same engine calls made directly (docs/scheduler.md).
bench-overhead: install
	$(VENV)/bin/deliberate bench overhead

## The Refiner with the drafts' consensus prefix against without: tokens and latency (docs/refiner.md#consensus-benchmark).
bench-consensus: install
	$(VENV)/bin/deliberate bench consensus

## SolveStream with the consensus prefix against without: time to first content and to the answer, same problems.
bench-stream-prefix: install
	$(VENV)/bin/deliberate bench stream-prefix $(ARGS)

## The drafts the three ways to the final text are measured on (docs/refiner.md#three-ways-to-the-final-text): the
## default Drafter's first rounds on 60 tuning problems (blocks 1 and 2), every draft whole (resumable).
refine-drafts: install
	DELIBERATE_MAX_REDRAFTS=0 $(VENV)/bin/deliberate bench eval --limit 60 --sizes 5 --ads 0 --no-refine-subsets \
		--max-new-tokens 384 --early-stop off --exclude bench/eval/tuning_blocks_1_2_only.txt --name refine-drafts $(EVAL_ARGS)

## Three ways to the final text on those drafts (passed through, refined, refined from the consensus prefix), each
## through SolveStream and the gateway's stream; the default chosen by the rule fixed before the run. ARGS="--limit 2".
refine-ways: install
	$(VENV)/bin/deliberate bench refine-ways $(ARGS)

## Early stopping (streaming verification, aborting failed drafts, quorum) with against without, side by side:
## 50 GSM8K questions and 10 ad-selection instances, N=5, the default model (hours on 2 cores; resumable, the
## per-problem records are in bench/studies/early-stopping/early_stop.runs.jsonl). `ARGS="--limit 3"` for a quick profile.
bench-early-stop: install
	$(VENV)/bin/deliberate bench early-stop $(ARGS)

## Adaptive draft counts (SolveRequest.draft_count adaptive, --adaptive-policy) against the default round (all N
## at once, early stopping on), side by side on the same 60 GSM8K questions as bench-early-stop's sample, N=5, the
## default model (hours; resumable: bench/studies/adaptive-counts/adaptive.runs.jsonl). `ARGS="--limit 3 --ads 0"` for a quick look.
bench-adaptive: install
	$(VENV)/bin/deliberate bench early-stop --compare adaptive --limit 60 --ads 0 --max-new-tokens 384 $(ARGS)

## The recorded drafts of eval-200 (its default round of 5) replayed with and without early stopping, and
## the bound no policy that drops losing drafts can beat (about 2 minutes: it times decoding steps on the model).
bench-early-stop-bound: install
	$(VENV)/bin/deliberate bench early-stop-bound $(ARGS)

## Adaptive draft counts and confidence stops (issue 25): chosen on the tuning runs, scored on eval-200's, replayed.
bench-adaptive-stop: install
	$(VENV)/bin/deliberate bench adaptive-stop $(ARGS)

## Scale-out (docs/deploy.md#load-balancing): the same 10 requests (SmolLM2, 4 drafts x 64 tokens) against 1 Drafter
## with 1 engine thread and against 2 Drafters with 1 each, one after the other; wall_ratio and replica_shares in
## bench/studies/speed/scale.json (a few minutes on 2 cores). Not part of `make bench`.
bench-scale: install
	$(VENV)/bin/deliberate bench scale $(ARGS)

##@ the lab: soak and load (docs/reliability.md, docs/scaling.md)

## Soak (docs/reliability.md): the real stack under 8 concurrent solves for 15 min while the Verifier is SIGKILLed 5
## times and SIGSTOPped twice and the Drafter and Refiner are SIGKILLed once; writes bench/studies/load-and-soak/soak.json and
## fails unless no request is lost and >= 95 % succeed outside the fault windows. Not part of `make bench`.
SOAK_ARGS ?=
soak: install
	$(VENV)/bin/deliberate bench soak $(SOAK_ARGS)

## The same for 3 min with one fault of each kind (bench/studies/load-and-soak/soak-quick.json).
soak-quick: install
	$(VENV)/bin/deliberate bench soak --quick $(SOAK_ARGS)

## Load (docs/scaling.md): 1, 2, 4, 8 and 16 closed-loop clients on GSM8K tuning problems and one business decision
## in five (the business tuning split), 60 s deadline, the
## default round (over gRPC and through the OpenAI gateway) beside a round of 5 and a plain single-program server on
## the same cores; goodput (right answers within the deadline per minute), latency, refusals, lost, and where the
## time goes (the Scheduler's spans); writes bench/studies/load-and-soak/load.{json,md,png} (~70 min).
LOAD_ARGS ?=
bench-load: install
	$(VENV)/bin/deliberate bench load $(LOAD_ARGS)

## The same machinery on SmolLM2-135M, 1 and 2 clients, 30 s each (bench/studies/load-and-soak/load-quick.*; in CI).
bench-load-quick: install
	$(VENV)/bin/deliberate bench load --quick $(LOAD_ARGS)

##@ the lab: evaluations (docs/eval.md)

# Evaluation on GSM8K (docs/eval.md): starts the four services with DELIBERATE_ENGINE / DELIBERATE_MODEL from
# the environment. Resumable: results are appended per problem; EVAL_ARGS=--fresh starts over.
EVAL_ARGS ?=
## The committed evaluation: 100 sampled train problems (seed 2026), N = 3 and 5, 20 ad-selection catalogs.
# One re-draft round (the services' default is 2) keeps a problem near a minute on 2 cores; 384-token drafts.
EVAL_MAX_REDRAFTS ?= 1
eval: install
	DELIBERATE_MAX_REDRAFTS=$(EVAL_MAX_REDRAFTS) $(VENV)/bin/deliberate bench eval --limit 100 --sizes 3,5 --ads 20 \
		--max-new-tokens 384 --name eval-gsm8k-100 $(EVAL_ARGS)

## Draft once, select many (docs/eval.md#replay): every selection policy and ablation ranked again on the recorded
## drafts of a runs file, no model, seconds; writes <name>.replay.{json,md} beside it.
REPLAY_RUNS ?= bench/studies/gsm8k-headline/eval-gsm8k-100.runs.jsonl bench/studies/gsm8k-headline/eval-early-stop.runs.jsonl
replay: install
	for runs in $(REPLAY_RUNS); do $(VENV)/bin/deliberate bench eval --replay $$runs >/dev/null || exit 1; done

## The previous default model's headline (docs/eval.md#results): eval-200's recorded 0.5B drafts read as the default
## round (5 drafts, the default number of programs and policy) with the targets; bench/studies/gsm8k-headline/eval-gsm8k-0.5b.*.
HEADLINE_RUNS ?= bench/studies/gsm8k-headline/eval-gsm8k-200.runs.jsonl
eval-headline: install
	$(VENV)/bin/deliberate bench headline $(HEADLINE_RUNS)

## The 200-problem evaluation on the default deployment (issue 40; docs/eval.md): eval-200's 200 problems (seed
## 2027), the default round live (5 drafts by the 1.5B model, the 0.5B Refiner, early stopping and one re-draft), with
## both embedded models' greedy prose and program passes beside it (bench/studies/gsm8k-headline/eval-gsm8k-200-default.runs.jsonl;
## about a minute per problem on 2 cores; resumable), then the project's headline (bench/studies/gsm8k-headline/eval-gsm8k.*).
eval-default: install
	DELIBERATE_MAX_REDRAFTS=$(EVAL_MAX_REDRAFTS) $(VENV)/bin/deliberate bench eval --limit 200 --seed 2027 --sizes 3,5 \
		--ads 0 --max-new-tokens 384 --cross-drafter-model qwen2.5-coder-0.5b --name eval-gsm8k-200-default $(EVAL_ARGS)
	$(VENV)/bin/deliberate bench default-headline bench/studies/gsm8k-headline/eval-gsm8k-200-default.runs.jsonl

## The cascade's tuning drafts (issue 54; docs/eval.md#the-cascade): the second tuning block's 91 problems (never
## scored) on the default 1.5B model, each with a greedy prose draft and a greedy program (the cascade's first stage)
## and 4 sampled prose drafts and 4 sampled programs, every draft to its end (bench/studies/cascade/cascade-tuning.runs.jsonl;
## about a minute a problem on 2 cores; resumable).
cascade-tuning: install
	DELIBERATE_PROGRAM_DRAFTS=4 DELIBERATE_MAX_REDRAFTS=0 $(VENV)/bin/deliberate bench eval --limit 91 --sizes 8 --ads 0 \
		--max-new-tokens 384 --early-stop off --no-refine-subsets --exclude bench/eval/tuning_block_2_only.txt \
		--name cascade-tuning $(EVAL_ARGS)

## The cascade chosen on those drafts: every policy replayed with a latency model fitted on the same runs, the default
## picked by the rule fixed before scoring (bench/studies/cascade/cascade_replay.json; seconds, no model).
bench-cascade: install
	$(VENV)/bin/deliberate bench cascade $(ARGS)

## Does deliberation pay for itself (issue 54)? 400 problems no tuning step saw (eval-200's 200, then the same shuffle
## past every tuning block's line), each solved live in one run by one greedy program, one greedy prose draft, a
## round of 5 complete drafts (round@5, majority@5, pass@5) and the default round, the cascade; one re-draft round
## (bench/studies/cascade/eval-cascade.runs.jsonl; hours on 2 cores; resumable), then bench/studies/cascade/cascade.{json,md,png}.
eval-cascade: install
	DELIBERATE_MAX_REDRAFTS=$(EVAL_MAX_REDRAFTS) $(VENV)/bin/deliberate bench eval --limit 400 --seed 2027 --pass-over-tuning \
		--sizes 5 --ads 0 --max-new-tokens 384 --no-refine-subsets --complete-round 5 --name eval-cascade $(EVAL_ARGS)
	$(VENV)/bin/deliberate bench cascade-headline bench/studies/cascade/eval-cascade.runs.jsonl

## The learned selection policy's weights (docs/selection.md#the-learned-policy), fitted on the tuning block's
## recorded drafts (make eval-tuning) and written to services/deliberate/selection/learned_policy.json.
LEARNED_RUNS ?= bench/studies/tuning-blocks/eval-tuning.runs.jsonl
learned-policy: install
	$(VENV)/bin/deliberate bench fit-policy $(LEARNED_RUNS) --drafts 5:3+2

# The tuning blocks (docs/eval.md): train-split problems no committed sample holds, each drafted 8 ways (4 prose, 4
# programs) with early stopping off so every draft is recorded whole; what defaults are chosen on by replay, never
# scored; about a minute per problem on 2 cores; resumable. One row each: target (= the runs' name), problems, the
# lines never sampled (every other line of the split is left out, so the block is exactly these lines).
TUNING_BLOCKS := \
	eval-tuning:50:bench/eval/tuning_block_only.txt \
	eval-tuning-2:91:bench/eval/tuning_block_2_only.txt \
	eval-tuning-3:95:bench/eval/tuning_block_3_only.txt
tuning_field = $(word $(2),$(subst :, ,$(filter $(1):%,$(TUNING_BLOCKS))))

## The tuning block (train lines 0-49, never in an evaluation sample), 4 prose drafts and 4 programs per problem,
## every draft whole (bench/studies/tuning-blocks/eval-tuning.runs.jsonl; the learned policy is fitted on it).
eval-tuning: install
## The second tuning block (bench/eval/tuning_block_2_only.txt: the 91 problems of train lines 50-149 that no
## committed sample holds), drafted as the first: the stopping and draft-count defaults are chosen on it.
eval-tuning-2: install
## The third tuning block (bench/eval/tuning_block_3_only.txt: the 95 problems of train lines 151-249 that no
## committed sample holds), drafted as the first two.
eval-tuning-3: install
eval-tuning eval-tuning-2 eval-tuning-3:
	DELIBERATE_PROGRAM_DRAFTS=4 DELIBERATE_MAX_REDRAFTS=$(EVAL_MAX_REDRAFTS) $(VENV)/bin/deliberate bench eval \
		--limit $(call tuning_field,$@,2) --sizes 8 --ads 0 --max-new-tokens 384 --early-stop off \
		--exclude $(call tuning_field,$@,3) --name $@ $(EVAL_ARGS)

## The accuracy-latency frontier (issue 40, docs/models.md#the-frontier-which-model-where), recorded: the first $(FRONTIER_LIMIT) problems
## of the tuning block solved with each embedded model as Drafter and Refiner (one greedy prose and one greedy
## program pass, pipeline@3 and @5 with today's defaults), each problem's selected drafts refined again by the
## other model's Refiner (the mixed deployments); bench/studies/frontier/frontier-<model>.runs.jsonl and its
## summaries beside it; resumable.
FRONTIER_LIMIT ?= 20
FRONTIER_MODELS := qwen2.5-coder-0.5b qwen2.5-coder-1.5b
frontier-runs: install
	for drafter in $(FRONTIER_MODELS); do other=$$(echo $(FRONTIER_MODELS) | tr ' ' '\n' | grep -vx $$drafter); \
		DELIBERATE_MODEL=$$drafter DELIBERATE_MAX_REDRAFTS=$(EVAL_MAX_REDRAFTS) $(VENV)/bin/deliberate bench eval \
		--limit $(FRONTIER_LIMIT) --sizes 3,5 --ads 0 --max-new-tokens 384 --exclude bench/eval/tuning_block_only.txt \
		--cross-refiner-model $$other --name frontier-$$drafter $(EVAL_ARGS) || exit 1; done

## The frontier read from those runs, with the default chosen by the rule fixed before scoring
## (bench/studies/frontier/frontier.{json,md,png}; seconds, no model).
frontier: install
	$(VENV)/bin/deliberate bench frontier

## The 200-problem evaluation of issue 24 (docs/eval.md): a new sample of the training split (seed 2027; the
## tuning block excluded), 8 drafts per problem (4 prose, 4 programs), early stopping off so every draft is
## recorded whole with its token confidence, for replaying every policy and mix (bench/studies/gsm8k-headline/eval-gsm8k-200.*;
## about a minute per problem on 2 cores; resumable: rerun to continue).
eval-200: install
	DELIBERATE_PROGRAM_DRAFTS=4 DELIBERATE_MAX_REDRAFTS=$(EVAL_MAX_REDRAFTS) $(VENV)/bin/deliberate bench eval --limit 200 \
		--seed 2027 --sizes 8 --ads 0 --max-new-tokens 384 --early-stop off --name eval-gsm8k-200 $(EVAL_ARGS)

## A quick look while developing: the first 10 problems of the same sample, 2 catalogs, separate results.
eval-quick: install
	DELIBERATE_MAX_REDRAFTS=$(EVAL_MAX_REDRAFTS) $(VENV)/bin/deliberate bench eval --limit 10 --sizes 3,5 --ads 2 --name eval-quick $(EVAL_ARGS)

## The three business cases (docs/business-cases.md) on the real stack: 60 ad catalogs, 42 credit applicants, 30
## product tables (the scored instances; a fixed quarter of each case is kept apart for tuning), each solved by one
## prose draft, one program draft and the pipeline, beside a reference plan computed without a model; every answer's
## feasibility judged by the evaluation itself (deliberate_bench/eval/business_eval.py). Writes
## bench/studies/business-evaluation/business.runs.jsonl and bench/studies/business-evaluation/business.{json,md,png}; hours; resumable: rerun to continue.
eval-business: install
	$(VENV)/bin/deliberate bench business-eval $(EVAL_ARGS)

## Decisions stated in words (issue 55): the varied split — 60 requests whose rules go beyond the packs' worked
## examples (at most k per category, a contracted ad, a payment cap, a discount budget, …), stated in words and as
## the request's own CEL, some with no feasible plan — with the worked example alone (`template`) and the
## evaluation's own optimum (`reference`) beside the model's rows; resumable (hours on 2 cores).
eval-business-varied: install
	$(VENV)/bin/deliberate bench business-eval --varied $(EVAL_ARGS)

## A quick look at it: 2 instances per case on the test model (SmolLM2-135M), short budgets, no re-drafts,
## into bench/studies/unfiled/business-quick.* (never the committed results).
eval-business-quick: install
	DELIBERATE_MODEL=smollm2-135m DELIBERATE_MAX_REDRAFTS=0 $(VENV)/bin/deliberate bench business-eval --limit 2 \
		--max-new-tokens 96 --refine-max-new-tokens 32 --pipeline-drafts 2 --name business-quick $(EVAL_ARGS)

##@ the lab: the judge (docs/judge.md)

# The judge (docs/judge.md): verifier records from real runs, a fine-tuned SmolLM2 judge, judges compared.
# All resumable; DATASET_ARGS / TRAIN_JUDGE_ARGS / EVAL_ARGS pass options through.
DATASET_ARGS ?=
TRAIN_JUDGE_ARGS ?=
JUDGE_DIR ?= .deliberate/judges/smollm2-135m-judge
## Verifier training records: 300 GSM8K train problems x 8 SmolLM2 drafts and the worked examples
## (bench/studies/judge/judge-dataset), and 4 Qwen2.5-Coder-0.5B drafts per problem (bench/studies/judge/judge-dataset-qwen),
## the right drafts SmolLM2 rarely writes.
dataset: install
	$(VENV)/bin/deliberate bench dataset --engine-threads 1 $(DATASET_ARGS)
	$(VENV)/bin/deliberate bench dataset --engine-threads 1 --model qwen2.5-coder-0.5b --out bench/studies/judge/judge-dataset-qwen \
		--examples "" --drafts 4 --max-new-tokens 320 --temperature 0.7 $(DATASET_ARGS)

## Fine-tune SmolLM2-135M into the judge on that dataset (CPU), measured against the untrained one on validation.
train-judge: install
	$(VENV)/bin/deliberate bench train-judge --dataset bench/studies/judge/judge-dataset --dataset bench/studies/judge/judge-dataset-qwen \
		--out $(JUDGE_DIR) $(TRAIN_JUDGE_ARGS)

## Rules only vs rules + untrained judge vs rules + trained judge, on held-out (validation) problems, drafted by
## the default model (SmolLM2 solves almost none of them, and accuracy could not tell the judges apart).
eval-judges: install
	DELIBERATE_MAX_REDRAFTS=0 $(VENV)/bin/deliberate bench eval \
		--problems-from bench/studies/judge/judge-dataset --limit 20 --sizes 2 --max-new-tokens 256 \
		--refine-max-new-tokens 64 --no-refine-subsets --ads 0 --name judge-compare \
		--judges rules=off,untrained=transformers,trained=$(JUDGE_DIR) $(EVAL_ARGS)

## The judge retrained on the default model's own labelled drafts (the tuning block and eval-200's, prose and
## programs that passed the rules) and read as a selection signal on eval-200, cross-validated by problem: one
## SmolLM2 fine-tune per fold, each judging only its own fold's drafts (docs/judge.md#the-judge-as-a-selection-signal;
## about 35 minutes a fold on 2 cores; resumable). JUDGE_SIGNAL_ARGS="--summarize-only" replays the committed
## scores in seconds.
JUDGE_SIGNAL_ARGS ?=
judge-signal: install
	$(VENV)/bin/deliberate bench judge-signal $(JUDGE_SIGNAL_ARGS)

##@ the lab: its files, and lm-evaluation-harness

## The lab's indexes from the studies' manifests (bench/studies/<study>/study.toml): bench/studies/README.md, each
## study's summary table (a test fails when one is out of date); files what a study now declares out of
## bench/studies/unfiled/.
bench-index: install
	$(VENV)/bin/deliberate bench index --write

# lm-eval's local-chat-completions model through the OpenAI-compatible gateway (docs/gateway.md), in a venv of its
# own (lm-eval brings datasets, pandas, scikit-learn, …): GSM8K from tests/data/gsm8k_sample.jsonl, 20 problems.
LMEVAL_VENV ?= .venv-lmeval

$(LMEVAL_VENV)/.installed-stamp:
	$(PYTHON) -m venv $(LMEVAL_VENV)
	$(LMEVAL_VENV)/bin/python -m pip install --quiet "$(TORCH_SPEC)" "lm-eval[api]==0.4.13"
	touch $@

## lm-eval on a local GSM8K task through the gateway of a local stack (DELIBERATE_MODEL picks the model); not in `make test`.
eval-lm-harness: install $(LMEVAL_VENV)/.installed-stamp
	$(VENV)/bin/deliberate bench lm-eval-gateway --lm-eval $(LMEVAL_VENV)/bin/lm_eval
