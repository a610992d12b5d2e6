"""The Structured Streaming side of the kit.

Not built yet: the Kafka source and sink (Python Data Source API) arrive with the modern issue. It will
depend on ``kit`` only, never on ``legacy`` or ``compare``.
"""

__all__: list[str] = []
