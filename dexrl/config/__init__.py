"""The Hydra config tree and its checks.

``compose`` finds and composes the shipped configs, ``schema`` knows every key's type, range and
meaning (``--explain``), ``checks`` checks a whole config against the machine, and ``checked``
is the workflow ``train``, ``resume`` and ``validate`` share: compose, then check.
"""
