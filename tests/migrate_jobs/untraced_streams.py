"""
 DStreams that come from another module, where a static reading cannot follow them: every DStream-only call
 on them is reported as unresolved, never dropped. Module functions and pprint.pprint are not DStreams.
"""
import pprint

from pyspark.sql import functions as F

from pipeline import make_context, make_stream  # another module of the job

ssc = make_context()
events = make_stream(ssc)
events.foreachRDD(lambda rdd: pprint.pprint(rdd.take(5)))
windowed = events.window(30, 10)
windowed.pprint()
others = [make_stream(ssc)]
others[0].updateStateByKey(lambda new, old: (old or 0) + len(new)).saveAsTextFiles("/out/state")
print(F.window("ts", "10 seconds"))
ssc.start()
ssc.awaitTermination()
