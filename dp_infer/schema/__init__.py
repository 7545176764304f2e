"""Your own data: a public schema drives a data-independent feature map.

* :mod:`~dp_infer.schema.spec` -- the schema model (:class:`Schema`, :class:`Column`,
  :class:`Target`) and its validation; :mod:`~dp_infer.schema.constructors` -- its Python form;
* :mod:`~dp_infer.schema.io` -- YAML / JSON schema files;
* :mod:`~dp_infer.schema.feature_map` -- :class:`FeatureMap`: identifiable coding, scaling from
  declared bounds, the exact row-norm bound;
* :mod:`~dp_infer.schema.admissible` -- :class:`AdmissibleRows`, the rows the map can produce;
* :mod:`~dp_infer.schema.readers` -- CSV / Parquet / DataFrame readers (pandas, pyarrow);
* :mod:`~dp_infer.schema.report` -- the NON-PRIVATE local data report;
* :mod:`~dp_infer.schema.draft` -- draft a schema from data (non-private, or private via OpenDP);
* :mod:`~dp_infer.schema.adult` -- UCI Adult from its raw files through the shipped schema.
"""

from .admissible import AdmissibleRows, ConstantBlock, IntervalBlock, OneOfBlock, UnionBlock
from .feature_map import EncodedData, FeatureMap
from .io import load_schema, save_schema, schema_to_yaml
from .readers import read_table
from .report import ClippingWarning, DataReport
from .constructors import binary, binary_target, categorical, count_target, numeric, numeric_target, ordinal
from .spec import Column, Missing, Schema, SchemaError, Target

__all__ = [
    "AdmissibleRows", "ClippingWarning", "Column", "ConstantBlock", "DataReport", "EncodedData",
    "FeatureMap", "IntervalBlock", "Missing", "OneOfBlock", "Schema", "SchemaError", "Target",
    "UnionBlock", "binary", "binary_target", "categorical", "count_target", "encode", "load_schema",
    "numeric", "numeric_target", "ordinal", "read_table", "save_schema", "schema_to_yaml",
]


def encode(data, schema, *, target: str = "required", **read_kwargs) -> EncodedData:
    """Shortcut: ``FeatureMap(load_schema(schema)).transform(data, ...)``."""
    return FeatureMap(load_schema(schema)).transform(data, target=target, **read_kwargs)
