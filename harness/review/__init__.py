"""Comparing two results for a change review: the figures side by side (compare, and the
aggregate of several seeds), the statistics (inference), the review and its gate (change), and
the review as Markdown or JSON (text)."""
