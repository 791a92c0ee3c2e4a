import pytest


@pytest.fixture(autouse=True)
def _host_passes_on(monkeypatch):
    """These tests check what the host passes do, so they run with every
    pass on whatever the environment asks for the rest of the suite (a test
    that wants them off says so itself)."""
    for var in ("IPUXL_HOST_PASSES", "IPUXL_NO_FUSION", "IPUXL_CHECK_HOST_PASSES"):
        monkeypatch.delenv(var, raising=False)
