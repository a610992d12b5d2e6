"""Revenue per customer: the Structured Streaming rewrite of legacy_job.py, as written for production.

    python modern_job.py BOOTSTRAP INPUT_TOPIC OUTPUT_TOPIC CHECKPOINT_DIR [STARTING_OFFSETS [LEGACY_TOTALS]]

To take over from the running legacy job (a cutover: ``dmk cutover checkpoint DIR --state-from kafka:TOPIC
--key customer --seed-state FILE``), pass the startingOffsets JSON it prints and the Parquet FILE of the legacy
job's last totals: the query starts where the legacy job stopped and counts on from its totals.
"""

import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id string, customer struct<id: string, country: string>, items array<struct<sku: string, qty: int, price_cents: long>>"


def valid_orders(orders):
    parsed = orders.select(F.from_json(F.col("value").cast("string"), ORDER).alias("o"))
    return parsed.where(F.col("o.customer.id").isNotNull() & F.col("o.items").isNotNull())


def revenue(orders):
    return valid_orders(orders).select(
        F.col("o.customer.id").alias("customer"),
        F.aggregate("o.items", F.lit(0).cast("long"), lambda total, i: total + i.qty * i.price_cents).alias("revenue"),
    )


# --8<-- [start:continued]
def continued(totals, legacy_totals):
    """``totals`` counted on from the legacy job's last totals: each updated customer's row plus its legacy row.

    A stream-static join (the legacy totals are a small table, broadcast), so the query's state starts empty and
    its checkpoint is an ordinary one; customers the query never sees keep their legacy row as their total.
    """
    prior = legacy_totals.select("customer", F.col("revenue").alias("legacy_revenue"),
                                 F.col("orders").alias("legacy_orders"))
    joined = totals.join(F.broadcast(prior), "customer", "left_outer")
    return joined.select("customer", (F.col("revenue") + F.coalesce("legacy_revenue", F.lit(0))).alias("revenue"),
                         (F.col("orders") + F.coalesce("legacy_orders", F.lit(0))).alias("orders"))
# --8<-- [end:continued]


def main(argv, revenue_of=revenue):
    """Run the query until it is stopped; ``revenue_of`` turns the Kafka records into (customer, revenue) rows.

    ``argv``: bootstrap servers, input topic, output topic, checkpoint; then, to continue a legacy job (either may
    be empty), the startingOffsets JSON of its position and the Parquet file of its last totals.
    """
    bootstrap, topic, output_topic, checkpoint = argv[:4]
    starting_offsets, legacy_totals = ([*argv[4:6], "", ""])[:2]
    # A small job: 4 shuffle partitions, not Spark's 200 (each an empty state store per micro-batch).
    spark = SparkSession.builder.appName("orders-revenue").config("spark.sql.shuffle.partitions", "4").getOrCreate()
    orders = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", starting_offsets or "earliest").load())
    totals = revenue_of(orders).groupBy("customer").agg(F.sum("revenue").alias("revenue"), F.count("*").alias("orders"))
    if legacy_totals:
        totals = continued(totals, spark.read.parquet(legacy_totals))
    query = (totals.select(F.col("customer").alias("key"), F.to_json(F.struct("customer", "revenue", "orders")).alias("value"))
             .writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", output_topic)
             .option("checkpointLocation", checkpoint).outputMode("update").start())
    query.awaitTermination()


if __name__ == "__main__":
    main(sys.argv[1:7])
