"""What `deliberate bench engines` reports: each side's median tokens/s, the Drafter's share of llama.cpp's."""

from deliberate_bench.speed.engines import Run, summarize


def test_the_ratio_divides_the_sides_median_throughputs():
    drafter = [Run([64, 64], [90, 91], 2.0), Run([64, 60], [90, 91], 1.0), Run([64, 64], [90, 91], 4.0)]
    direct = [Run([64, 64], [90, 91], 1.0), Run([64, 60], [90, 91], 1.0), Run([64, 64], [90, 91], 1.6)]
    figures = summarize(drafter, direct)
    assert figures["drafter_runs_tokens_per_s"] == [64.0, 124.0, 32.0]
    assert figures["drafter_tokens_per_s"] == 64.0 and figures["direct_tokens_per_s"] == 124.0
    assert figures["throughput_ratio"] == round(64 / 124, 3)
    assert figures["drafter_s"] == 2.0 and figures["direct_s"] == 1.0
    assert figures["direct_runs_tokens"] == [128, 124, 128]
