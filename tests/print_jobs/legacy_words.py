"""Words per batch, printed: a DStream job over a socket, a directory or Kafka (usage in __init__.py)."""

import sys

from pyspark import SparkContext
from pyspark.streaming import StreamingContext

kind = sys.argv[1]
sc = SparkContext(appName="words-per-batch")
ssc = StreamingContext(sc, 1)
if kind == "socket":
    lines = ssc.socketTextStream(sys.argv[2], int(sys.argv[3]))
elif kind == "files":
    lines = ssc.textFileStream(sys.argv[2])
else:
    from pyspark.streaming.kafka import KafkaUtils

    lines = KafkaUtils.createDirectStream(ssc, [sys.argv[3]], {"metadata.broker.list": sys.argv[2]}).map(lambda kv: kv[1])
pairs = lines.flatMap(lambda text: text.split(" ")).filter(lambda w: w).map(lambda w: (w, 1))
pairs.reduceByKey(lambda x, y: x + y).pprint()
ssc.start()
ssc.awaitTermination()
