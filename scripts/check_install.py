"""Fail set-up loudly if pyspark's Python code and its jars disagree.

The Spark provider pulls ``pyspark-client``, which overwrites pyspark's Python files when the versions
differ, and ``pip check`` stays silent. The jars' version is the truth; compare."""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

import pyspark

jars = Path(pyspark.__file__).parent / "jars"
core = next(jars.glob("spark-core_*.jar"), None)
if core is None:
    sys.exit(f"no spark-core jar under {jars}: pyspark is not installed correctly")
jar_version = re.search(r"spark-core_[\d.]+-(.+)\.jar", core.name).group(1)
versions = {
    "pyspark (python code)": pyspark.__version__,
    "spark jars": jar_version,
    "pyspark dist": metadata.version("pyspark"),
    "pyspark-client dist": metadata.version("pyspark-client"),
}
if len(set(versions.values())) != 1:
    sys.exit(
        "pyspark versions disagree: "
        + ", ".join(f"{k}={v}" for k, v in versions.items())
        + "\npin pyspark and pyspark-client to the same version and reinstall pyspark"
    )
print(f"install check: pyspark {jar_version} (python code, jars, pyspark-client agree)")
