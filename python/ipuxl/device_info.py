"""``Session.device``: the device a Session runs on, as PopXL's
``popart.DeviceInfo`` describes it.

PopXL's ``Session.device`` is a ``popart.DeviceInfo``; programs test for
that type (``isinstance(d, popart.DeviceInfo)``, Graphcore's GPT-J and T5
pipelines do) and read its properties. ipuxl's devices are the simulator
(``"ipu_model"``, ``"cpu"``, and ``"ipu_hw"`` run there), so a
:class:`DeviceInfo` describes the modelled device: its type, the IPUs the
Session uses, tiles per IPU and IPU version of the modelled chip, and
whether the Session is attached. Attaching and detaching go through the
Session's context manager; ``attach``/``detach`` on the DeviceInfo raise
``NotImplementedError`` naming them.
"""
import enum

__all__ = ["DeviceInfo", "DeviceType"]


class DeviceType(enum.Enum):
    """PopART's ``popart.DeviceType`` (the members PopXL's devices map to)."""
    IpuModel = 0
    Cpu = 1
    Ipu = 2
    OfflineIpu = 3
    Sim = 4


class DeviceInfo:
    """The device of one Session (read-only; PopART's property names)."""

    def __init__(self, session):
        self._session = session

    @property
    def type(self) -> DeviceType:
        # "ipu_hw" runs on the simulator (Session says so when it falls back).
        return DeviceType.Cpu if self._session._device == "cpu" else DeviceType.IpuModel

    @property
    def numIpus(self) -> int:  # noqa: N802 - PopART's name
        return 1 if self._session._device == "cpu" else self._session._get_ipu_count()

    def _model(self):
        from .profile.model import IpuModel

        return self._session._model or IpuModel.from_env()

    @property
    def ipuVersion(self) -> str:  # noqa: N802 - PopART's name
        return "" if self._session._device == "cpu" else self._model().version

    @property
    def tilesPerIPU(self) -> int:  # noqa: N802 - PopART's name
        if self._session._device == "cpu":
            return 1   # PopART's Cpu device: one IPU of one tile
        from .profile.report import _TILES_PER_IPU

        model = self._model()
        return model.tiles_per_ipu or _TILES_PER_IPU[model.version]

    tilesPerIpu = tilesPerIPU  # noqa: N815 - PopART binds both spellings

    @property
    def isAttached(self) -> bool:  # noqa: N802 - PopART's name
        return self._session.is_attached

    def _through_session(self, name):
        raise NotImplementedError(
            f"DeviceInfo.{name}: ipuxl attaches a device through its Session "
            f"(with session: ...), not through the DeviceInfo")

    def attach(self):
        self._through_session("attach")

    def detach(self):
        self._through_session("detach")

    def tryAttachUntilTimeout(self):  # noqa: N802 - PopART's name
        self._through_session("tryAttachUntilTimeout")

    def __eq__(self, other):
        return isinstance(other, DeviceInfo) and other._session is self._session

    def __hash__(self):
        return id(self._session)

    def __repr__(self):
        return (f"DeviceInfo(type={self.type.name}, numIpus={self.numIpus}, "
                f"ipuVersion={self.ipuVersion!r}, tilesPerIPU={self.tilesPerIPU}, "
                f"isAttached={self.isAttached})")
