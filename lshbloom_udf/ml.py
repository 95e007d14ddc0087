"""``LSHBloomDeduplicator``: LSHBloom deduplication as a ``pyspark.ml`` Transformer.

    from pyspark.ml import Pipeline
    from lshbloom_udf.ml import LSHBloomDeduplicator

    dedup = LSHBloomDeduplicator(inputCol="text", outputCol="is_duplicate", threshold=0.5)
    flagged = Pipeline(stages=[..., dedup]).fit(df).transform(df)

Its Params, their defaults, checks, getters and setters are derived from the
settings of :class:`lshbloom_udf.config.DedupConfig` (each setting with a
Param name: ``inputCol`` is ``text_column``, ``outputCol`` ``flag_column``,
``numPerm`` ``num_perm``, …). A Param whose setting has no default (``idCol``,
``indexDir``, ``bands``, ``orderBy``, ``expectedDocs``, ``pEffective``) is
unset until given; setting it to ``None`` unsets it. Every value is checked
when it is set (the type converter), and the settings are checked together
after every set: a set that fails leaves the Transformer as it was.

Unlike most Transformers, ``transform`` runs Spark jobs right away (the keys
and the sequential driver pass); only the final join is lazy. The summary of
the last run is ``lastSummary``. Saved and loaded with ``save``/``load`` like
any ``pyspark.ml`` stage.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from pyspark import keyword_only
from pyspark.ml import Transformer
from pyspark.ml.param import Param, Params, TypeConverters
from pyspark.ml.util import DefaultParamsReadable, DefaultParamsWritable

from lshbloom_udf.config import DEFAULTS, DedupConfig, Setting, settings
from lshbloom_udf.minhash import normalization_name
from lshbloom_udf.spark.api import run


def _to_normalize(value: Any) -> str:
    try:
        return normalization_name(value)
    except (ValueError, TypeError, AttributeError) as e:
        raise TypeError(f"normalize: {e}") from None


def _to_columns(value: Any) -> list:
    return [value] if isinstance(value, str) else TypeConverters.toListString(value)


# How a Param value of each setting type is converted before the setting's own check.
_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "int": TypeConverters.toInt,
    "float": TypeConverters.toFloat,
    "str": TypeConverters.toString,
    "bool": TypeConverters.toBoolean,
}
_SPECIAL: dict[str, Callable[[Any], Any]] = {"normalize": _to_normalize, "bands": TypeConverters.toListInt,
                                             "order_by": _to_columns}


def _param_name(name: str, spec: Setting) -> str:
    if spec.param:
        return spec.param
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _converter(name: str, annotation: str, spec: Setting) -> Callable[[Any], Any]:
    to_type = _SPECIAL.get(name) or _CONVERTERS[annotation.removeprefix("Optional[").rstrip("]")]

    def convert(value: Any) -> Any:
        checked = spec.check(name, to_type(value))
        return list(checked) if isinstance(checked, tuple) else checked

    return convert


# Param name -> setting name, for every setting the Transformer has.
_SETTING_OF: dict[str, str] = {}


class LSHBloomDeduplicator(Transformer, DefaultParamsReadable, DefaultParamsWritable):
    """Flags (or removes) near-duplicate documents of ``inputCol`` with LSHBloom, keep-first.

    ``outputCol`` (default ``is_duplicate``) receives the boolean flag in
    ``mode="flag"``; ``mode="filter"`` keeps the non-duplicates and
    ``mode="duplicates"`` the duplicates, without an output column. Every
    other Param is the setting of the same meaning (see the module docs).
    """

    # What @keyword_only saves of the call's keyword arguments (pyspark sets it on the instance, undeclared).
    _input_kwargs: dict[str, Any]

    @keyword_only
    def __init__(self, **kwargs: Any):
        super().__init__()
        defaults = {p: DedupConfig.__dataclass_fields__[s].default for p, s in _SETTING_OF.items()}
        self._setDefault(**{p: v for p, v in defaults.items() if v is not None and not _sizing(p)})
        self.lastSummary: Optional[dict] = None
        self.setParams(**self._input_kwargs)

    @keyword_only
    def setParams(self, **kwargs: Any) -> "LSHBloomDeduplicator":
        """Set any of the Params (checked; ``None`` unsets)."""
        return self._set(**self._input_kwargs)

    def _set(self, **kwargs: Any) -> "LSHBloomDeduplicator":
        saved = dict(self._paramMap)
        try:
            for name, value in kwargs.items():
                if value is None:
                    self._paramMap.pop(self.getParam(name), None)
            super()._set(**{k: v for k, v in kwargs.items() if v is not None})
            self.config()
        except BaseException:
            self._paramMap = saved
            raise
        return self

    def config(self) -> DedupConfig:
        """The run's settings: the defaults, with every Param that is set (cross-checked). Only set Params count as
        given, as a keyword of ``deduplicate`` does: some defaults follow from what is given (the pass's rule under
        verification, an existing index's sizing), so a Param left at its default must not pose as a choice."""
        values = {s: self.getOrDefault(p) for p, s in _SETTING_OF.items() if self.isSet(self.getParam(p))}
        return DedupConfig().replace(**values)

    def _transform(self, dataset):
        result = run(dataset, self.config())
        self.lastSummary = result.summary
        return result.df


def _sizing(param: str) -> bool:
    return DedupConfig.__dataclass_fields__[_SETTING_OF[param]].metadata["setting"].sizes is not None


def _param_doc(f, spec: Setting) -> str:
    """The Param's doc: the setting's help, and for a sizing Param (left undefined so that an existing index keeps its
    own sizing) what an undefined value means, so that explainParams' "(undefined)" is not read as "no default"."""
    if spec.sizes is None:
        return spec.help
    rates = (f"{DedupConfig().new_index_p_effective:g} with verification, "
             f"{DedupConfig(verify=False).new_index_p_effective:g} without")
    new = {"capacity": "the number of input documents", "p_effective": rates}.get(spec.sizes, DEFAULTS[f.name])
    return f"{spec.help}; undefined: a new index uses {new}, an existing index keeps its own"


def _declare_params() -> None:
    """One Param, getter and setter per setting that has a Param name."""
    for f, spec in settings(scope="run"):
        if spec.param is None:
            continue
        pname = _param_name(f.name, spec)
        _SETTING_OF[pname] = f.name
        setattr(LSHBloomDeduplicator, pname,
                Param(Params._dummy(), pname, _param_doc(f, spec), typeConverter=_converter(f.name, str(f.type), spec)))
        suffix = pname[0].upper() + pname[1:]

        def getter(self, _p=pname):
            return self.getOrDefault(_p) if self.isDefined(self.getParam(_p)) else None

        def setter(self, value, _p=pname):
            return self._set(**{_p: value})

        getter.__doc__ = f"{spec.help} (setting {f.name}; None when unset)"
        setter.__doc__ = f"Set {pname}: {spec.help} (checked; None unsets)."
        setattr(LSHBloomDeduplicator, f"get{suffix}", getter)
        setattr(LSHBloomDeduplicator, f"set{suffix}", setter)


_declare_params()
