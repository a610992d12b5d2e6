"""Words per micro-batch, appended as text to an absolute local directory: the rewrite of legacy_saved.py.

Each micro-batch's counts are written from ``foreachBatch`` as ``('word', n)`` lines (what ``saveAsTextFiles``
wrote for a pair), into one directory the job names itself. ``dmk compare-jobs --output
files:hdfs://localhost:9000/dmk-tests/words,/tmp/dmk-tests-own-output/words`` reads both jobs' files, each
redirected to the run.
"""

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

spark = SparkSession.builder.appName("saved-words").config("spark.sql.shuffle.partitions", "2").getOrCreate()
lines = spark.readStream.format("socket").option("host", "localhost").option("port", 9999).load()
words = lines.select(F.explode(F.split("value", " ")).alias("word")).where(F.col("word") != "")


def per_batch(batch, batch_id):
    counts = batch.groupBy("word").count()
    text = counts.select(F.format_string("('%s', %d)", "word", "count").alias("value"))
    text.write.mode("append").text("/tmp/dmk-tests-own-output/words")


words.writeStream.foreachBatch(per_batch).trigger(processingTime="1 second").start().awaitTermination()
