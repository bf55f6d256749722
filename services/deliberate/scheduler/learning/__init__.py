"""What the Scheduler learns from feedback: the selection weights (`weights`), one process's learner
(`weight_learner`) and the stores that keep them (`weight_store`: a state file or Redis)."""
