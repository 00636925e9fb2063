"""harness: rehearse bursts and faults against LLM job queues."""

__version__ = "0.1.0"
