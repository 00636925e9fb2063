"""What each command does between the CLI's parsing and the drivers.

The only layer that imports both the simulation and the live run: the seed pool of
``harness sim --seeds``, the sweep's orchestration, ``--verify-live``, progress bars. Every
function here returns an exit code from :mod:`harness.ground.exit_codes`, the one map.
"""
