"""
 One of everything: a catalogue job that uses each construct dmk migrate knows once (its tests pin every
 finding's line). Not a job anyone would run; every call is on a tracked StreamingContext or DStream.
"""
from pyspark import SparkConf, SparkContext
from pyspark.streaming import StreamingContext, StreamingListener
from pyspark.streaming.kafka import KafkaUtils, OffsetRange, TopicAndPartition

conf = SparkConf().setAll([
    ("spark.streaming.receiver.maxRate", "500"),
    ("spark.streaming.receiver.writeAheadLog.enable", "true"),
])
sc = SparkContext(conf=conf)


class BatchTimes(StreamingListener):
    def onBatchCompleted(self, batchCompleted):
        print(batchCompleted.batchInfo().processingDelay())


def setup():
    ssc = StreamingContext(sc, 5)
    ssc.checkpoint("/tmp/every-construct")
    ssc.remember(60)
    ssc.addStreamingListener(BatchTimes())
    receiver = KafkaUtils.createStream(ssc, "zk:2181", "group", {"events": 1})
    files = ssc.textFileStream("/data/incoming")
    queued = ssc.queueStream([sc.parallelize([1, 2, 3])])
    both = ssc.union(files, queued)
    pairs = receiver.mapValues(len).flatMapValues(lambda n: range(n)).mapPartitions(lambda it: it)
    pairs.groupByKey().glom().pprint()
    pairs.combineByKey(lambda v: v, lambda c, v: c + v, lambda a, b: a + b).pprint()
    files.countByValue().count().pprint()
    pairs.countByValueAndWindow(30, 10).pprint()
    files.reduceByWindow(lambda a, b: a + b, None, 30, 10).pprint()
    pairs.window(30, 10).leftOuterJoin(pairs).rightOuterJoin(pairs).fullOuterJoin(pairs).cogroup(pairs).pprint()
    pairs.join(pairs).transformWith(lambda a, b: a.union(b), pairs).pprint()
    both.repartition(4).cache().persist().checkpoint(50).saveAsTextFiles("/out/counts", "txt")
    print(both.slice(0, 10))
    return ssc


ssc = StreamingContext.getOrCreate("/tmp/every-construct", setup)
ranges = [OffsetRange("events", 0, 0, 100)]
KafkaUtils.createRDD(sc, {"metadata.broker.list": "kafka:9092"}, ranges, {TopicAndPartition("events", 0): None})
ssc.start()
if not ssc.awaitTerminationOrTimeout(600):
    ssc.stop(False)
