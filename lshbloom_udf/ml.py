"""``LSHBloomDeduplicator``: LSHBloom deduplication as a ``pyspark.ml`` Transformer.

    from pyspark.ml import Pipeline
    from lshbloom_udf.ml import LSHBloomDeduplicator

    dedup = LSHBloomDeduplicator(inputCol="text", outputCol="is_duplicate", threshold=0.5)
    flagged = Pipeline(stages=[..., dedup]).fit(df).transform(df)

It wraps :func:`lshbloom_udf.spark.deduplicate`; its defaults are
:data:`lshbloom_udf.config.DEFAULTS`. Unlike most Transformers, ``transform``
runs Spark jobs right away (the keys and the sequential driver pass); only
the final join is lazy. The summary of the last run is ``lastSummary``.
Saved and loaded with ``save``/``load`` like any ``pyspark.ml`` stage.
"""

from __future__ import annotations

from typing import Any, Optional

from pyspark import keyword_only
from pyspark.ml import Transformer
from pyspark.ml.param import Param, Params, TypeConverters
from pyspark.ml.param.shared import HasInputCol, HasOutputCol
from pyspark.ml.util import DefaultParamsReadable, DefaultParamsWritable

from lshbloom_udf.config import DEFAULTS, MODES
from lshbloom_udf.index import BLOOM_BACKENDS, validate_bloom
from lshbloom_udf.minhash import normalization_name
from lshbloom_udf.spark import DedupInputError, deduplicate, resolve_params

_UNSET = ""  # string Params cannot hold None: the empty string means "not set"


def _to_normalize(value: Any) -> str:
    if value is None:
        return "none"
    try:
        return normalization_name(value)
    except (ValueError, TypeError, AttributeError) as e:
        raise TypeError(f"normalize: {e}") from None


def _to_bands(value: Any) -> list:
    bands = TypeConverters.toListInt(value)
    if bands and len(bands) != 2:
        raise TypeError(f"bands must be [b, r] or [], got {bands!r}")
    return bands


class LSHBloomDeduplicator(Transformer, HasInputCol, HasOutputCol, DefaultParamsReadable, DefaultParamsWritable):
    """Flags (or removes) near-duplicate documents of ``inputCol`` with LSHBloom, keep-first.

    ``outputCol`` (default ``is_duplicate``) receives the boolean flag in
    ``mode="flag"``; ``mode="filter"`` keeps the non-duplicates and
    ``mode="duplicates"`` the duplicates, without an output column.
    """

    mode = Param(Params._dummy(), "mode", f"one of {MODES}", typeConverter=TypeConverters.toString)
    idCol = Param(Params._dummy(), "idCol", "unique id column to join decisions on ('' = internal row ids)",
                  typeConverter=TypeConverters.toString)
    threshold = Param(Params._dummy(), "threshold", "Jaccard similarity threshold in (0, 1)",
                      typeConverter=TypeConverters.toFloat)
    numPerm = Param(Params._dummy(), "numPerm", "number of MinHash permutations", typeConverter=TypeConverters.toInt)
    bands = Param(Params._dummy(), "bands", "explicit [b, r] instead of the optimum for the threshold ([] = optimum)",
                  typeConverter=_to_bands)
    ngram = Param(Params._dummy(), "ngram", "word n-gram size of the shingles", typeConverter=TypeConverters.toInt)
    normalize = Param(Params._dummy(), "normalize", "text normalization: none, all, or a comma list of nfkc,lower,punct",
                      typeConverter=_to_normalize)
    seed = Param(Params._dummy(), "seed", "seed of the MinHash permutations", typeConverter=TypeConverters.toInt)
    scheme = Param(Params._dummy(), "scheme", "permutation scheme: affine32 (datasketch >= 2) or legacy",
                   typeConverter=TypeConverters.toString)
    bandKey = Param(Params._dummy(), "bandKey",
                    "band key: sum (datasketch's) or mix (no band-sum collisions at scale; not datasketch's)",
                    typeConverter=TypeConverters.toString)
    pEffective = Param(Params._dummy(), "pEffective",
                       "effective Bloom false-positive rate of a new index (0 = default; an existing index keeps its own)",
                       typeConverter=TypeConverters.toFloat)
    expectedDocs = Param(Params._dummy(), "expectedDocs",
                         "capacity of a new index (0 = the number of input rows; an existing index keeps its own)",
                         typeConverter=TypeConverters.toInt)
    indexDir = Param(Params._dummy(), "indexDir", "directory to keep (and reuse) the index in ('' = temporary)",
                     typeConverter=TypeConverters.toString)
    orderBy = Param(Params._dummy(), "orderBy", "columns giving the processing order ([] = input order)",
                    typeConverter=TypeConverters.toListString)
    checkpoint = Param(Params._dummy(), "checkpoint", "local or reliable checkpoint of the keyed rows",
                       typeConverter=TypeConverters.toString)
    progress = Param(Params._dummy(), "progress", "show driver-pass progress on stderr", typeConverter=TypeConverters.toBoolean)
    bloom = Param(Params._dummy(), "bloom",
                  f"Bloom filter backend of a new index, one of {BLOOM_BACKENDS} (an existing index must have it)",
                  typeConverter=TypeConverters.toString)

    @keyword_only
    def __init__(
        self,
        *,
        inputCol: str = DEFAULTS["text_column"],
        outputCol: str = DEFAULTS["flag_column"],
        mode: str = DEFAULTS["mode"],
        idCol: Optional[str] = None,
        threshold: float = DEFAULTS["threshold"],
        numPerm: int = DEFAULTS["num_perm"],
        bands: Optional[list] = None,
        ngram: int = DEFAULTS["ngram"],
        normalize: Any = DEFAULTS["normalize"],
        seed: int = DEFAULTS["seed"],
        scheme: str = DEFAULTS["scheme"],
        bandKey: str = DEFAULTS["band_key"],
        pEffective: Optional[float] = None,
        expectedDocs: Optional[int] = None,
        indexDir: Optional[str] = None,
        orderBy: Optional[list] = None,
        checkpoint: str = DEFAULTS["checkpoint"],
        progress: bool = True,
        bloom: str = DEFAULTS["bloom"],
    ):
        super().__init__()
        self._setDefault(
            inputCol=DEFAULTS["text_column"],
            outputCol=DEFAULTS["flag_column"],
            mode=DEFAULTS["mode"],
            idCol=_UNSET,
            threshold=DEFAULTS["threshold"],
            numPerm=DEFAULTS["num_perm"],
            bands=list(DEFAULTS["bands"] or []),
            ngram=DEFAULTS["ngram"],
            normalize=_to_normalize(DEFAULTS["normalize"]),
            seed=DEFAULTS["seed"],
            scheme=DEFAULTS["scheme"],
            bandKey=DEFAULTS["band_key"],
            pEffective=0.0,
            expectedDocs=0,
            indexDir=_UNSET,
            orderBy=[],
            checkpoint=DEFAULTS["checkpoint"],
            progress=True,
            bloom=DEFAULTS["bloom"],
        )
        self.lastSummary: Optional[dict] = None
        kwargs = self._input_kwargs
        self.setParams(**kwargs)

    @keyword_only
    def setParams(self, **kwargs: Any) -> "LSHBloomDeduplicator":
        """Set any of the constructor's parameters (validated)."""
        kwargs = {k: v for k, v in self._input_kwargs.items()}
        for name in ("idCol", "indexDir"):
            if name in kwargs and kwargs[name] is None:
                kwargs[name] = _UNSET
        for name in ("bands", "orderBy"):
            if name in kwargs and kwargs[name] is None:
                kwargs[name] = []
        if kwargs.get("pEffective") is None and "pEffective" in kwargs:
            kwargs["pEffective"] = 0.0
        if kwargs.get("expectedDocs") is None and "expectedDocs" in kwargs:
            kwargs["expectedDocs"] = 0
        if isinstance(kwargs.get("orderBy"), str):
            kwargs["orderBy"] = [kwargs["orderBy"]]
        self._set(**kwargs)
        self._validate()
        return self

    # -- setters and getters (validated) -------------------------------------

    def _setp(self, **kw: Any) -> "LSHBloomDeduplicator":
        self._set(**kw)
        self._validate()
        return self

    def setInputCol(self, value: str) -> "LSHBloomDeduplicator":
        return self._setp(inputCol=value)

    def setOutputCol(self, value: str) -> "LSHBloomDeduplicator":
        return self._setp(outputCol=value)

    def setMode(self, value: str) -> "LSHBloomDeduplicator":
        return self._setp(mode=value)

    def setIdCol(self, value: Optional[str]) -> "LSHBloomDeduplicator":
        return self._setp(idCol=value or _UNSET)

    def setThreshold(self, value: float) -> "LSHBloomDeduplicator":
        return self._setp(threshold=value)

    def setNumPerm(self, value: int) -> "LSHBloomDeduplicator":
        return self._setp(numPerm=value)

    def setBands(self, value: Optional[list]) -> "LSHBloomDeduplicator":
        return self._setp(bands=value or [])

    def setNgram(self, value: int) -> "LSHBloomDeduplicator":
        return self._setp(ngram=value)

    def setNormalize(self, value: Any) -> "LSHBloomDeduplicator":
        return self._setp(normalize=value)

    def setSeed(self, value: int) -> "LSHBloomDeduplicator":
        return self._setp(seed=value)

    def setScheme(self, value: str) -> "LSHBloomDeduplicator":
        return self._setp(scheme=value)

    def setBandKey(self, value: str) -> "LSHBloomDeduplicator":
        return self._setp(bandKey=value)

    def setPEffective(self, value: Optional[float]) -> "LSHBloomDeduplicator":
        return self._setp(pEffective=value or 0.0)

    def setExpectedDocs(self, value: Optional[int]) -> "LSHBloomDeduplicator":
        return self._setp(expectedDocs=value or 0)

    def setIndexDir(self, value: Optional[str]) -> "LSHBloomDeduplicator":
        return self._setp(indexDir=value or _UNSET)

    def setOrderBy(self, value: Any) -> "LSHBloomDeduplicator":
        return self._setp(orderBy=[value] if isinstance(value, str) else (value or []))

    def setCheckpoint(self, value: str) -> "LSHBloomDeduplicator":
        return self._setp(checkpoint=value)

    def setProgress(self, value: bool) -> "LSHBloomDeduplicator":
        return self._setp(progress=value)

    def setBloom(self, value: str) -> "LSHBloomDeduplicator":
        return self._setp(bloom=value)

    def getMode(self) -> str:
        return self.getOrDefault(self.mode)

    def getIdCol(self) -> Optional[str]:
        return self.getOrDefault(self.idCol) or None

    def getThreshold(self) -> float:
        return self.getOrDefault(self.threshold)

    def getNumPerm(self) -> int:
        return self.getOrDefault(self.numPerm)

    def getBands(self) -> Optional[tuple]:
        bands = self.getOrDefault(self.bands)
        return tuple(bands) if bands else None

    def getNgram(self) -> int:
        return self.getOrDefault(self.ngram)

    def getNormalize(self) -> str:
        return self.getOrDefault(self.normalize)

    def getSeed(self) -> int:
        return self.getOrDefault(self.seed)

    def getScheme(self) -> str:
        return self.getOrDefault(self.scheme)

    def getBandKey(self) -> str:
        return self.getOrDefault(self.bandKey)

    def getPEffective(self) -> Optional[float]:
        return self.getOrDefault(self.pEffective) or None

    def getExpectedDocs(self) -> Optional[int]:
        return self.getOrDefault(self.expectedDocs) or None

    def getIndexDir(self) -> Optional[str]:
        return self.getOrDefault(self.indexDir) or None

    def getOrderBy(self) -> Optional[list]:
        return list(self.getOrDefault(self.orderBy)) or None

    def getCheckpoint(self) -> str:
        return self.getOrDefault(self.checkpoint)

    def getProgress(self) -> bool:
        return self.getOrDefault(self.progress)

    def getBloom(self) -> str:
        return self.getOrDefault(self.bloom)

    # -- validation and transform ---------------------------------------------

    def _validate(self) -> None:
        """Raise ``ValueError`` for a value no run could use (checked on every set and on transform)."""
        mode = self.getMode()
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        from lshbloom_udf.config import CHECKPOINTS

        if self.getCheckpoint() not in CHECKPOINTS:
            raise ValueError(f"checkpoint must be one of {CHECKPOINTS}, got {self.getCheckpoint()!r}")
        validate_bloom(self.getBloom())
        p_eff = self.getPEffective()
        expected = self.getExpectedDocs()
        if expected is not None and expected < 1:
            raise ValueError(f"expectedDocs must be a positive integer (or 0 for the input size), got {expected}")
        if self.getOrDefault(self.expectedDocs) < 0:
            raise ValueError(f"expectedDocs must be >= 0, got {self.getOrDefault(self.expectedDocs)}")
        if not self.getOrDefault(self.inputCol):
            raise ValueError("inputCol must be a column name")
        if mode == "flag" and not self.getOrDefault(self.outputCol):
            raise ValueError("outputCol must be a column name")
        try:
            resolve_params(
                self.getThreshold(),
                self.getNumPerm(),
                self.getNgram(),
                self.getNormalize(),
                self.getSeed(),
                self.getScheme(),
                p_eff if p_eff is not None else DEFAULTS["p_effective"],
                self.getBands(),
                band_key=self.getBandKey(),
            )
        except DedupInputError as e:
            raise ValueError(str(e)) from None

    def _transform(self, dataset):
        self._validate()
        result = deduplicate(
            dataset,
            text_col=self.getOrDefault(self.inputCol),
            id_col=self.getIdCol(),
            mode=self.getMode(),
            threshold=self.getThreshold(),
            num_perm=self.getNumPerm(),
            ngram=self.getNgram(),
            normalize=self.getNormalize(),
            seed=self.getSeed(),
            scheme=self.getScheme(),
            band_key=self.getBandKey(),
            p_effective=self.getPEffective(),
            expected_docs=self.getExpectedDocs(),
            index_dir=self.getIndexDir(),
            order_by=self.getOrderBy(),
            bands=self.getBands(),
            flag_col=self.getOrDefault(self.outputCol),
            checkpoint=self.getCheckpoint(),
            progress=self.getProgress(),
            bloom=self.getBloom(),
            return_summary=True,
        )
        self.lastSummary = result.summary
        return result.df
