"""
 Word counts over a sliding window, as Spark 2.x tutorials wrote them: the last 30 seconds of data, every
 10 seconds, kept incrementally with an inverse function (which needs a checkpoint directory).

 Usage: windowed_wordcount.py <hostname> <port>
"""
from __future__ import print_function

import sys

from pyspark import SparkContext
from pyspark.streaming import StreamingContext

if __name__ == "__main__":
    sc = SparkContext(appName="PythonStreamingWindowedWordCount")
    ssc = StreamingContext(sc, 10)
    ssc.checkpoint("hdfs:///checkpoints/windowed_wordcount")

    lines = ssc.socketTextStream(sys.argv[1], int(sys.argv[2]))
    pairs = lines.flatMap(lambda line: line.split(" ")).map(lambda word: (word, 1))

    # Reduce last 30 seconds of data, every 10 seconds
    windowedWordCounts = pairs.reduceByKeyAndWindow(lambda x, y: x + y, lambda x, y: x - y, 30, 10)
    windowedWordCounts.pprint()

    # The same without the inverse function: the whole window is reduced again every slide
    recounted = pairs.reduceByKeyAndWindow(lambda x, y: x + y, None, 30, 10)
    recounted.pprint()

    lines.countByWindow(30, 10).pprint()

    ssc.start()
    ssc.awaitTermination()
