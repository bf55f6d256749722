"""The evaluation lab (distribution deliberate-bench): one command, `deliberate bench <name>` (command.py lists every
program), registered in the client's `deliberate` command through the entry-point group `deliberate.commands`; its
programs start the servers' local stack (deliberate.cli.stack). Not in the server images."""
