"""The server distribution's commands: `deliberate up` and `deliberate traces`, registered in the client's
`deliberate` command through the entry-point group `deliberate.commands`, and the local stack they start (the
evaluation lab's one command, `deliberate bench`, is deliberate-bench's, bench/deliberate_bench)."""
