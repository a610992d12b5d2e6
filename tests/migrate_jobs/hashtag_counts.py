"""Hashtags per batch from a socket, printed (ours): a job made only of idioms that dmk migrate lifts.

Usage: hashtag_counts.py <host> <port>
"""

import sys
from operator import add

from pyspark import SparkContext
from pyspark.streaming import StreamingContext

if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("Usage: hashtag_counts.py <host> <port>", file=sys.stderr)
        sys.exit(2)
    sc = SparkContext(appName="HashtagCounts")
    ssc = StreamingContext(sc, 1)
    posts = ssc.socketTextStream(sys.argv[1], int(sys.argv[2]))
    tags = posts.flatMap(lambda post: post.split(" ")).filter(lambda w: "#" in w)
    counts = tags.map(lambda tag: (tag, 1)).reduceByKey(add)
    counts.pprint(5)
    ssc.start()
    ssc.awaitTermination()
