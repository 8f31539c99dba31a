"""Typed stack configuration and the data it is checked against (catalog, permissions).

Importing this package loads no cloud SDK: the policy pack and the offline plan use it too.
"""
