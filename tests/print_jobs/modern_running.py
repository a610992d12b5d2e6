"""Words so far, to the console: a WRONG rewrite of legacy_words.py (a running total, not a count per batch)."""

import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

spark = SparkSession.builder.appName("words-running").config("spark.sql.shuffle.partitions", "2").getOrCreate()
lines = spark.readStream.format("socket").option("host", sys.argv[2]).option("port", sys.argv[3]).load()
counts = lines.select(F.explode(F.split("value", " ")).alias("word")).where(F.col("word") != "").groupBy("word").count()
counts.writeStream.format("console").outputMode("update").trigger(processingTime="1 second").start().awaitTermination()
