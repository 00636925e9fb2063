"""``harness sweep``: plan (the grid, judging points, sweep.json), table, command."""
