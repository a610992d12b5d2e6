"""Remainders per batch from a queue of RDDs, printed (the harness's stand-in fills the queue)."""

from pyspark import SparkContext
from pyspark.streaming import StreamingContext

sc = SparkContext(appName="remainders-per-batch")
ssc = StreamingContext(sc, 1)
queue = [sc.parallelize(range(1, 201), 4) for _ in range(3)]
remainders = ssc.queueStream(queue).map(lambda n: (n % 10, 1)).reduceByKey(lambda x, y: x + y)
remainders.pprint()
ssc.start()
ssc.awaitTermination()
