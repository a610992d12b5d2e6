"""Per-batch word frequencies of the lines a TCP server sends (written for dmk's migrate tests).

Run: python socket_word_counts.py HOST PORT

Each one-second batch's lines are cut at single spaces; every batch prints its own (word, count) pairs,
not a running total.
"""
import sys
from operator import add

from pyspark import SparkContext
from pyspark.streaming import StreamingContext

if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: socket_word_counts.py HOST PORT")
    host, port = sys.argv[1], int(sys.argv[2])
    spark_context = SparkContext(appName="SocketWordCounts")
    streaming = StreamingContext(spark_context, 1)
    received = streaming.socketTextStream(host, port)
    tokens = received.flatMap(lambda text: text.split(" "))
    ones = tokens.map(lambda token: (token, 1))
    per_batch = ones.reduceByKey(add)
    per_batch.pprint()
    streaming.start()
    streaming.awaitTermination()
