"""Generated references under docs/reference/: their producers, ``regen`` and staleness tests."""
