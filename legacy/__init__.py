"""The DStream (Spark Streaming) side of the kit. It depends on ``kit`` only, never on ``modern`` or ``compare``.

Public modules:

* :mod:`legacy.kafka` -- Spark 2.4's ``pyspark.streaming.kafka`` on PySpark 4.3: ``KafkaUtils.createDirectStream``,
  ``KafkaUtils.createRDD``, ``OffsetRange``, ``TopicAndPartition``, ``Broker``, ``KafkaMessageAndMetadata``,
  ``offsetRanges()`` in ``transform``/``foreachRDD``, and ``get_or_create`` (checkpoint recovery that refuses a
  checkpoint written by other job code);
* :mod:`legacy.rate` -- Spark's direct-stream rate limit and PID estimator as pure functions;
* :mod:`legacy.inspect` -- what a DStream checkpoint holds, read with Spark's own ``Checkpoint`` reader;
* :mod:`legacy.runner` -- the jobs of a run in one StreamingContext, with idempotent outputs and offset stores;
* :mod:`legacy.engine` -- :class:`kit.engine.Engine` over the runner (what ``compare`` drives);
* :mod:`legacy.errors` -- the errors the DStream side raises (base :class:`~legacy.errors.LegacyError`).

Example (a Spark 2.4 job, only the import changed)::

    from legacy.kafka import KafkaUtils, OffsetRange
    stream = KafkaUtils.createDirectStream(ssc, ["events"], {"metadata.broker.list": "h:9092"})
    stream.foreachRDD(lambda rdd: print(rdd.offsetRanges()))

See ``docs/legacy.md``.
"""

__all__: list[str] = ["engine", "errors", "inspect", "kafka", "rate", "runner"]
