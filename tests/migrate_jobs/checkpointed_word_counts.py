"""Word counts that survive a restart: the context is rebuilt from its checkpoint when there is one.

Run: python checkpointed_word_counts.py HOST PORT CHECKPOINT_DIR OUTPUT_FILE

Written for dmk's migrate tests. Each batch's (word, count) pairs, less the skipped words "a", "b" and "c"
(a broadcast list), are printed and appended to OUTPUT_FILE; an accumulator counts the skipped occurrences
since the start. Both are made once per driver, on first use, so a context restored from the checkpoint
gets them too.
"""
import os
import sys

from pyspark import SparkContext
from pyspark.streaming import StreamingContext

_shared = {}


def _skipped_words(spark_context):
    if "skipped" not in _shared:
        _shared["skipped"] = spark_context.broadcast(["a", "b", "c"])
    return _shared["skipped"]


def _skipped_tally(spark_context):
    if "tally" not in _shared:
        _shared["tally"] = spark_context.accumulator(0)
    return _shared["tally"]


def _build(host, port, checkpoint_dir, output_file):
    print("No checkpoint to restore: building a new context")
    if os.path.exists(output_file):
        os.remove(output_file)
    spark_context = SparkContext(appName="CheckpointedWordCounts")
    streaming = StreamingContext(spark_context, 1)
    streaming.checkpoint(checkpoint_dir)
    received = streaming.socketTextStream(host, port)
    tokens = received.flatMap(lambda text: text.split(" "))
    per_batch = tokens.map(lambda token: (token, 1)).reduceByKey(lambda left, right: left + right)

    def report(batch_time, pairs):
        skipped = _skipped_words(pairs.context)
        tally = _skipped_tally(pairs.context)

        def kept(pair):
            word, count = pair
            if word in skipped.value:
                tally.add(count)
                return False
            return True

        line = f"Counts at time {batch_time} {pairs.filter(kept).collect()}"
        print(line)
        print(f"Dropped {tally.value} word(s) totally")
        print("Appending to " + os.path.abspath(output_file))
        with open(output_file, "a") as sink:
            sink.write(line + "\n")

    per_batch.foreachRDD(report)
    return streaming


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit("usage: checkpointed_word_counts.py HOST PORT CHECKPOINT_DIR OUTPUT_FILE")
    host, port, checkpoint_dir, output_file = sys.argv[1:]
    streaming = StreamingContext.getOrCreate(checkpoint_dir,
                                             lambda: _build(host, int(port), checkpoint_dir, output_file))
    streaming.start()
    streaming.awaitTermination()
