# -*- coding: utf-8 -*-
"""
 A Python 2-era DStream job that still parses as Python 3: each Python 2-only line is a finding with its fix.
"""
import sys

from kafka import KafkaProducer
from pyspark import SparkContext
from pyspark.streaming import StreamingContext

reload(sys)
sys.setdefaultencoding("utf-8")


def send_partition(records):
    producer = KafkaProducer(bootstrap_servers="localhost:9092")
    for word, count in records:
        producer.send("counts", "%s,%d" % (word, count))
    producer.flush()


def totals(counts):
    return dict((unicode(k), v) for k, v in counts.iteritems())


if __name__ == "__main__":
    ssc = StreamingContext(SparkContext(appName="Py2Era"), 1)
    words = ssc.socketTextStream("localhost", 9999).flatMap(lambda line: line.split(" "))
    counts = words.map(lambda w: (w, 1)).reduceByKey(lambda a, b: a + b)
    counts.foreachRDD(lambda rdd: rdd.foreachPartition(send_partition))
    for i in xrange(3):
        print(i)
    ssc.start()
    ssc.awaitTermination()
