"""Words per batch of a topic the job names itself: its brokers and topic are constants, as many real jobs write
them (no argv). ``dmk compare-jobs --input-kind kafka`` feeds it through the stand-ins' redirect."""

from pyspark import SparkContext
from pyspark.streaming import StreamingContext
from pyspark.streaming.kafka import KafkaUtils

BROKERS = "localhost:9092"
TOPIC = "words_of_the_job"

if __name__ == "__main__":
    sc = SparkContext(appName="own-kafka-words")
    ssc = StreamingContext(sc, 2)
    lines = KafkaUtils.createDirectStream(ssc, [TOPIC], {"metadata.broker.list": BROKERS}).map(lambda kv: kv[1])
    lines.flatMap(lambda line: line.split(" ")).map(lambda word: (word, 1)).reduceByKey(lambda a, b: a + b).pprint()
    ssc.start()
    ssc.awaitTermination()
