"""
 Aliases, chains, unpacking and parameters: the same constructs spelled the ways real jobs spell them.
"""
import pyspark.streaming as ps
import pyspark.streaming.kafka
from pyspark import SparkContext
from pyspark.streaming import DStream
from pyspark.streaming.kafka import KafkaUtils as KU


def enrich(clicks_stream):
    return clicks_stream.map(lambda kv: kv[1]).filter(lambda v: v != "")


def sink(counts: DStream) -> None:
    counts.pprint(20)


def build(ssc, brokers):
    params = {"metadata.broker.list": brokers, "auto.offset.reset": "smallest"}
    clicks, views = KU.createDirectStream(ssc, ["clicks"], params), KU.createDirectStream(ssc, ["views"], params)
    events = clicks.union(views).map(lambda kv: kv[1]).filter(lambda v: v.startswith("{"))
    old = pyspark.streaming.kafka.KafkaUtils.createStream(ssc, "zk:2181", "group", {"old-events": 1})
    streams = [enrich(s) for s in (clicks, views, old)]
    for each in streams:
        each.count()
    sink(events.countByValue())
    return events


context = ps.StreamingContext(SparkContext(), batchDuration=2)
built = build(context, "kafka:9092")
built.pprint()
context.start()
context.awaitTermination(timeout=60)
context.stop(stopSparkContext=True, stopGraceFully=False)
