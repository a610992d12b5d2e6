"""Per-batch word frequencies of a Kafka topic's values, read with the direct (receiverless) stream.

Run: python kafka_direct_word_counts.py BROKERS TOPIC    (BROKERS: host:port[,host:port...])

Written for dmk's migrate tests: two-second batches, backpressure on and at most 1000 records per
partition and second, so the plan has rate settings to report.
"""
import sys
from operator import add

from pyspark import SparkConf, SparkContext
from pyspark.streaming import StreamingContext
from pyspark.streaming.kafka import KafkaUtils

if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: kafka_direct_word_counts.py BROKERS TOPIC")
    brokers, topic = sys.argv[1], sys.argv[2]
    settings = SparkConf().setAppName("KafkaDirectWordCounts")
    settings.set("spark.streaming.backpressure.enabled", "true")
    settings.set("spark.streaming.kafka.maxRatePerPartition", "1000")
    spark_context = SparkContext(conf=settings)
    streaming = StreamingContext(spark_context, 2)
    records = KafkaUtils.createDirectStream(streaming, [topic], {"metadata.broker.list": brokers})
    values = records.map(lambda record: record[1])
    tokens = values.flatMap(lambda value: value.split(" "))
    per_batch = tokens.map(lambda token: (token, 1)).reduceByKey(add)
    per_batch.pprint()
    streaming.start()
    streaming.awaitTermination()
