"""Words per batch, printed: a DStream job reading Kafka through a receiver (``createStream``, a ZooKeeper quorum).

Usage: ``legacy_receiver.py ZK_QUORUM TOPIC``. No brokers in ``kafkaParams``: 2.4's receiver found them through
ZooKeeper; under ``dmk compare-jobs`` the stand-in reads the run's Kafka.
"""

import sys

from pyspark import SparkContext
from pyspark.streaming import StreamingContext
from pyspark.streaming.kafka import KafkaUtils

quorum, topic = sys.argv[1:3]
sc = SparkContext(appName="words-per-batch-receiver")
ssc = StreamingContext(sc, 1)
records = KafkaUtils.createStream(ssc, quorum, "words-per-batch", {topic: 1})
words = records.flatMap(lambda kv: kv[1].split(" ")).filter(lambda w: w)
words.map(lambda w: (w, 1)).reduceByKey(lambda x, y: x + y).pprint()
ssc.start()
ssc.awaitTermination()
