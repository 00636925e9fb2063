"""The load generator that runs inside Locust: the open-loop walk, one call per arrival, what it
records, the answers it parses and the endpoint dialects."""
