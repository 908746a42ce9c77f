"""The C++ extension of the order path (``fixgw/sendpath.py``); everything else is in
pyproject.toml. Optional: without a C++ compiler the install succeeds without it, and
``order_path = "native"`` says so at start."""

from setuptools import Extension, setup

setup(ext_modules=[Extension(
    "fixgw._sendpath", ["fixgw/_sendpath.cpp"],
    include_dirs=["third_party/quickfix"],  # QuickFIX 1.16.0's headers: the version of the quickfix-tls wheel
    extra_compile_args=["-std=c++17", "-O2"],
    language="c++",
    optional=True,
)])
