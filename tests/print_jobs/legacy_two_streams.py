"""Two printed streams from one socket: words per batch and lines per batch (usage: HOST PORT)."""

import sys
from operator import add

from pyspark import SparkContext
from pyspark.streaming import StreamingContext

if __name__ == "__main__":
    sc = SparkContext(appName="two-printed-streams")
    ssc = StreamingContext(sc, 2)
    lines = ssc.socketTextStream(sys.argv[1], int(sys.argv[2]))
    lines.flatMap(lambda line: line.split(" ")).map(lambda word: (word, 1)).reduceByKey(add).pprint()
    lines.count().pprint()
    ssc.start()
    ssc.awaitTermination()
