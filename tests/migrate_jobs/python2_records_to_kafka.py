# -*- coding: utf-8 -*-
"""Each Kafka record as a JSON summary on another topic: a Python 2-era DStream job (ours).

Written as jobs were for Spark 1.x/2.x on Python 2: reload(sys) to set the default encoding, unicode/long/
basestring, and JSON text sent with kafka-python as it was (a Python 2 str was bytes). `dmk migrate` fixes
these in its draft; `dmk migrate --verify` runs this original with the Python 2 compatibility layer.

Usage: python2_records_to_kafka.py <brokers> <topic> <output topic>
"""
import json
import sys

from kafka import KafkaProducer
from pyspark import SparkContext
from pyspark.streaming import StreamingContext
from pyspark.streaming.kafka import KafkaUtils

reload(sys)
sys.setdefaultencoding("utf-8")


def summary(line):
    parts = unicode(line).split(u" ")
    words = [w for w in parts[1:] if isinstance(w, basestring) and w]
    return {"n": long(parts[0]), "words": len(words), "first": words[0].upper() if words else None}


def sender(brokers, topic):
    def send_partition(records):
        producer = KafkaProducer(bootstrap_servers=brokers)
        for record in records:
            producer.send(topic, json.dumps(record, sort_keys=True))
        producer.flush()
    return send_partition


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print("Usage: python2_records_to_kafka.py <brokers> <topic> <output topic>", file=sys.stderr)
        sys.exit(-1)
    brokers, topic, output = sys.argv[1:]
    ssc = StreamingContext(SparkContext(appName="Python2RecordsToKafka"), 2)
    records = KafkaUtils.createDirectStream(ssc, [topic], {"metadata.broker.list": brokers})
    summaries = records.map(lambda kv: summary(kv[1]))
    summaries.foreachRDD(lambda rdd: rdd.foreachPartition(sender(brokers, output)))
    ssc.start()
    ssc.awaitTermination()
