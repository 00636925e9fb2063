"""Behaviour snapshots the golden files do not cover: every command's --help, every export kind,
the stub's bytes per fault kind and a short scripted ``harness run`` (README.md)."""
