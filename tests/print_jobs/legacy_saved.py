"""Words per batch of a socket the job names itself, saved where its author's cluster kept them: an HDFS prefix.

As many 2.x jobs are written: no argv, a host and port of its own, ``saveAsTextFiles`` under an absolute
``hdfs://`` location, and a ``PYSPARK_SUBMIT_ARGS`` asking ``spark-submit`` for the 0.8 Kafka connector (which it
does not even use). ``dmk compare-jobs --input-kind socket --output files:hdfs://localhost:9000/dmk-tests/words``
feeds its socket and reads what it saved, redirected to the run (no HDFS runs); ``dmk migrate --verify``
infers that output from the text.
"""

import os

from pyspark import SparkContext
from pyspark.streaming import StreamingContext

os.environ["PYSPARK_SUBMIT_ARGS"] = "--packages org.apache.spark:spark-streaming-kafka-0-8_2.11:2.3.1 pyspark-shell"

sc = SparkContext(appName="saved-words")
ssc = StreamingContext(sc, 1)
lines = ssc.socketTextStream("localhost", 9999)
counts = lines.flatMap(lambda line: line.split(" ")).filter(lambda w: w).map(lambda w: (w, 1))
counts.reduceByKey(lambda a, b: a + b).saveAsTextFiles("hdfs://localhost:9000/dmk-tests/words")
ssc.start()
ssc.awaitTermination()
