"""What a run records on the hot path, event by event: the decision log (recorder; its
compressed blocks: logsink), the collector and the timeline (stats), the timeline's alerts and
the order statistics they use (quantiles). recorder, stats and quantiles are compiled."""
