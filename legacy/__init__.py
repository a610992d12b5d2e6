"""The DStream (Spark Streaming) side of the kit.

Not built yet: the Kafka direct/receiver streams, checkpoint recovery, offset stores and rate control
arrive with the legacy issue. It will depend on ``kit`` only, never on ``modern`` or ``compare``.
"""

__all__: list[str] = []
