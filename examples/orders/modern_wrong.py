"""Revenue per customer: a WRONG rewrite of legacy_job.py (it counts only the first item of each order).

    python modern_wrong.py BOOTSTRAP INPUT_TOPIC OUTPUT_TOPIC CHECKPOINT_DIR

The same query as modern_job.py, with the one mistake in how an order's revenue is computed.
"""

import sys

from pyspark.sql import functions as F

from modern_job import main, valid_orders


def revenue(orders):
    return valid_orders(orders).select(
        F.col("o.customer.id").alias("customer"),
        (F.col("o.items")[0].qty * F.col("o.items")[0].price_cents).alias("revenue"),  # the bug: item 0 only
    )


if __name__ == "__main__":
    main(sys.argv[1:5], revenue)
