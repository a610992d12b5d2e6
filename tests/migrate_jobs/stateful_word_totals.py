"""Running word totals over everything a TCP server has sent, seeded with two words (dmk's migrate tests).

Run: python stateful_word_totals.py HOST PORT

The totals are state kept by updateStateByKey, checkpointed under ./checkpoint; "hello" and "world" start
at 1. Every batch prints every word's total so far, including words that did not arrive in it.
"""
import sys

from pyspark import SparkContext
from pyspark.streaming import StreamingContext


def _add_to_total(arrived, total):
    return (total or 0) + sum(arrived)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: stateful_word_totals.py HOST PORT")
    host, port = sys.argv[1], int(sys.argv[2])
    spark_context = SparkContext(appName="StatefulWordTotals")
    streaming = StreamingContext(spark_context, 1)
    streaming.checkpoint("checkpoint")
    seed = spark_context.parallelize([("hello", 1), ("world", 1)])
    received = streaming.socketTextStream(host, port)
    tokens = received.flatMap(lambda text: text.split(" "))
    totals = tokens.map(lambda token: (token, 1)).updateStateByKey(_add_to_total, initialRDD=seed)
    totals.pprint()
    streaming.start()
    streaming.awaitTermination()
