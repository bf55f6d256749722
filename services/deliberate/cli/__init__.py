"""The server distribution's commands: `deliberate up` and `deliberate eval`, registered in the client's
`deliberate` command through the entry-point group `deliberate.commands`, and the local stack they start."""
