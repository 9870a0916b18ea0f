"""One communicator for the whole session: every rank runs the same tests in the same order
(launch: gnio-run -n N -- python -m pytest python/tests)."""

import pytest

import gnio


@pytest.fixture(scope="session")
def comm():
    c = gnio.Comm.from_env()
    yield c
    c.close()
