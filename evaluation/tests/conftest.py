"""The product's session-wide ``spark`` fixture (tests/conftest.py), shared with the research tests."""

import importlib.util
import os
import sys

_PRODUCT_TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tests")
_PRODUCT_CONFTEST = os.path.join(_PRODUCT_TESTS, "conftest.py")
# The product's conftest imports its support modules (spark_support) by name, as its own tests do.
if _PRODUCT_TESTS not in sys.path:
    sys.path.append(_PRODUCT_TESTS)
_spec = importlib.util.spec_from_file_location("_lshbloom_product_conftest", _PRODUCT_CONFTEST)
_product = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_product)

spark = _product.spark
