"""``python tests/connect_checks.py INPUT WORKDIR``: the API and the Transformer over Spark Connect; JSON on stdout's last line.

Run in a fresh interpreter by tests/deploy/test_deploy_connect.py: ``remote("local[2]")``
starts a Spark Connect server in this process, which needs a process without
a classic SparkContext, and it leaves the process in Connect mode.
"""

import json
import os
import sys
import traceback


def flags(df, flag_col="is_duplicate"):
    return {r["id"]: r[flag_col] for r in df.select("id", flag_col).collect()}


def main(inp: str, work: str) -> dict:
    from pyspark.sql import SparkSession

    from spark_support import JVM_OPTIONS

    spark = (
        SparkSession.builder.remote("local[2]")
        .config("spark.connect.grpc.binding.address", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    try:
        return checks(spark, inp, work)
    finally:
        spark.stop()


def checks(spark, inp: str, work: str) -> dict:
    from pyspark.ml import Pipeline, PipelineModel

    from lshbloom_udf import deduplicate
    from lshbloom_udf.errors import exit_code
    from lshbloom_udf.job import run as run_job
    from lshbloom_udf.ml import LSHBloomDeduplicator

    out: dict = {"session": type(spark).__module__}
    df = spark.read.json(inp)
    out["without_id"] = flags(deduplicate(df, progress=False))
    out["with_id"] = flags(deduplicate(df, id_col="id", progress=False))
    index = f"{work}/index"
    first = deduplicate(df, id_col="id", index_dir=index, return_summary=True, progress=False)
    out["index_dir"] = flags(first.df)
    # The index lives with the client (the driver pass runs here): a second run over it reproduces the first.
    again = deduplicate(df, id_col="id", index_dir=index, return_summary=True, progress=False)
    out["index_dir_again"] = flags(again.df)
    out["index_reproduced"] = bool(again.summary["index"].get("reproduced"))
    out["filter_rows"] = deduplicate(df, id_col="id", mode="filter", progress=False).count()
    out["cross_run"] = cross_run(spark, f"{work}/crossrun-index")
    result = deduplicate(df, id_col="id", verify=True, duplicate_of=True, progress=False, return_summary=True)
    verified = result.df
    out["verified"] = {r["id"]: [r["is_duplicate"], r["duplicate_of"], r["similarity"]]
                       for r in verified.select("id", "is_duplicate", "duplicate_of", "similarity").collect()}
    out["verify_memory"] = result.summary["verify"]["memory"]
    out["sharded"] = flags(deduplicate(df, id_col="id", pass_mode="sharded", progress=False))
    try:
        deduplicate(df, id_col="id", pass_mode="sharded", index_dir=f"{work}/sharded-index", progress=False)
        out["sharded_index"] = "ran"
    except Exception as e:  # noqa: BLE001  (reported to the test)
        out["sharded_index"] = {"error": type(e).__name__, "message": str(e)}
    pipeline = Pipeline(stages=[LSHBloomDeduplicator(idCol="id", outputCol="dup")])
    model = pipeline.fit(df)
    out["pipeline"] = flags(model.transform(df), "dup")
    model.write().overwrite().save(f"{work}/model")
    out["pipeline_reloaded"] = flags(PipelineModel.load(f"{work}/model").transform(df), "dup")
    # The socket transfer needs a classic session: asked for over Spark Connect, a clear error.
    try:
        deduplicate(df, key_transfer="socket", progress=False)
        out["socket_transfer"] = "ran"
    except Exception as e:  # noqa: BLE001  (reported to the test)
        out["socket_transfer"] = {"error": type(e).__name__, "message": str(e)}
    # The job needs a classic session: over Spark Connect it refuses to start, saying why.
    try:
        run_job(["--input", inp, "--output", f"{work}/job-out", "--index-dir", f"{work}/job-index"])
        out["job"] = "ran"
    except Exception as e:  # noqa: BLE001  (reported to the test)
        out["job"] = {"error": type(e).__name__, "exit_code": exit_code(e), "message": str(e)}
    return out


def cross_run(spark, index: str) -> list:
    """Each batch of :data:`CROSS_RUN_BATCHES` deduplicated into one kept index (verification judges the later
    batches' flags against the earlier runs' records): ``{id: [is_duplicate, duplicate_of]}`` per batch."""
    from crossrun_support import batches

    from lshbloom_udf import deduplicate

    out = []
    for batch in batches(*CROSS_RUN_BATCHES):
        df = spark.createDataFrame([(i, t) for i, t, _ in batch], "id string, text string")
        result = deduplicate(df, id_col="id", index_dir=index, duplicate_of=True, progress=False)
        out.append({r["id"]: [r["is_duplicate"], r["duplicate_of"]]
                    for r in result.select("id", "is_duplicate", "duplicate_of").collect()})
    return out


# (batches, documents a batch, planted copies of first-batch documents in the last): tests/crossrun_support.py
CROSS_RUN_BATCHES = (3, 40, 6)


if __name__ == "__main__":
    status = 1
    try:
        print(json.dumps(main(sys.argv[1], sys.argv[2])), flush=True)
        status = 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stderr.flush()
        # Threads of the in-process Connect server can keep the interpreter from exiting after a failure.
        os._exit(status)
