"""The evaluation lab (distribution deliberate-bench): `deliberate eval`, `deliberate dataset` and
`deliberate train-judge`, registered in the client's `deliberate` command through the entry-point group
`deliberate.commands`; they start the servers' local stack (deliberate.cli.stack). Not in the server images."""
