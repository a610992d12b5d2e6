"""
 Exactly-once output, the Spark 2.x way: the results of each batch and the Kafka offsets they cover are
 written to PostgreSQL in one transaction, and the job resumes from the offsets in the database.

 Usage: kafka_offsets_to_db.py <broker_list> <topic> <dsn>
"""
from __future__ import print_function

import json
import sys

import psycopg2
from pyspark import SparkConf, SparkContext
from pyspark.streaming import StreamingContext
from pyspark.streaming.kafka import KafkaUtils, TopicAndPartition

brokers, topic, dsn = sys.argv[1:]


def load_offsets(conn):
    cur = conn.cursor()
    cur.execute("SELECT partition, until_offset FROM kafka_offsets WHERE topic = %s", (topic,))
    return {TopicAndPartition(topic, partition): offset for partition, offset in cur.fetchall()}


offsetRanges = []


def storeOffsetRanges(rdd):
    global offsetRanges
    offsetRanges = rdd.offsetRanges()
    return rdd


def save(rdd):
    rows = rdd.collect()
    conn = psycopg2.connect(dsn)
    with conn:
        cur = conn.cursor()
        cur.executemany("INSERT INTO purchases (user_id, amount) VALUES (%s, %s)", rows)
        for o in offsetRanges:
            cur.execute("UPDATE kafka_offsets SET until_offset = %s WHERE topic = %s AND partition = %s",
                        (o.untilOffset, o.topic, o.partition))
    conn.close()


conf = SparkConf().setAppName("purchases-to-postgres")
conf.set("spark.streaming.stopGracefullyOnShutdown", "true")
sc = SparkContext(conf=conf)
ssc = StreamingContext(sc, 5)

fromOffsets = load_offsets(psycopg2.connect(dsn))
stream = KafkaUtils.createDirectStream(ssc, [topic], {"metadata.broker.list": brokers},
                                       fromOffsets=fromOffsets)
stream.transform(storeOffsetRanges) \
    .map(lambda kv: json.loads(kv[1])) \
    .filter(lambda p: p["type"] == "purchase") \
    .map(lambda p: (p["user"], p["amount"])) \
    .foreachRDD(save)

ssc.start()
try:
    ssc.awaitTermination()
finally:
    ssc.stop(stopSparkContext=True, stopGraceFully=True)
