"""Print-only jobs we wrote for ``dmk compare-jobs``: the constructs of Spark's streaming examples, our own code.

* ``legacy_words.py KIND ...``: a DStream word count per batch, printed with ``pprint()``, reading a socket
  (``socket HOST PORT``), a directory (``files DIR``) or Kafka (``kafka BOOTSTRAP TOPIC``);
* ``legacy_receiver.py ZK_QUORUM TOPIC``: the same count per batch, reading Kafka through ``createStream``
  (a receiver named by its ZooKeeper quorum, no brokers), printed with ``pprint()``;
* ``legacy_own_kafka.py``: a DStream word count per batch of a topic on brokers it names itself (constants, no
  argv), printed with ``pprint()``: compare-jobs feeds it with ``--input-kind kafka`` (the stand-ins' redirect);
* ``legacy_two_streams.py HOST PORT``: two ``pprint()`` streams of one socket, words and lines per batch;
* ``legacy_queue.py``: ``queueStream`` of its own RDDs, ``x % 10`` counted per batch, printed with ``pprint()``;
* ``legacy_saved.py``: a word count per batch of a socket it names itself (``localhost:9999``), saved with
  ``saveAsTextFiles`` under an ``hdfs://`` prefix of its own (compare-jobs ``--output files:LOC``);
* ``modern_saved.py``: its rewrite, each micro-batch's pairs appended as text lines to an absolute directory;
* ``modern_words.py KIND ...``: the rewrite, per micro-batch in ``foreachBatch``, printing each pair;
* ``modern_running.py KIND ...``: a WRONG rewrite: ``groupBy().count()`` to the console sink, a running total.
"""
