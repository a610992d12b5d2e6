"""
 A class-based DStream job: the context and the streams live in self.*, one method builds the pipeline from a
 helper function that is passed the StreamingContext, another returns a DStream. Every construct must be
 found; none is dropped because it sits behind self.
"""
from pyspark import SparkContext
from pyspark.streaming import StreamingContext
from pyspark.streaming.kafka import KafkaUtils

BROKERS = "localhost:9092"


def open_input(context, topic):
    return KafkaUtils.createDirectStream(context, [topic], {"metadata.broker.list": BROKERS})


class ClickCounter(object):
    def __init__(self, topic, batch_seconds):
        self.sc = SparkContext(appName="ClickCounter")
        self.context = StreamingContext(self.sc, batch_seconds)
        self.context.checkpoint("/tmp/click-counter")
        self.clicks = open_input(self.context, topic)

    def pairs(self):
        return self.clicks.map(lambda kv: (kv[1], 1))

    def build(self):
        totals = self.pairs().updateStateByKey(lambda new, old: sum(new) + (old or 0))
        self.totals = totals
        self.totals.pprint()

    def run(self):
        self.build()
        self.context.start()
        self.context.awaitTermination()


if __name__ == "__main__":
    ClickCounter("clicks", 2).run()
