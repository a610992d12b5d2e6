"""Engine-neutral pieces of the kit: broker, Kafka I/O, Spark factories, datasets, replay.

Modules (import them directly; this package imports nothing heavy on purpose):
    kit.errors   — KitError and its subclasses
    kit.engine   — the Engine protocol every engine implements, DriverConfig
    kit.broker   — EmbeddedBroker (Tansu), kafka_or_embedded
    kit.kafka    — Kafka: topics, exact offsets, read_range
    kit.spark    — spark_session, spark_context, streaming_context
    kit.connect  — connect_session (a checked Spark Connect session), LocalConnectServer
    kit.events   — the event contract (parse_event)
    kit.dataset  — DatasetSpec, generate, read/write dataset files
    kit.nexmark  — the Nexmark generator (NexmarkSpec, generate_nexmark, nexmark_to_file), as a dataset
    kit.replay   — replay a dataset into a topic
    kit.capture  — capture a topic into a file, exactly, and replay it
"""

__all__: list[str] = []
__version__ = "0.1.0"
