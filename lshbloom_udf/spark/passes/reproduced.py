"""No pass: the flags of the committed run that ingested these documents in this order, read back from the index."""

from __future__ import annotations

from lshbloom_udf.errors import InternalError
from lshbloom_udf.spark.passes.base import Decided, PassInput, PassOutcome, PassResult
from lshbloom_udf.spark.passes.scan import ScanResult


class ReproducedPass:
    """The earlier run's stored flags (a kept index that already ingested this input, ``force_new_ingest`` unset)."""

    name, title, timer = "reproduced", "reproduce the earlier run's flags", "reproduce"

    def decide(self, given: PassInput) -> Decided:
        prior, txn = given.prior, given.txn
        if prior is None or txn is None:  # select_pass picks it only for a kept index's committed run
            raise InternalError("internal error: no committed run of a kept index to reproduce")
        rows, manifest = txn.load_duplicates(prior), txn.manifest()
        if manifest is None:  # the prior run is the manifest's
            raise InternalError(f"internal error: {given.index_dir} lost its manifest during the run")
        outcome = PassOutcome([rows], prior.duplicates, prior.empty_documents, given.documents)
        if len(rows) != outcome.duplicates:
            raise InternalError(
                f"{given.index_dir}: run {prior.run_id} records {outcome.duplicates} duplicates but stores "
                f"{len(rows)}"
            )
        report = given.report().replace(
            reproduced=True,
            run_id=prior.run_id,
            reproduced_from=prior.run_id,
            inserted_before=int(prior.inserted_total or 0) - prior.inserted,
            inserted_total=manifest.inserted,
            reused=True,
            backend=manifest.bloom,
        )
        return Decided(PassResult(outcome, report, given.params), ScanResult())

