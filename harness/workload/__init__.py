"""The work offered and how callers behave: the seeded arrival schedule (``arrivals``), public
LLM traces as arrivals (``traces``), the SDK callers' retry model (``clients``) and the one
table from an engine outcome to what a caller sees (``outcomes``)."""
