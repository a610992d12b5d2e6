"""Revenue per customer: a Spark 2.4 DStream job, written as a team wrote it then (run unmodified).

    python legacy_job.py BOOTSTRAP INPUT_TOPIC OUTPUT_TOPIC CHECKPOINT_DIR
"""

import json
import sys

from kafka import KafkaProducer
from pyspark import SparkContext
from pyspark.streaming import StreamingContext
from pyspark.streaming.kafka import KafkaUtils


def parse(value):
    try:
        order = json.loads(value)
    except ValueError:
        return []
    if not isinstance(order, dict) or not isinstance(order.get("customer"), dict):
        return []
    items, customer = order.get("items"), order["customer"].get("id")
    if not isinstance(items, list) or not isinstance(customer, str):
        return []
    return [(customer, (sum(int(i["qty"]) * int(i["price_cents"]) for i in items), 1))]


def add(a, b):
    return a[0] + b[0], a[1] + b[1]


def update(new, total):
    for revenue, orders in new:
        total = (total[0] + revenue, total[1] + orders) if total else (revenue, orders)
    return total


def send(rows, bootstrap, topic):
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for customer, (revenue, orders) in rows:
        message = {"customer": customer, "revenue": revenue, "orders": orders}
        producer.send(topic, key=customer.encode(), value=json.dumps(message).encode())
    producer.flush()
    producer.close()


def create(bootstrap, topic, output_topic, checkpoint):
    sc = SparkContext(appName="orders-revenue")
    ssc = StreamingContext(sc, 1)
    ssc.checkpoint(checkpoint)
    stream = KafkaUtils.createDirectStream(
        ssc, [topic], {"metadata.broker.list": bootstrap, "auto.offset.reset": "smallest"})
    totals = stream.flatMap(lambda kv: parse(kv[1])).reduceByKey(add).updateStateByKey(update)
    totals.foreachRDD(lambda rdd: rdd.foreachPartition(lambda rows: send(rows, bootstrap, output_topic)))
    return ssc


if __name__ == "__main__":
    bootstrap, topic, output_topic, checkpoint = sys.argv[1:5]
    ssc = StreamingContext.getOrCreate(checkpoint, lambda: create(bootstrap, topic, output_topic, checkpoint))
    ssc.start()
    ssc.awaitTermination()
