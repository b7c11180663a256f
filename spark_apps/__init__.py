"""PySpark applications launched by the DAGs through SparkSubmitOperator (and in-process by the CLI)."""
