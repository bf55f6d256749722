"""`deliberate bench eval` and what reads its runs: the summary, the replay, the headline, the frontier, the business
cases, the judge's dataset, training and signal, the learned policy's fit."""
