"""Shared pytest set-up: the store conformance suite ships in the package
(:mod:`jiyi.testing.conformance`); registered here, its asserts get pytest's messages."""

import pytest

pytest.register_assert_rewrite("jiyi.testing.conformance")
