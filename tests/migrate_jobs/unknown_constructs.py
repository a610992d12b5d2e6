"""
 Constructs dmk migrate does not know: a Scala-only method, a private attribute, a method that does not exist,
 and a configuration key outside its table. Each must be reported as unknown, none skipped.
"""
from pyspark import SparkConf, SparkContext
from pyspark.streaming import StreamingContext

conf = SparkConf().set("spark.streaming.kafka.consumer.cache.enabled", "false")
ssc = StreamingContext(SparkContext(conf=conf), 1)
lines = ssc.socketTextStream("localhost", 9999)
lines.foreach(print)
print(lines._jdstream)
ssc.awaitTerminationOrTimeoutSeconds(10)
lines.map(str.upper).saveAsHadoopFiles("/out/lines")
