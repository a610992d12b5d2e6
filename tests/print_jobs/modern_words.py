"""Words per micro-batch, printed: the rewrite of legacy_words.py (foreachBatch keeps per-batch counts)."""

import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

kind = sys.argv[1]
spark = SparkSession.builder.appName("words-per-batch").config("spark.sql.shuffle.partitions", "2").getOrCreate()
if kind == "socket":
    lines = spark.readStream.format("socket").option("host", sys.argv[2]).option("port", sys.argv[3]).load()
elif kind == "files":
    lines = spark.readStream.format("text").load(sys.argv[2])
elif kind == "numbers":  # the queue job's rewrite: one number per line, remainders counted
    lines = spark.readStream.format("text").load(sys.argv[2])
else:
    lines = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", sys.argv[2])
             .option("subscribe", sys.argv[3]).load().select(F.col("value").cast("string").alias("value")))
if kind == "numbers":
    words = lines.select((F.col("value").cast("long") % 10).alias("word"))
else:
    words = lines.select(F.explode(F.split("value", " ")).alias("word")).where(F.col("word") != "")


def per_batch(batch, batch_id):
    for row in batch.groupBy("word").count().collect():
        print((row["word"], row["count"]))


words.writeStream.foreachBatch(per_batch).trigger(processingTime="1 second").start().awaitTermination()
