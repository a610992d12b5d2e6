"""Revenue per customer: the Structured Streaming rewrite of legacy_job.py, as written for production.

    python modern_job.py BOOTSTRAP INPUT_TOPIC OUTPUT_TOPIC CHECKPOINT_DIR
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


def main(argv, revenue_of=revenue):
    """Run the query until it is stopped; ``revenue_of`` turns the Kafka records into (customer, revenue) rows."""
    bootstrap, topic, output_topic, checkpoint = argv[:4]
    # A small job: 4 shuffle partitions, not Spark's 200 (each an empty state store per micro-batch).
    spark = SparkSession.builder.appName("orders-revenue").config("spark.sql.shuffle.partitions", "4").getOrCreate()
    orders = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest").load())
    totals = revenue_of(orders).groupBy("customer").agg(F.sum("revenue").alias("revenue"), F.count("*").alias("orders"))
    query = (totals.select(F.col("customer").alias("key"), F.to_json(F.struct("customer", "revenue", "orders")).alias("value"))
             .writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", output_topic)
             .option("checkpointLocation", checkpoint).outputMode("update").start())
    query.awaitTermination()


if __name__ == "__main__":
    main(sys.argv[1:5])
