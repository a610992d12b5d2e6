"""Every word's count so far, from files dropped into a directory (ours): updateStateByKey with a count fold.

Usage: running_word_totals.py <directory>
"""

import sys

from pyspark import SparkContext
from pyspark.streaming import StreamingContext


def count_seen(new_values, seen):
    return len(new_values) + (seen or 0)


if __name__ == "__main__":
    sc = SparkContext(appName="RunningWordTotals")
    ssc = StreamingContext(sc, 1)
    ssc.checkpoint("/tmp/running-word-totals")
    words = ssc.textFileStream(sys.argv[1]).flatMap(lambda line: line.split(" ")).filter(lambda w: w != "")
    totals = words.map(lambda w: (w.lower(), 1)).updateStateByKey(count_seen)
    totals.pprint()
    ssc.start()
    ssc.awaitTermination()
