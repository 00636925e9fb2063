"""Run orchestration in the CLI process: the live run's settings, its child processes, progress,
and merging (or recovering) what the generator and the proxy wrote."""
